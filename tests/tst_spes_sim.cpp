// Issue 3, acceptance 2 and 4: a short simulated swarm on the bundled corpus (a tiny model, a few
// steps) and the mechanics it must show: loss falls; after every merge all peers hold
// bit-identical weights; an expert changes only through its owners' contributions (exactly
// base + the owner's decoded delta), an expert nobody owns never changes, shared tensors are the
// mean; the warm-up comes after the aggregate; FedAvg averages every tensor; the centralized
// baseline sees the same tokens; centered clipping keeps the peers identical; the outer Nesterov
// rule keeps one momentum on every peer and survives a save and load (issue 18).
#ifndef Q_MOC_RUN  // moc need not parse LibTorch
#include "core/checkpoint/safetensors.h"
#include "core/model/tensor_names.h"
#include "core/sim/simulated_swarm.h"
#include "core/sync/outer_step.h"
#include "core/sync/validate.h"
#include "core/train/trainer.h"
#include "support/default_run.h"

#include <torch/torch.h>
#endif

#include <QTemporaryDir>
#include <QtTest>

#include <map>
#include <set>

using namespace es;

namespace {

// Vocab stays the run's (the tokens need it); everything else is tiny so a step takes milliseconds.
sim::SimConfig tinyConfig(int peers, int steps, int syncEvery) {
  const auto& data = test::defaultRunData();
  sim::SimConfig c;
  c.peers = peers;
  c.steps = steps;
  c.syncEvery = syncEvery;
  c.model = data.manifest.model;
  c.model.dModel = 64;
  c.model.nLayers = 2;
  c.model.nHeads = 2;
  c.model.nExperts = 4;
  c.model.expertHidden = 128;
  c.model.seqLen = 64;
  c.train = data.manifest.train;
  c.train.batchSize = 2;
  c.train.lr = 3e-3;
  c.train.warmupSteps = 2;
  c.train.totalSteps = steps;
  c.train.evalBatches = 4;
  c.seed = data.manifest.seed;
  return c;
}

std::map<std::string, torch::Tensor> byName(const ckpt::NamedTensors& tensors) {
  return {tensors.begin(), tensors.end()};
}

// base + mean of the deltas, in float64 and rounded once (the merge's documented arithmetic).
torch::Tensor basePlusMean(const torch::Tensor& base, const std::vector<torch::Tensor>& deltas) {
  auto sum = deltas.front().to(torch::kDouble);
  for (std::size_t i = 1; i < deltas.size(); ++i) sum = sum + deltas[i].to(torch::kDouble);
  return (base.to(torch::kDouble) + sum / double(deltas.size())).to(torch::kFloat);
}

bool close(const torch::Tensor& a, const torch::Tensor& b) { return torch::allclose(a, b, 0.0, 1e-6); }

// Failures seen inside the merge observer, reported by the test afterwards.
struct Checks {
  QStringList failures;
  int checked = 0;
  void expect(bool ok, const QString& what) {
    ++checked;
    if (!ok && failures.size() < 5) failures << what;
  }
  QString report() const { return failures.join("; "); }
};

sim::SimResult run(sim::Strategy strategy, const sim::SimConfig& config, const sim::MergeObserver& observer = {}) {
  auto result = sim::runSimulation(
      strategy, config, test::defaultRunData(), [](const std::string&) {}, observer);
  if (!result) qFatal("simulation failed: %s", result.error().c_str());
  return std::move(*result);
}

}  // namespace

class SpesSimTest : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void initTestCase() { train::configureTrainingRuntime(1); }

  void assignsDisjointBlocksThenReplicas() {
    QCOMPARE(sim::assignExperts(4, 8, 2), (std::vector<std::vector<int>>{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
    QCOMPARE(sim::assignExperts(4, 4, 2), (std::vector<std::vector<int>>{{0, 1}, {2, 3}, {0, 1}, {2, 3}}));
    QCOMPARE(sim::assignExperts(3, 4, 2), (std::vector<std::vector<int>>{{0, 1}, {2, 3}, {0, 1}}));
    auto tokens = std::make_shared<const std::vector<std::uint16_t>>(std::vector<std::uint16_t>{1, 2, 3, 4, 5, 6, 7});
    const auto shards = sim::splitTokens(tokens, 3);
    QCOMPARE(shards.size(), std::size_t(3));
    QCOMPARE(*shards[0], (std::vector<std::uint16_t>{1, 2}));
    QCOMPARE(*shards[2], (std::vector<std::uint16_t>{5, 6, 7}));
    const auto dealt = sim::splitTokens(tokens, 2, 2);  // blocks {1,2} {3,4} {5,6} {7}, round-robin
    QCOMPARE(*dealt[0], (std::vector<std::uint16_t>{1, 2, 5, 6}));
    QCOMPARE(*dealt[1], (std::vector<std::uint16_t>{3, 4, 7}));
  }

  // Two peers own experts {0} and {1}; experts 2 and 3 have no owner. int8 through contribution
  // files, as between real peers; no warm-up, so every change is attributable.
  void spesExpertsChangeOnlyThroughTheirOwners() {
    auto config = tinyConfig(2, 12, 4);
    config.expertsPerPeer = 1;
    config.codec = sync::Codec::Int8;
    QTemporaryDir files;
    config.contributionDir = files.path().toStdString();
    Checks checks;
    std::map<std::string, torch::Tensor> initialUnowned;
    int merges = 0;
    auto observer = [&](const sim::MergeRecord& r) {
      ++merges;
      const auto base = byName(r.base), merged = byName(r.merged);
      checks.expect(r.contributions.size() == 2, "both contributions accepted");
      std::map<std::string, std::map<std::string, torch::Tensor>> deltaOf;  // sender -> deltas
      for (std::size_t p = 0; p < r.contributions.size(); ++p) {
        const auto& c = r.contributions[p];
        deltaOf[c.sender] = byName(c.deltas);
        const std::set<int> own(r.claims[p].begin(), r.claims[p].end());
        for (const auto& [name, t] : r.base) {  // exactly shared ∪ the sender's own experts
          const auto e = model::expertOf(name);
          const bool expected = !e || own.count(e->expert);
          checks.expect(deltaOf[c.sender].count(name) == (expected ? 1u : 0u),
                        QString::fromStdString(c.sender + " sent " + name));
        }
        for (const auto& [name, t] : r.local[p]) {  // nobody else's expert moved on this peer
          const auto e = model::expertOf(name);
          if (e && !own.count(e->expert))
            checks.expect(torch::equal(t, base.at(name)), QString::fromStdString(name + " moved locally"));
        }
      }
      for (const auto& [name, before] : base) {
        const auto e = model::expertOf(name);
        if (!e) {  // shared: the mean of both peers' deltas
          const bool both = deltaOf["peer-0"].count(name) && deltaOf["peer-1"].count(name);
          checks.expect(
              both && close(merged.at(name), basePlusMean(before, {deltaOf["peer-0"][name], deltaOf["peer-1"][name]})),
              QString::fromStdString(name + " is not the mean"));
          continue;
        }
        const auto owners = r.owners.find(e->expert);
        if (owners == r.owners.end()) {  // unowned: untouched by the merge, and since the start
          checks.expect(torch::equal(merged.at(name), before), QString::fromStdString(name + " unowned but changed"));
          if (!initialUnowned.count(name)) initialUnowned[name] = before;
          checks.expect(torch::equal(merged.at(name), initialUnowned[name]), QString::fromStdString(name + " drifted"));
        } else {  // exactly base + the single owner's decoded delta
          checks.expect(owners->second.size() == 1, "one owner per expert");
          const auto& owner = *owners->second.begin();
          const bool sent = deltaOf[owner].count(name) == 1;
          checks.expect(sent && torch::equal(merged.at(name), basePlusMean(before, {deltaOf[owner][name]})),
                        QString::fromStdString(name + " != base + delta of " + owner));
          checks.expect(!torch::equal(merged.at(name), before), QString::fromStdString(name + " did not train"));
        }
      }
    };
    const auto result = run(sim::Strategy::Spes, config, observer);
    QVERIFY2(checks.failures.isEmpty(), qPrintable(checks.report()));
    QCOMPARE(merges, 3);
    QVERIFY(checks.checked > 3 * 2 * 40);                     // every tensor of every merge was looked at
    QCOMPARE(initialUnowned.size(), std::size_t(2 * 2 * 3));  // experts 2, 3 × 2 layers × w1 w2 w3
    QCOMPARE(result.merges, 3);
    QVERIFY(result.peersIdenticalAfterEveryMerge);
    QCOMPARE(result.rejectedContributions, 0);
    QCOMPARE(result.curve.size(), std::size_t(4));
    qInfo("val loss %.4f -> %.4f", result.initialValLoss, result.finalValLoss);
    QVERIFY2(result.finalValLoss < result.initialValLoss - 0.3, qPrintable(QString::number(result.finalValLoss)));

    QCOMPARE(result.bytes.size(), std::size_t(3 * 2));
    for (const auto& b : result.bytes) {
      QCOMPARE(b.f32, b.spesReference);  // f32 deltas of the trainable tensors = SPES's upload
      QCOMPARE(b.bf16 * 2, b.f32);
      QVERIFY(b.int8 < b.bf16 * 6 / 10);  // 1 byte per value + a float scale per row
    }
    const auto& m = config.model;  // AdamW moments (2 × f32) of shared tensors + one expert
    QCOMPARE(result.optimizerStateBytesPerPeer, 8 * (m.totalParameters() - m.nLayers * 3 * m.expertParameters()));
  }

  // Replicas: four peers, two experts each, four experts: every expert has two owners whose
  // deltas are averaged.
  void replicasAreAveraged() {
    auto config = tinyConfig(4, 4, 4);
    config.expertsPerPeer = 2;
    Checks checks;
    auto observer = [&](const sim::MergeRecord& r) {
      const auto base = byName(r.base), merged = byName(r.merged);
      std::map<std::string, std::map<std::string, torch::Tensor>> deltaOf;
      for (const auto& c : r.contributions) deltaOf[c.sender] = byName(c.deltas);
      for (const auto& [name, before] : base) {
        const auto e = model::expertOf(name);
        if (!e) continue;
        std::vector<torch::Tensor> deltas;
        for (const auto& owner : r.owners.at(e->expert))
          if (deltaOf[owner].count(name)) deltas.push_back(deltaOf[owner][name]);
        checks.expect(deltas.size() == 2, "two owners' deltas");
        checks.expect(!deltas.empty() && close(merged.at(name), basePlusMean(before, deltas)),
                      QString::fromStdString(name));
      }
    };
    const auto result = run(sim::Strategy::Spes, config, observer);
    QVERIFY2(checks.failures.isEmpty(), qPrintable(checks.report()));
    QCOMPARE(checks.checked, 2 * 2 * 4 * 3);  // (owners + value) × 2 layers × 4 experts × 3 parts
    QVERIFY(result.peersIdenticalAfterEveryMerge);
  }

  // With the warm-up on, the merged state is the warm-up applied to the aggregate, with
  // warmupAlpha at that step, and it really blends experts.
  void warmupFollowsTheAggregate() {
    auto config = tinyConfig(2, 8, 4);
    config.expertsPerPeer = 2;
    config.codec = sync::Codec::BF16;
    config.warmup = true;
    config.warmupConfig = {4, 0.5, 100, 2};
    Checks checks;
    int blended = 0;
    auto observer = [&](const sim::MergeRecord& r) {
      checks.expect(r.alpha == sync::warmupAlpha(config.warmupConfig, r.step) && r.alpha > 0, "alpha");
      const auto plain = sync::aggregate(r.base, r.contributions, r.owners);
      const auto expected = byName(sync::applyMergingWarmup(plain, config.model, r.alpha, 2));
      const auto aggregated = byName(plain);
      for (const auto& [name, t] : r.merged) {
        checks.expect(torch::equal(t, expected.at(name)), QString::fromStdString(name));
        if (model::expertOf(name)) blended += torch::equal(t, aggregated.at(name)) ? 0 : 1;
      }
    };
    const auto result = run(sim::Strategy::Spes, config, observer);
    QVERIFY2(checks.failures.isEmpty(), qPrintable(checks.report()));
    QCOMPARE(result.warmupMerges, 2);
    QCOMPARE(blended, 2 * 2 * 4 * 3);  // every expert tensor of both merges moved towards its donors
    QVERIFY(result.peersIdenticalAfterEveryMerge);
  }

  // FedAvg: every peer trains and sends everything; every tensor becomes the mean.
  void fedAvgAveragesEveryTensor() {
    auto config = tinyConfig(2, 8, 4);
    Checks checks;
    auto observer = [&](const sim::MergeRecord& r) {
      const auto merged = byName(r.merged);
      const auto d0 = byName(r.contributions.at(0).deltas), d1 = byName(r.contributions.at(1).deltas);
      checks.expect(d0.size() == r.base.size() && d1.size() == r.base.size(), "full contributions");
      for (const auto& [name, before] : r.base)
        checks.expect(d0.count(name) && d1.count(name) &&
                          close(merged.at(name), basePlusMean(before, {d0.at(name), d1.at(name)})),
                      QString::fromStdString(name));
    };
    const auto result = run(sim::Strategy::FedAvg, config, observer);
    QVERIFY2(checks.failures.isEmpty(), qPrintable(checks.report()));
    QCOMPARE(result.merges, 2);
    QVERIFY(result.peersIdenticalAfterEveryMerge);
    qInfo("val loss %.4f -> %.4f", result.initialValLoss, result.finalValLoss);
    QVERIFY(result.finalValLoss < result.initialValLoss - 0.2);
    QCOMPARE(result.optimizerStateBytesPerPeer, 8 * config.model.totalParameters());
  }

  // Centered clipping through the whole path (int8, 4 peers, each merging in its own arrival
  // order): peers stay bit-identical, nothing honest is rejected, the loss falls.
  void centeredClipKeepsPeersIdentical() {
    auto config = tinyConfig(4, 8, 4);
    config.codec = sync::Codec::Int8;
    config.aggregate = {sync::SharedRule::CenteredClip, 3, 1.0};
    const auto result = run(sim::Strategy::Spes, config);
    QVERIFY(result.peersIdenticalAfterEveryMerge);
    QCOMPARE(result.rejectedContributions, 0);
    qInfo("val loss %.4f -> %.4f", result.initialValLoss, result.finalValLoss);
    QVERIFY(result.finalValLoss < result.initialValLoss - 0.2);
  }

  // Issue 18: DiLoCo's outer Nesterov step on the shared tensors. After every merge each peer
  // holds the merged state of the formula (core/sync/outer_step.h) and the same momentum (the
  // identity check covers it); a state saved to a file and loaded again (base + momentum, as a
  // snapshot carries them) merges the next round bit-identically — a newcomer's start.
  void theOuterRuleKeepsOneMomentumOnEveryPeer() {
    auto config = tinyConfig(2, 12, 4);
    config.outer = {0.7, 0.9, sync::OuterRule::On::Shared};
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const std::string file = dir.filePath("state.safetensors").toStdString();
    Checks checks;
    ckpt::NamedTensors momentum;  // what the formula says the momentum is now
    bool loaded = false;          // a state of the previous round is in `file`
    auto observer = [&](const sim::MergeRecord& r) {
      const auto aggregated = sync::aggregate(r.base, r.contributions, r.owners);
      if (loaded) {  // the next round from the saved state, as a newcomer that adopted it would merge
        auto reloaded = ckpt::loadSafetensors(file);
        checks.expect(reloaded.ok(), "reload");
        ckpt::NamedTensors base, saved;
        for (const auto& [name, t] : r.base) base.emplace_back(name, reloaded->find(name));
        for (const auto& [name, t] : momentum) saved.emplace_back(name, reloaded->find(name));
        checks.expect(sync::stateFingerprint(base) == sync::stateFingerprint(r.base), "saved base");
        const auto again =
            sync::applyOuterStep(base, sync::aggregate(base, r.contributions, r.owners), saved, config.outer);
        checks.expect(sync::stateFingerprint(again.merged) == sync::stateFingerprint(r.merged), "newcomer's merge");
      }
      const auto expected = sync::applyOuterStep(r.base, aggregated, momentum, config.outer);
      checks.expect(sync::stateFingerprint(expected.merged) == sync::stateFingerprint(r.merged), "merged");
      checks.expect(sync::stateFingerprint(expected.momentum) == sync::stateFingerprint(r.momentum), "momentum");
      checks.expect(!r.momentum.empty(), "a momentum");
      int stepped = 0;  // shared tensors moved beyond the plain aggregate; experts exactly it
      for (std::size_t i = 0; i < r.merged.size(); ++i)
        if (model::isExpertTensor(r.merged[i].first))
          checks.expect(torch::equal(r.merged[i].second, aggregated[i].second), "expert merged plainly");
        else
          stepped += torch::equal(r.merged[i].second, aggregated[i].second) ? 0 : 1;
      checks.expect(stepped > 0, "the outer step moved the shared tensors");
      momentum = r.momentum;
      checks.expect(ckpt::saveSafetensors(file, sync::withMomentum(r.merged, r.momentum), {}).ok(), "save");
      loaded = true;
    };
    const auto result = run(sim::Strategy::Spes, config, observer);
    QVERIFY2(checks.failures.isEmpty(), qPrintable(checks.report()));
    QCOMPARE(result.merges, 3);
    QVERIFY(result.peersIdenticalAfterEveryMerge);
    QVERIFY(result.finalValLoss < result.initialValLoss - 0.2);
  }

  // Centralized: the same initial weights, the same tokens (P× the batch), all experts' state.
  void centralizedSeesTheSameTokens() {
    const auto config = tinyConfig(2, 8, 4);
    const auto central = run(sim::Strategy::Centralized, config);
    const auto spes = run(sim::Strategy::Spes, config);
    const std::int64_t tokens = 8LL * 2 * config.train.batchSize * config.model.seqLen;
    QCOMPARE(central.tokensTrained, tokens);
    QCOMPARE(spes.tokensTrained, tokens);
    QCOMPARE(central.initialValLoss, spes.initialValLoss);  // same weights, same validation slice
    QCOMPARE(central.curve.size(), spes.curve.size());
    qInfo("val loss %.4f -> centralized %.4f, spes %.4f", central.initialValLoss, central.finalValLoss,
          spes.finalValLoss);
    QVERIFY(central.finalValLoss < central.initialValLoss - 0.2);
    QCOMPARE(central.merges, 0);
    QVERIFY(central.bytes.empty());
    QCOMPARE(central.optimizerStateBytesPerPeer, 8 * config.model.totalParameters());
    QVERIFY(spes.optimizerStateBytesPerPeer < central.optimizerStateBytesPerPeer);
  }
};

QTEST_APPLESS_MAIN(SpesSimTest)
#include "tst_spes_sim.moc"
