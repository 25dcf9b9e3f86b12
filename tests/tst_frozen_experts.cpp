// Acceptance 3: a peer that trains experts {0,1} leaves experts 2..7 bit-identical, without
// gradients and without optimizer state, while shared tensors and its own experts change.
#ifndef Q_MOC_RUN  // moc need not parse LibTorch
#include "core/model/tensor_names.h"
#include "core/train/trainer.h"
#include "core/train/trainer_impl.h"
#include "support/default_run.h"

#include <torch/torch.h>
#endif

#include <QtTest>

#include <map>
#include <set>

using namespace es;

class FrozenExpertsTest : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void trainsOnlySharedTensorsAndClaimedExperts() {
    torch::set_num_threads(1);
    const auto& data = test::defaultRunData();
    train::TrainerOptions options;
    options.model = data.manifest.model;
    options.train = data.manifest.train;
    options.train.batchSize = 2;  // mechanics, not quality: keep it quick
    options.seed = data.manifest.seed;
    options.localExperts = {1, 0};
    auto created = train::Trainer::create(options, data.train, data.val);
    QVERIFY2(created.ok(), created.ok() ? "" : created.error().c_str());
    auto& trainer = **created;
    QCOMPARE(trainer.localExperts(), (std::vector<int>{0, 1}));

    auto& model = trainer.impl().model;
    std::map<std::string, torch::Tensor> before;
    for (const auto& p : model->named_parameters()) before[p.key()] = p.value().detach().clone();

    for (int i = 0; i < 4; ++i) QVERIFY(std::isfinite(trainer.trainStep().loss));

    const std::set<std::string> trainable = [&] {
      auto names = trainer.trainableTensorNames();
      return std::set<std::string>(names.begin(), names.end());
    }();
    int frozenChecked = 0, changedShared = 0, changedLocal = 0;
    for (const auto& p : model->named_parameters()) {
      const auto expert = model::expertOf(p.key());
      const bool same = torch::equal(p.value(), before[p.key()]);
      if (expert && expert->expert >= 2) {
        QVERIFY2(same, p.key().c_str());  // bit-identical
        QVERIFY2(!p.value().requires_grad(), p.key().c_str());
        QVERIFY2(!p.value().grad().defined(), p.key().c_str());    // no gradient
        QVERIFY2(trainable.count(p.key()) == 0, p.key().c_str());  // no optimizer state
        ++frozenChecked;
      } else {
        QVERIFY2(trainable.count(p.key()) == 1, p.key().c_str());
        QVERIFY2(!same, p.key().c_str());
        (expert ? changedLocal : changedShared) += 1;
      }
    }
    const auto& c = options.model;
    QCOMPARE(frozenChecked, c.nLayers * 6 * 3);
    QCOMPARE(changedLocal, c.nLayers * 2 * 3);
    QCOMPARE(changedShared, 3 + c.nLayers * 5);

    // Optimizer state exists for exactly the trainable tensors: shared + 2 of 8 experts.
    std::int64_t trainableParams = 0;
    for (const auto& slot : trainer.impl().optimizer->slots()) trainableParams += slot.param.numel();
    const std::int64_t expected = c.totalParameters() - c.nLayers * 6 * c.expertParameters();
    QCOMPARE(trainableParams, expected);
    QCOMPARE(trainer.optimizerStateBytes(), 2 * 4 * expected);
  }

  void rejectsExpertsOutsideTheModel() {
    const auto& data = test::defaultRunData();
    train::TrainerOptions options;
    options.model = data.manifest.model;
    options.localExperts = {0, 8};
    auto created = train::Trainer::create(options, data.train, data.val);
    QVERIFY(!created.ok());
    QVERIFY(created.error().find("out of range") != std::string::npos);
    options.localExperts = {3, 3};
    QVERIFY(!train::Trainer::create(options, data.train, data.val).ok());
  }
};

QTEST_APPLESS_MAIN(FrozenExpertsTest)
#include "tst_frozen_experts.moc"
