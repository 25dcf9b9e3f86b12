// Issue 14, fetched content: the predicted sizes of contributions and snapshots against real
// files; MemorySwarm's metadata check; the node refusing a wrong-sized contribution (sender
// banned, round closed without it) and holding fetches back at its disk quota while it trains on.
#include "core/checkpoint/safetensors.h"
#include "core/model/moe_transformer.h"
#include "core/model/tensor_names.h"
#include "core/node/node.h"
#include "core/spes/spes_peer.h"
#include "core/sync/contribution_file.h"
#include "core/sync/fetch_size.h"
#include "core/sync/outer_step.h"
#include "core/train/corpus_prep.h"
#include "support/memory_swarm.h"
#include "support/node_notes.h"
#include "support/tiny_node.h"
#include "support/wait_until.h"

#include <QDirIterator>
#include <QFile>
#include <QFileInfo>
#include <QTemporaryDir>
#include <QTimer>

#include <functional>

#include <torch/torch.h>

using namespace es;
using namespace es::node;

namespace {

model::ModelConfig tinyModel() {
  model::ModelConfig m;
  m.vocabSize = 300;
  m.dModel = 32;
  m.nLayers = 2;
  m.nHeads = 2;
  m.nExperts = 4;
  m.expertHidden = 24;
  m.seqLen = 32;
  return m;
}

// Random deltas of every trainable tensor of a sender claiming `claims` (empty: all), the model's
// own parameter names and shapes.
ckpt::NamedTensors deltasFor(const model::ModelConfig& config, const std::set<int>& claims) {
  model::MoeTransformer net(config);
  ckpt::NamedTensors out;
  for (const auto& p : net->named_parameters()) {
    const auto expert = model::expertOf(p.key());
    if (!expert || claims.empty() || claims.count(expert->expert))
      out.emplace_back(p.key(), torch::randn_like(p.value()));
  }
  return out;
}

// Every file under `dir`, as the node's quota counts them.
std::int64_t folderBytes(const QString& dir) {
  std::int64_t bytes = 0;
  QDirIterator it(dir, QDir::Files | QDir::Hidden | QDir::NoSymLinks, QDirIterator::Subdirectories);
  while (it.hasNext()) {
    it.next();
    bytes += it.fileInfo().size();
  }
  return bytes;
}

}  // namespace

class FetchLimitsTest : public QObject {
  Q_OBJECT

  QTemporaryDir dir_;
  std::unique_ptr<train::RunData> data_;

 private Q_SLOTS:
  void modelTensorsAreTheModelsParameters() {
    const auto config = tinyModel();
    model::MoeTransformer net(config);
    std::map<std::string, std::vector<std::int64_t>> real;
    for (const auto& p : net->named_parameters()) real[p.key()] = p.value().sizes().vec();
    const auto predicted = sync::modelTensors(config);
    QCOMPARE(predicted.size(), real.size());
    for (const auto& t : predicted) {
      QVERIFY2(real.count(t.name), t.name.c_str());
      QCOMPARE(t.shape, real[t.name]);
    }
  }

  void contributionSizeIsExact_data() {
    QTest::addColumn<QString>("codec");
    QTest::addColumn<QString>("claims");
    QTest::addColumn<qint64>("round");
    for (const char* codec : {"f32", "bf16", "int8", "sparse/128/4096", "sparse/3/7"}) {
      QTest::newRow(qPrintable(QString("%1 all r1").arg(codec))) << codec << "" << qint64(1);
      QTest::newRow(qPrintable(QString("%1 1,3 r10").arg(codec))) << codec << "1,3" << qint64(10);
      QTest::newRow(qPrintable(QString("%1 2 r12345").arg(codec))) << codec << "2" << qint64(12345);
    }
  }
  void contributionSizeIsExact() {
    QFETCH(QString, codec);
    QFETCH(QString, claims);
    QFETCH(qint64, round);
    std::set<int> experts;
    for (const auto& e : claims.split(',', Qt::SkipEmptyParts)) experts.insert(e.toInt());
    const auto config = tinyModel();
    const sync::ContributionHeader header{std::string(64, 'a'), round, std::string(64, 'b'), "0123456789abcdef",
                                          codec.toStdString()};
    const auto path = dir_.filePath("c.safetensors").toStdString();
    QVERIFY(sync::saveContribution(path, header, deltasFor(config, experts)).ok());
    const auto real = QFileInfo(QString::fromStdString(path)).size();
    QCOMPARE(sync::contributionBytes(config, experts, header), real);
    const auto sizes = sync::contributionSizes(config, experts, header);
    QCOMPARE(int(sizes.size()), codec.startsWith("sparse") ? 4 : 3);  // the run's sparse codec beside the dense ones
    QVERIFY(std::find(sizes.begin(), sizes.end(), real) != sizes.end());
    QVERIFY(std::is_sorted(sizes.begin(), sizes.end()));
  }

  void snapshotSizeIsExact() {
    const auto config = tinyModel();
    model::MoeTransformer net(config);
    ckpt::NamedTensors weights;
    for (const auto& p : net->named_parameters()) weights.emplace_back(p.key(), p.value().detach().clone());
    const auto path = dir_.filePath("s.safetensors").toStdString();
    // SpesPeer::writeSnapshot's metadata.
    QVERIFY(
        ckpt::saveSafetensors(path, weights, {{"format", "expertswarm-snapshot"}, {"round", "42"}, {"run", "r"}}).ok());
    QCOMPARE(sync::snapshotBytes(config, "r", 42), QFileInfo(QString::fromStdString(path)).size());
    // With the outer rule (issue 18) the snapshot carries the momentum of every stepped tensor.
    for (const auto on : {sync::OuterRule::On::Shared, sync::OuterRule::On::Experts, sync::OuterRule::On::All}) {
      const sync::OuterRule rule{0.7, 0.9, on};
      QVERIFY(ckpt::saveSafetensors(path, sync::withMomentum(weights, sync::zeroMomentum(weights, rule)),
                                    {{"format", "expertswarm-snapshot"}, {"round", "42"}, {"run", "r"}})
                  .ok());
      const auto size = QFileInfo(QString::fromStdString(path)).size();
      QCOMPARE(sync::snapshotBytes(config, "r", 42, rule), size);
      QVERIFY(size > sync::snapshotBytes(config, "r", 42));
    }
  }

  // The default quota for the bundled run's model, stated: 3 × 32 × the largest contribution + 16
  // × the model; more than three rounds of 32 peers need whatever their codec.
  void defaultQuotaCoversThreeRoundsOf32Peers() {
    const model::ModelConfig defaults;
    const auto quota = sync::defaultDiskQuotaBytes(defaults);
    const sync::ContributionHeader h{std::string(64, 'r'), 10, std::string(64, 's'), "0123456789abcdef", "f32"};
    qInfo("default model: f32 contribution of all experts %lld bytes, default quota %lld MiB",
          static_cast<long long>(sync::contributionBytes(defaults, {}, h)), static_cast<long long>(quota >> 20));
    QVERIFY(quota > 3 * 32 * sync::contributionBytes(defaults, {}, h));
    QVERIFY(quota < (std::int64_t(8) << 30));  // and stays a volunteer's few GiB
  }

  void memorySwarmChecksTheLimits() {
    MemorySwarmHub hub("run");
    MemorySwarm sender(hub, "s"), receiver(hub, "r");
    QFile file(dir_.filePath("blob"));
    QVERIFY(file.open(QIODevice::WriteOnly));
    file.write(QByteArray(1000, 'x'));
    file.close();
    const auto id = sender.publish(file.fileName().toStdString());
    QVERIFY(id.ok());
    std::vector<es::ContentId> fetched, refused;
    SwarmEvents events;
    events.fetched = [&](const es::ContentId& i, const std::string&) { fetched.push_back(i); };
    events.fetchFailed = [&](const es::ContentId& i, const std::string&, bool r) {
      if (r) refused.push_back(i);
    };
    receiver.setEvents(events);
    const std::string into = dir_.filePath("fetched").toStdString();
    QVERIFY(receiver.fetch(*id, into, FetchLimits{{999, 1001}}).ok());
    QVERIFY(test::waitUntil([&] { return !refused.empty(); }, 5000));
    QVERIFY(fetched.empty());
    QVERIFY(receiver.fetch(*id, into, FetchLimits{{5, 1000}}).ok());
    QVERIFY(test::waitUntil([&] { return !fetched.empty(); }, 5000));
    QCOMPARE(int(refused.size()), 1);
    // The fetched copy lies in the fetch's folder (it counts on the receiver's disk) and goes when
    // the content is retired with its file; the publisher's file stays.
    const QString copy = dir_.filePath("fetched/blob");
    QVERIFY(QFileInfo(copy).size() == 1000);
    receiver.retire(*id, true);
    QVERIFY(!QFileInfo::exists(copy));
    QVERIFY(QFileInfo::exists(file.fileName()));
  }

  void initTestCase() {
    auto data = test::bundledRunData(dir_.filePath("run"));
    QVERIFY2(data.ok(), data ? "" : data.error().c_str());
    data_ = std::make_unique<train::RunData>(std::move(*data));
  }

  void nodeRefusesAWrongSizeAndBansItsSender();
  void aSnapshotIsAdoptedOnlyAsAnnouncedAndFinite();
  void nodeTrainsOnAtItsDiskQuota();
  void nodeFetchesWithinAQuotaJustAboveOneRoundsNeed();
  void aPeerStaleTwoRoundsInARowIsNotWaitedFor();
  void aStalePeerCopyingOurStateDoesNotWinItsExpertsBack();
  void aContributionIsSizedWithItsRoundsClaims();

 private:
  NodeConfig configFor(const QString& name, int rounds) const;
  struct NodeRun {
    std::vector<RoundSummary> rounds;
    test::NodeNotes notes;  // what the node decided (Node::noted)
  };
  // Runs `node` to its last round, keeping its rounds and messages; `onRound` sees each round.
  bool runToEnd(Node& node, NodeRun& run, const std::function<void(const RoundSummary&)>& onRound = {});
  bool runBesideStaleSender(const QString& name, bool claimOurState, NodeRun& run, std::vector<int>& finalClaims);
};

bool FetchLimitsTest::runToEnd(Node& node, NodeRun& run, const std::function<void(const RoundSummary&)>& onRound) {
  bool finished = false;
  connect(&node, &Node::roundClosed, this, [&run, onRound](const RoundSummary& s) {
    run.rounds.push_back(s);
    if (onRound) onRound(s);
  });
  connect(&node, &Node::message, this, [](const QString& m) { qInfo("%s", qPrintable(m)); });
  connect(&node, &Node::noted, this, [&run](const QString& kind, const QVariantMap& f) { run.notes.add(kind, f); });
  connect(&node, &Node::finished, this, [&finished] { finished = true; });
  node.start();
  return test::waitUntil([&] { return finished; }, 180000);
}

NodeConfig FetchLimitsTest::configFor(const QString& name, int rounds) const {
  NodeConfig c = test::tinyNodeConfig(*data_, dir_.path(), name);
  c.maxRounds = rounds;
  c.policy.deadlineMinSeconds = 3;
  c.policy.deadlineMaxSeconds = 6;
  c.peer.syncEvery = 2;
  c.runDir = dir_.filePath(name);
  return c;
}

// A liar announces a 5000-byte "contribution" for round 1, claiming expert 0: refused on its size
// (MemorySwarm checks it as the p2p layer checks metadata), the liar banned, and round 1 closes
// without waiting for its deadline. The node passed the exact sizes its claims predict.
void FetchLimitsTest::nodeRefusesAWrongSizeAndBansItsSender() {
  MemorySwarmHub hub("tiny-run");
  MemorySwarm swarm(hub, "refuse"), liar(hub, "liar");
  const auto id = test::announceJunk(liar, dir_.filePath("junk"), 5000, {1});
  QVERIFY(!id.empty());
  const auto config = configFor("refuse", 1);
  Node node(swarm, config, data_->train, data_->val);
  std::vector<RoundSummary> rounds;
  test::NodeNotes notes;
  connect(&node, &Node::roundClosed, this, [&](const RoundSummary& s) {
    rounds.push_back(s);
    for (const auto& v : s.verdicts) qInfo("verdict %s %d %s", v.sender.str().c_str(), v.accepted, v.reason.c_str());
  });
  connect(&node, &Node::message, this, [&](const QString& m) { qInfo("%s", qPrintable(m)); });
  connect(&node, &Node::noted, this, [&](const QString& kind, const QVariantMap& f) { notes.add(kind, f); });
  node.start();
  QVERIFY2(test::waitUntil([&] { return !rounds.empty(); }, 120000), "round 1 did not close");
  QVERIFY(!rounds[0].deadlineHit);  // the refused contribution is not waited for
  QCOMPARE(rounds[0].peers, 1);
  QVERIFY(notes.any("ban", [](const QVariantMap& f) {
    return f.value("peer").toString() == "liar" && f.value("reason").toString().startsWith("refused before download");
  }));
  QVERIFY(swarm.fetchLimits().count(id));
  const sync::ContributionHeader header{"tiny-run", 1, "liar", std::string(16, '0'), "int8"};
  QCOMPARE(swarm.fetchLimits().at(id).sizes, sync::contributionSizes(config.peer.trainer.model, {0}, header));
}

// A quota below what the run folder already holds: no fetch starts, the node says so once per
// round and in its view, and trains on (rounds close by their deadline with its own contribution).
// The other peer only announces contributions (it merges nothing, so no resync is asked for).
void FetchLimitsTest::nodeTrainsOnAtItsDiskQuota() {
  MemorySwarmHub hub("tiny-run");
  MemorySwarm swarm(hub, "quota"), other(hub, "quiet");
  QVERIFY(!test::announceJunk(other, dir_.filePath("junk2"), 100, {1, 2}).empty());
  auto config = configFor("quota", 2);
  config.diskQuotaBytes = 1;  // the state folder alone is more
  Node node(swarm, config, data_->train, data_->val);
  NodeRun run;
  QVERIFY2(runToEnd(node, run), "the node did not finish");
  const auto& [rounds, notes] = run;
  QCOMPARE(int(rounds.size()), 2);
  for (const auto& r : rounds) {
    QCOMPARE(r.peers, 1);  // only its own: nothing was fetched
    QVERIFY(r.deadlineHit);
  }
  QCOMPARE(notes.count("quota"), 2);  // once per round
  QVERIFY(node.view().diskQuotaReached);
  QCOMPARE(node.view().diskQuotaBytes, std::int64_t(1));
  QVERIFY(swarm.fetchLimits().empty());  // no fetch was even started
}

// Issue 14 acceptance: a quota just above one round's need. A first run alone measures the node's
// own files once it is in its stride (its run folder at the end: two state rounds, its last
// contributions and snapshots), the reserve it keeps for its next writes (the newest state round,
// its training state once more, a contribution, a snapshot) and a contribution's size. With the
// quota at that + 1.5 contributions, the node beside a peer fetches while its own files are still
// few (some round merges both), is then held back ("Disk quota reached": a fetch is let in only
// for the largest size the sender may send, 3.5 of these contributions), trains every round, and
// its run folder is never seen above the quota (sampled every 5 ms).
void FetchLimitsTest::nodeFetchesWithinAQuotaJustAboveOneRoundsNeed() {
  constexpr int kRounds = 6;
  const auto newestFile = [](const QString& dir) {
    const auto files = QDir(dir).entryInfoList(QDir::Files, QDir::Time);
    return files.isEmpty() ? std::int64_t(0) : std::int64_t(files.front().size());
  };
  std::int64_t own = 0, reserve = 0, contribution = 0;
  {
    MemorySwarmHub hub("tiny-run");
    MemorySwarm swarm(hub, "a-solo");
    const auto config = configFor("a-solo", kRounds);
    Node node(swarm, config, data_->train, data_->val);
    NodeRun run;
    QVERIFY2(runToEnd(node, run), "the solo node did not finish");
    own = folderBytes(config.runDir);
    const auto rounds = QDir(QString::fromStdString(config.peer.stateDir)).entryInfoList({"round-*"}, QDir::Dirs);
    QVERIFY(!rounds.isEmpty());
    const QString newest = rounds.back().absoluteFilePath();
    contribution = newestFile(config.contribDir);  // the peer's are as large: 2 experts each
    reserve = folderBytes(newest) + QFileInfo(newest + "/training-state.safetensors").size() + contribution +
              newestFile(config.snapshotDir);
  }
  QVERIFY(contribution > 0);
  const std::int64_t quota = own + reserve + 3 * contribution / 2;
  MemorySwarmHub hub("tiny-run");
  MemorySwarm swarm(hub, "a-tight"), other(hub, "b-peer");  // 1 against 1: the larger id gives in
  auto config = configFor("a-tight", kRounds);
  config.diskQuotaBytes = quota;
  std::int64_t most = 0;
  QTimer sampler;
  connect(&sampler, &QTimer::timeout, this, [&] { most = std::max(most, folderBytes(config.runDir)); });
  sampler.start(5);
  Node node(swarm, config, data_->train, data_->val),
      peer(other, configFor("b-peer", kRounds), data_->train, data_->val);
  bool peerDone = false;
  connect(&peer, &Node::finished, this, [&peerDone] { peerDone = true; });
  peer.start();
  NodeRun run;
  QVERIFY2(runToEnd(node, run), "the node at its quota did not finish");
  QVERIFY2(test::waitUntil([&] { return peerDone; }, 60000), "the peer did not finish");
  sampler.stop();
  int both = 0;
  for (const auto& r : run.rounds) both += r.peers == 2 ? 1 : 0;
  const int heldBack = run.notes.count("quota");
  qInfo(
      "own files %lld B, reserve %lld B, contribution %lld B: quota %lld B; the run folder at most %lld B; "
      "rounds merging both: %d of %d; rounds held back by the quota: %d",
      static_cast<long long>(own), static_cast<long long>(reserve), static_cast<long long>(contribution),
      static_cast<long long>(quota), static_cast<long long>(most), both, int(run.rounds.size()), heldBack);
  QCOMPARE(int(run.rounds.size()), kRounds);  // it trained every round
  QVERIFY2(both >= 1, "no contribution of the peer was ever fetched");
  QVERIFY2(heldBack >= 1 && node.view().diskQuotaReached, "the quota never held a fetch back");
  QVERIFY2(most <= quota, "the run folder went past its quota");
}

// A node `name` (4 rounds, a state folder of its own) beside "stale-z", which claims expert 1 and
// announces, every round, a well-formed contribution of the predicted size on a base nobody holds;
// with `claimOurState`, its record also copies the node's merged fingerprints. The node's rounds
// and decisions in `run`, its claims at the end in `finalClaims`; false if it did not finish.
bool FetchLimitsTest::runBesideStaleSender(const QString& name, bool claimOurState, NodeRun& run,
                                           std::vector<int>& finalClaims) {
  MemorySwarmHub hub("tiny-run");
  MemorySwarm swarm(hub, name.toStdString()), sybil(hub, "stale-z");  // the 1-against-1 rule: the larger id gives in
  const auto config = configFor(name, 4);
  const auto announceStale = [&](qint64 round) {
    const sync::ContributionHeader header{"tiny-run", round, "stale-z", "0123456789abcdef", config.peer.codec};
    const auto path = dir_.filePath(QString("stale-%1-%2.safetensors").arg(name).arg(round)).toStdString();
    QVERIFY(sync::saveContribution(path, header, deltasFor(config.peer.trainer.model, {1})).ok());
    const auto id = sybil.publish(path);
    QVERIFY(id.ok());
    Announcement a;
    a.round = round;
    a.claims = {1};
    a.leaseUntil = round + config.policy.leaseRounds;
    a.contrib[round] = *id;
    if (claimOurState)
      for (const auto& p : sybil.peers())
        if (p.id.str() == config.peer.selfId) a.merged = p.announced.merged;  // the lie
    QVERIFY(sybil.announce(a).ok());
  };
  announceStale(1);
  Node node(swarm, config, data_->train, data_->val);
  const bool finished = runToEnd(node, run, [&](const RoundSummary& s) { announceStale(s.round + 1); });
  finalClaims = node.claims();
  return finished;
}

// Issue 15 item 1 (stale floods): "stale-z" claims expert 1 and announces, every round, a
// well-formed contribution of the predicted size built on a base nobody holds. It is fetched
// and skipped as stale (never a ban: a deadline can split honest peers); after kStaleRounds
// rounds in a row — while the node holds the swarm's state — it is not waited for (round 3
// expects the node alone), and the node never resyncs to it.
void FetchLimitsTest::aPeerStaleTwoRoundsInARowIsNotWaitedFor() {
  NodeRun run;
  std::vector<int> claims;
  QVERIFY2(runBesideStaleSender("peer-a", false, run, claims), "the node did not finish");
  const auto& [rounds, notes] = run;
  QCOMPARE(int(rounds.size()), 4);
  for (int r = 0; r < 2; ++r) {  // waited for, arrived, skipped as stale
    QCOMPARE(rounds[r].expected, 2);
    bool stale = false;
    for (const auto& v : rounds[r].verdicts) stale = stale || (v.sender.str() == "stale-z" && v.stale);
    QVERIFY2(stale, qPrintable(QString("round %1: no stale verdict for stale-z").arg(r + 1)));
  }
  for (int r = 2; r < 4; ++r) {
    QCOMPARE(rounds[r].expected, 1);  // not waited for
    QVERIFY(!rounds[r].deadlineHit);
  }
  QCOMPARE(notes.count("stale", {{"peer", "stale-z"}, {"rounds", 2}}), 1);
  QVERIFY(!notes.has("ban"));
  QVERIFY(!notes.has("outOfStep"));
}

// The same liar, now copying the node's merged fingerprints into its own record — "I merged your
// state" — which lifts a no-show's or stale peer's exclusion (liftInStepExclusions: an honest peer
// back from a partition). The lift gets it waited for in that round only: its stale streak goes on,
// so it stays out of the claims plan and the node takes expert 1 over. (When the lift ended the
// streak, the liar won expert 1 back with every lift and kept it un-updated.)
void FetchLimitsTest::aStalePeerCopyingOurStateDoesNotWinItsExpertsBack() {
  NodeRun run;
  std::vector<int> claims;
  QVERIFY2(runBesideStaleSender("peer-c", true, run, claims), "the node did not finish");
  const auto& [rounds, notes] = run;
  QCOMPARE(int(rounds.size()), 4);
  QCOMPARE(notes.count("waitedForAgain", {{"peer", "stale-z"}, {"round", 2}}), 1);
  QCOMPARE(rounds[2].expected, 2);  // round 3: the lift's round
  QCOMPARE(rounds[3].expected, 1);  // round 4: out again (one lift in kNoShowLiftRounds)
  QVERIFY2(std::find(claims.begin(), claims.end(), 1) != claims.end(), "the liar kept expert 1");
  QVERIFY(!notes.has("ban"));
}

// A peer announces its contribution to round 1 trained with claims {1}, then moves on to round 2
// with claims {1, 2} (re-balanced) before the node fetched it. The file is sized for {1}: the
// node predicts its size from the claims of the round-1 record it saw, not the record's current
// ones, so the contribution is fetched (and judged on its content: stale, its base is nobody's)
// and its honest sender is not banned. Sized by the current claims it was refused and banned.
void FetchLimitsTest::aContributionIsSizedWithItsRoundsClaims() {
  MemorySwarmHub hub("tiny-run");
  MemorySwarm swarm(hub, "peer-m"), mover(hub, "mover");
  const auto config = configFor("peer-m", 1);
  const sync::ContributionHeader header{"tiny-run", 1, "mover", "0123456789abcdef", config.peer.codec};
  const auto path = dir_.filePath("mover-1.safetensors").toStdString();
  QVERIFY(sync::saveContribution(path, header, deltasFor(config.peer.trainer.model, {1})).ok());
  const auto id = mover.publish(path);
  QVERIFY(id.ok());
  Announcement a;
  a.round = 1;
  a.claims = {1};
  a.leaseUntil = 1 + config.policy.leaseRounds;
  a.contrib[1] = *id;
  QVERIFY(mover.announce(a).ok());
  Node node(swarm, config, data_->train, data_->val);
  NodeRun run;
  bool movedOn = false;
  connect(&node, &Node::stepped, this, [&](const StepReport&) {
    if (movedOn) return;
    movedOn = true;  // the node has seen the round-1 record; now the record shows round 2
    a.round = 2;
    a.claims = {1, 2};
    QVERIFY(mover.announce(a).ok());
  });
  QVERIFY2(runToEnd(node, run), "the node did not finish");
  QVERIFY(movedOn);
  QCOMPARE(int(run.rounds.size()), 1);
  QCOMPARE(swarm.fetchLimits().at(*id).sizes, sync::contributionSizes(config.peer.trainer.model, {1}, header));
  QVERIFY(!run.notes.has("ban"));
  bool judged = false;
  for (const auto& v : run.rounds.at(0).verdicts) judged = judged || v.sender.str() == "mover";
  QVERIFY2(judged, "the mover's contribution never arrived");
}

QTEST_GUILESS_MAIN(FetchLimitsTest)
// Issue 15 item 1: a snapshot's round is the one its announcers gave it (the file's own word is
// checked against it), and every tensor must be float32, finite and of the run's shape; a refused
// snapshot changes nothing. (The node bounds the announced round by the swarm's: node_resync.cpp.)
void FetchLimitsTest::aSnapshotIsAdoptedOnlyAsAnnouncedAndFinite() {
  const auto config = configFor("adopt", 1).peer;
  auto peer = SpesPeer::create(config, data_->train, data_->val);
  QVERIFY2(peer.ok(), peer ? "" : peer.error().c_str());
  model::MoeTransformer net(config.trainer.model);
  ckpt::NamedTensors weights;
  for (const auto& p : net->named_parameters()) weights.emplace_back(p.key(), p.value().detach().clone());
  auto write = [&](const QString& name, const ckpt::NamedTensors& tensors, const std::string& round) {
    const auto path = dir_.filePath(name).toStdString();
    const bool ok = ckpt::saveSafetensors(path, tensors,
                                          {{"format", "expertswarm-snapshot"}, {"round", round}, {"run", "tiny-run"}})
                        .ok();
    return ok ? path : std::string();
  };
  auto refusal = [&](const std::string& path, std::int64_t announced) {
    auto r = (*peer)->adoptSnapshot(path, announced);
    return r ? std::string() : r.error();
  };
  const auto good = write("good.safetensors", weights, "5");
  QVERIFY(refusal(good, 6).find("announced as round 6") != std::string::npos);  // the file says 5
  auto nan = weights;
  nan.back().second = nan.back().second.clone();  // the copy shares storage with `weights`
  nan.back().second.view(-1)[0] = std::numeric_limits<float>::quiet_NaN();
  QVERIFY(refusal(write("nan.safetensors", nan, "5"), 5).find("not finite") != std::string::npos);
  auto wide = weights;
  wide.front().second = wide.front().second.to(torch::kBFloat16);  // a dtype safetensors carries, not ours
  const auto bf16 = refusal(write("bf16.safetensors", wide, "5"), 5);
  QVERIFY2(bf16.find("not float32") != std::string::npos, bf16.c_str());
  QVERIFY(refusal(write("negative.safetensors", weights, "-3"), -3).find("says round -3") != std::string::npos);
  QCOMPARE((*peer)->mergedRound(), std::int64_t(0));  // nothing refused changed the state
  auto adopted = (*peer)->adoptSnapshot(good, 5);
  QVERIFY2(adopted.ok(), adopted ? "" : adopted.error().c_str());
  QCOMPARE(*adopted, std::int64_t(5));
  QCOMPARE((*peer)->mergedRound(), std::int64_t(5));
}

#include "tst_fetch_limits.moc"
