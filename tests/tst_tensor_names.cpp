// The tensor-naming scheme is a wire format: these cases pin it down.
#include "core/model/tensor_names.h"

#include <QtTest>

using es::model::expertOf;
using es::model::expertTensorName;

class TensorNamesTest : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void recognisesExpertTensors() {
    const auto ref = expertOf("layers.3.moe.experts.5.w1");
    QVERIFY(ref.has_value());
    QCOMPARE(ref->layer, 3);
    QCOMPARE(ref->expert, 5);
    QVERIFY(expertOf("layers.12.moe.experts.63.w2").has_value());
    QCOMPARE(expertOf("layers.0.moe.experts.0.w3")->expert, 0);
  }

  void treatsEverythingElseAsShared() {
    for (const char* name : {"tok_emb.weight", "lm_head.weight", "norm.weight", "layers.0.attn.wqkv.weight",
                             "layers.0.moe.router.weight", "layers.1.ffn_norm.weight"}) {
      QVERIFY2(es::model::isSharedTensor(name), name);
    }
  }

  void rejectsLookalikeNames() {
    for (const char* name : {"layers.3.moe.experts.5.w4", "layers.3.moe.experts.5.w1.x", "layers.03.moe.experts.5.w1",
                             "layers.3.moe.experts.05.w1", "layers.-3.moe.experts.5.w1", "layers..moe.experts.5.w1",
                             "xlayers.3.moe.experts.5.w1", "layers.3.moe.experts.5.", "layers.3.moe.experts.5",
                             "layers.3.moe.expert.5.w1", "layers.3.moe.experts.1234567.w1", ""}) {
      QVERIFY2(!expertOf(name).has_value(), name);
    }
  }

  void buildsNamesThatParseBack() {
    for (int layer : {0, 7, 31})
      for (int expert : {0, 9, 127})
        for (const char* part : {"w1", "w2", "w3"}) {
          const auto ref = expertOf(expertTensorName(layer, expert, part));
          QVERIFY(ref.has_value());
          QCOMPARE(ref->layer, layer);
          QCOMPARE(ref->expert, expert);
        }
  }
};

QTEST_APPLESS_MAIN(TensorNamesTest)
#include "tst_tensor_names.moc"
