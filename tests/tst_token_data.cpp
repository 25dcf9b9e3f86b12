// Batches, the run manifest, and the schedules: deterministic and exactly as specified.
#ifndef Q_MOC_RUN  // moc need not parse LibTorch
#include "core/train/batch_sampler.h"
#include "core/train/run_manifest.h"

#include <torch/torch.h>
#endif

#include <QtTest>

#include <numeric>

using namespace es::train;

namespace {

TokenBuffer counting(std::size_t n) {
  auto v = std::make_shared<std::vector<std::uint16_t>>(n);
  std::iota(v->begin(), v->end(), std::uint16_t(0));
  return v;
}

const char* kManifest = R"({"format":1,"name":"t","seed":7,
  "model":{"vocab_size":512,"d_model":64,"n_layers":2,"n_heads":2,"n_experts":4,"top_k":1,"expert_hidden":32,"seq_len":32},
  "train":{"batch_size":2,"total_steps":100,"warmup_steps":10},
  "data":{"train_corpus":["a.txt"],"val_corpus":"b.txt"},"swarm":{"sync_every":5}})";

}  // namespace

class TokenDataTest : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void batchesAreAPureFunctionOfSeedAndCursor() {
    BatchSampler a(counting(5000), 16, 4, 42), b(counting(5000), 16, 4, 42), other(counting(5000), 16, 4, 43);
    QVERIFY(torch::equal(a.at(7).inputs, b.at(7).inputs));
    QVERIFY(!torch::equal(a.at(7).inputs, a.at(8).inputs));
    QVERIFY(!torch::equal(a.at(7).inputs, other.at(7).inputs));
    const auto batch = a.at(3);
    QCOMPARE(batch.inputs.sizes().vec(), (std::vector<int64_t>{4, 16}));
    // Targets are the inputs shifted by one token (the counting corpus makes that +1).
    QVERIFY(torch::equal(batch.targets, batch.inputs + 1));
    QVERIFY(batch.inputs.max().item<int64_t>() < 5000);
  }

  void validationSliceIsConsecutiveFromTheStart() {
    BatchSampler s(counting(100), 10, 3, 0);
    const auto first = s.sequential(0);
    QCOMPARE(first.inputs[0][0].item<int64_t>(), 0);
    QCOMPARE(first.inputs[1][0].item<int64_t>(), 10);
    QCOMPARE(first.inputs[2][0].item<int64_t>(), 20);
    const auto third = s.sequential(3);  // windows 9.. only one fits (90..100 needs 101 tokens: none)
    QVERIFY(!third.inputs.defined());
    QCOMPARE(s.sequential(2).inputs.size(0), 3);  // windows 6, 7, 8 start at 60, 70, 80
  }

  void manifestParsesAndRejectsMistakes() {
    auto m = parseRunManifest(kManifest);
    QVERIFY2(m.ok(), m.ok() ? "" : m.error().c_str());
    QCOMPARE(m->model.nExperts, 4);
    QCOMPARE(m->train.batchSize, 2);
    QCOMPARE(m->train.lr, 2e-3);  // default kept
    QCOMPARE(m->seed, std::uint64_t(7));
    QCOMPARE(m->swarm.syncEvery, 5);
    QCOMPARE(m->swarm.leaseRounds, SwarmPolicy{}.leaseRounds);  // absent: the default

    const std::string base = kManifest;
    auto replaced = [&](const std::string& from, const std::string& to) {
      std::string s = base;
      s.replace(s.find(from), from.size(), to);
      return parseRunManifest(s);
    };
    auto typo = replaced("\"batch_size\"", "\"batchsize\"");
    QVERIFY(!typo.ok() && typo.error().find("batchsize") != std::string::npos);
    auto badTopK = replaced("\"top_k\":1", "\"top_k\":9");
    QVERIFY(!badTopK.ok() && badTopK.error().find("top_k") != std::string::npos);
    auto badLr = replaced("\"batch_size\":2", "\"batch_size\":-2");
    QVERIFY(!badLr.ok() && badLr.error().find("batch_size") != std::string::npos);
    QVERIFY(!parseRunManifest("{").ok());
    QVERIFY(!parseRunManifest("[]").ok());
  }

  void learningRateWarmsUpThenFollowsTheCosine() {
    TrainConfig c;
    c.lr = 1.0;
    c.minLrRatio = 0.1;
    c.warmupSteps = 10;
    c.totalSteps = 110;
    QCOMPARE(learningRateAt(c, 0), 0.1);
    QCOMPARE(learningRateAt(c, 9), 1.0);
    QCOMPARE(learningRateAt(c, 10), 1.0);
    QVERIFY(std::abs(learningRateAt(c, 60) - 0.55) < 1e-12);  // halfway: (1 + 0.1) / 2
    QVERIFY(std::abs(learningRateAt(c, 110) - 0.1) < 1e-12);
    QVERIFY(std::abs(learningRateAt(c, 500) - 0.1) < 1e-12);
  }

  void localBalanceFactorRampsFromPointSevenToOneOverTheFirstFifthOfTheRun() {
    QCOMPARE(localExpertBalanceFactor(0, 1000), 0.7);
    QVERIFY(std::abs(localExpertBalanceFactor(100, 1000) - 0.85) < 1e-12);
    QCOMPARE(localExpertBalanceFactor(200, 1000), 1.0);
    QCOMPARE(localExpertBalanceFactor(999, 1000), 1.0);
  }
};

QTEST_APPLESS_MAIN(TokenDataTest)
#include "tst_token_data.moc"
