// The node's round state machine without a network: two Nodes in one process over the in-memory
// Swarm (core/node/memory_swarm.h), a tiny model on the bundled corpus. They split the experts,
// merge each other's contributions every round into the same state, and stop after 3 rounds.
#include "core/node/memory_swarm.h"
#include "core/node/node.h"
#include "core/train/corpus_prep.h"
#include "support/wait_until.h"

#include <QTemporaryDir>

using namespace es::node;

class NodeRounds : public QObject {
  Q_OBJECT

  QTemporaryDir dir_;
  std::unique_ptr<es::train::RunData> data_;

  NodeConfig configFor(const QString& name) const {
    NodeConfig c;
    c.runName = "tiny";
    c.nExperts = 4;
    c.maxRounds = 3;
    c.policy.syncEvery = 3;
    c.policy.expertsPerPeer = 2;
    c.policy.joinWindowMs = 300;
    c.policy.deadlineMinSeconds = 20;
    c.policy.deadlineMaxSeconds = 30;
    c.policy.snapshotEvery = 1;
    auto& t = c.peer.trainer;
    t.model = data_->manifest.model;
    t.model.dModel = 32;
    t.model.nLayers = 2;
    t.model.nHeads = 2;
    t.model.nExperts = 4;
    t.model.expertHidden = 32;
    t.model.seqLen = 32;
    t.train = data_->manifest.train;
    t.train.batchSize = 2;
    t.train.evalBatches = 1;
    t.seed = 7;
    t.dataSeed = name == "peer-a" ? 1 : 2;
    t.device = "cpu";
    c.peer.runId = "tiny-run";
    c.peer.selfId = name.toStdString();
    c.peer.codec = "int8";
    c.peer.syncEvery = 3;
    c.peer.stateDir = dir_.filePath(name + "/state").toStdString();
    c.contribDir = dir_.filePath(name + "/contrib");
    c.fetchDir = dir_.filePath(name + "/incoming");
    c.snapshotDir = dir_.filePath(name + "/snapshots");
    return c;
  }

 private Q_SLOTS:
  void initTestCase() {
    const auto runDir = dir_.filePath("run").toStdString();
    QVERIFY(es::train::prepareRunData(ES_SHARE_DIR "/runs/default", runDir, [](const std::string&) {}).ok());
    auto data = es::train::loadRunData(runDir);
    QVERIFY(data.ok());
    data_ = std::make_unique<es::train::RunData>(std::move(*data));
  }

  void twoNodesSplitTheExpertsAndMergeTheSameState() {
    MemorySwarmHub hub("tiny-run");
    MemorySwarm swarmA(hub, "peer-a"), swarmB(hub, "peer-b");
    Node a(swarmA, configFor("peer-a"), data_->train, data_->val);
    Node b(swarmB, configFor("peer-b"), data_->train, data_->val);
    std::map<std::string, std::vector<RoundSummary>> rounds;
    int finished = 0;
    QString failure;
    for (auto* n : {&a, &b}) {
      const std::string name = n == &a ? "a" : "b";
      connect(n, &Node::roundClosed, this, [&rounds, name](const RoundSummary& s) { rounds[name].push_back(s); });
      connect(n, &Node::finished, this, [&finished] { ++finished; });
      connect(n, &Node::failed, this, [&failure](const QString& e) { failure = e; });
      connect(n, &Node::message, this, [name](const QString& m) { qInfo("%s: %s", name.c_str(), qPrintable(m)); });
      connect(n, &Node::roundClosed, this, [name](const RoundSummary& s) {
        qInfo("%s: round %lld closed, %d merged, %s", name.c_str(), s.round, s.peers, s.merge.fingerprint.c_str());
      });
    }
    // Every contribution either peer announced (records keep only the newest three).
    std::map<std::string, std::map<qint64, std::string>> announcedBy;
    for (auto* n : {&a, &b})
      connect(n, &Node::roundClosed, this, [&] {
        for (const auto& p : swarmA.peers()) announcedBy[p.id].insert(p.contrib.begin(), p.contrib.end());
        for (const auto& p : swarmB.peers()) announcedBy[p.id].insert(p.contrib.begin(), p.contrib.end());
      });
    a.start();
    b.start();
    QVERIFY2(es::test::waitUntil([&] { return finished == 2 || !failure.isEmpty(); }, 240000), "the nodes did not finish");
    QVERIFY2(failure.isEmpty(), qPrintable(failure));
    // Disjoint claims that cover every expert.
    std::vector<int> all = a.claims();
    all.insert(all.end(), b.claims().begin(), b.claims().end());
    std::sort(all.begin(), all.end());
    QCOMPARE(all, (std::vector<int>{0, 1, 2, 3}));
    QCOMPARE(int(rounds["a"].size()), 3);
    QCOMPARE(int(rounds["b"].size()), 3);
    for (int r = 0; r < 3; ++r) {
      const auto& ra = rounds["a"][r];
      const auto& rb = rounds["b"][r];
      QCOMPARE(ra.round, qint64(r + 1));
      QCOMPARE(ra.peers, 2);  // both contributions merged
      QCOMPARE(rb.peers, 2);
      QCOMPARE(ra.merge.fingerprint, rb.merge.fingerprint);  // the whole merged state, bit for bit
      QVERIFY(!ra.deadlineHit);
      QCOMPARE(ra.updatedExperts, (std::vector<int>{0, 1, 2, 3}));  // both owners' experts changed
      for (const auto& v : ra.merge.verdicts) QVERIFY2(v.accepted, v.reason.c_str());
    }
    QVERIFY(a.trainerBusyFraction() > 0);
    // Each peer retired (stopped seeding, deleted) the other's round-1 contribution once round 3
    // was merged, and kept rounds 2 and 3 (a peer catching up gathers them again).
    for (auto [self, sent] : {std::pair{&swarmA, &announcedBy["peer-b"]}, {&swarmB, &announcedBy["peer-a"]}}) {
      QVERIFY2(sent->count(1) && sent->count(3), "a contribution was never announced");
      QVERIFY2(self->retired().count(sent->at(1)), "the other peer's round-1 contribution was not retired");
      QVERIFY2(!self->retired().count(sent->at(3)), "the other peer's round-3 contribution was retired too early");
    }
  }

  // After a partition one peer closes round 1 without a contribution the two others got (here
  // withheld from it): the odd one out, with the lowest id, must take the others' snapshot — not
  // declare itself the reference (it did, and the swarm stayed split for good) — and from then
  // on every round merges all three contributions into one state everywhere. It must see the
  // split from the others' records (their merged-state fingerprints) as soon as it merges, not
  // one round later from their contributions. No regular snapshots here: the one it takes is
  // the one the others write when they see it disagree.
  void theOddPeerOutTakesTheMajoritysSnapshot() {
    MemorySwarmHub hub("tiny-run");
    MemorySwarm swarmA(hub, "peer-a"), swarmB(hub, "peer-b"), swarmC(hub, "peer-c");
    swarmA.withhold([&swarmA](const std::string& id) {
      for (const auto& p : swarmA.peers())
        if (p.id == "peer-b" && p.contrib.count(1) && p.contrib.at(1) == id) return true;
      return false;
    });
    std::map<std::string, std::map<qint64, RoundSummary>> rounds;
    std::map<std::string, std::unique_ptr<Node>> nodes;
    int finished = 0;
    QString failure;
    bool waited = false, adopted = false, sawSplit = false;
    for (auto [name, swarm] : {std::pair{"peer-a", &swarmA}, {"peer-b", &swarmB}, {"peer-c", &swarmC}}) {
      auto config = configFor(name);
      const QString own = dir_.filePath(QStringLiteral("odd-one-out/") + name);  // not the first test's state
      config.peer.stateDir = (own + "/state").toStdString();
      config.contribDir = own + "/contrib";
      config.fetchDir = own + "/incoming";
      config.snapshotDir = own + "/snapshots";
      config.maxRounds = 5;
      config.policy.snapshotEvery = 0;  // only the snapshots written on demand (checkAgreement)
      config.policy.deadlineMinSeconds = 8;
      config.policy.deadlineMaxSeconds = 20;
      auto& n = nodes[name] = std::make_unique<Node>(*swarm, config, data_->train, data_->val);
      const std::string who = name;
      connect(n.get(), &Node::roundClosed, this, [&rounds, who](const RoundSummary& s) { rounds[who][s.round] = s; });
      connect(n.get(), &Node::finished, this, [&finished] { ++finished; });
      connect(n.get(), &Node::failed, this, [&failure](const QString& e) { failure = e; });
      connect(n.get(), &Node::message, this, [&, who](const QString& m) {
        qInfo("%s: %s", who.c_str(), qPrintable(m));
        if (who != "peer-a") return;
        waited = waited || m.startsWith("Out of step with the majority: waiting");
        sawSplit = sawSplit || m.startsWith("Out of step: 2 peers merged round 1 into state");
        adopted = adopted || m.startsWith("Took the swarm's snapshot of round");
        QVERIFY2(!m.contains("keeping our state as the reference"), "the odd one out kept its state");
      });
    }
    for (auto& [name, n] : nodes) n->start();
    QVERIFY2(es::test::waitUntil([&] { return finished == 3 || !failure.isEmpty(); }, 280000), "the nodes did not finish");
    QVERIFY2(failure.isEmpty(), qPrintable(failure));
    for (const auto* name : {"peer-a", "peer-b", "peer-c"}) QVERIFY2(rounds[name].count(1), name);
    QCOMPARE(rounds["peer-a"].at(1).peers, 2);  // round 1 without peer-b's contribution
    QCOMPARE(rounds["peer-b"].at(1).peers, 3);
    QCOMPARE(rounds["peer-c"].at(1).merge.fingerprint, rounds["peer-b"].at(1).merge.fingerprint);
    QVERIFY(adopted);
    // The split is seen from the records in the round it happened: peer-a never trained a round on
    // the state only it held, so nobody ever got a stale contribution from it.
    QVERIFY2(sawSplit, "peer-a did not see from the others' records that it merged round 1 alone");
    for (const auto* name : {"peer-b", "peer-c"})
      for (const auto& [r, summary] : rounds[name])
        for (const auto& v : summary.merge.verdicts)
          QVERIFY2(!v.stale, qPrintable(QString("%1 got a stale contribution from %2 in round %3").arg(name, QString::fromStdString(v.sender)).arg(r)));
    // Back in step: the last two rounds merged all three, bit for bit the same state.
    for (qint64 r = 4; r <= 5; ++r) {
      for (const auto* name : {"peer-a", "peer-b", "peer-c"}) {
        QVERIFY2(rounds[name].count(r), qPrintable(QString("%1 has no round %2").arg(name).arg(r)));
        QCOMPARE(rounds[name].at(r).peers, 3);
      }
      QCOMPARE(rounds["peer-a"].at(r).merge.fingerprint, rounds["peer-b"].at(r).merge.fingerprint);
      QCOMPARE(rounds["peer-c"].at(r).merge.fingerprint, rounds["peer-b"].at(r).merge.fingerprint);
    }
    qInfo("peer-a waited for the majority's snapshot: %s", waited ? "yes" : "no (it was there already)");
  }

  // The donor's "finish this round, then pause": the trainer stops exactly at the round's end,
  // the round is still merged (the swarm is not kept waiting), nothing trains while paused, and
  // resuming carries on to the end. The view shows the pause and this peer's claims.
  void finishRoundThenPauseStopsAtTheBoundaryAndResumes() {
    MemorySwarmHub hub("tiny-run");
    MemorySwarm swarm(hub, "peer-solo");
    auto config = configFor("peer-solo");
    config.peer.stateDir = dir_.filePath("solo/state").toStdString();
    config.contribDir = dir_.filePath("solo/contrib");
    config.fetchDir = dir_.filePath("solo/incoming");
    config.snapshotDir = dir_.filePath("solo/snapshots");
    Node node(swarm, config, data_->train, data_->val);
    qint64 lastStep = 0, stepAtPause = -1;
    std::vector<RoundSummary> rounds;
    std::vector<bool> pauses;
    bool finished = false;
    QString failure;
    connect(&node, &Node::stepped, this, [&](const StepReport& r) {
      lastStep = r.step;
      if (r.step == 1) node.finishRoundThenPause();
    });
    connect(&node, &Node::pausedChanged, this, [&](bool paused) {
      pauses.push_back(paused);
      if (paused) stepAtPause = lastStep;
    });
    connect(&node, &Node::roundClosed, this, [&](const RoundSummary& s) { rounds.push_back(s); });
    connect(&node, &Node::finished, this, [&] { finished = true; });
    connect(&node, &Node::failed, this, [&](const QString& e) { failure = e; });
    node.start();
    // Paused, and round 1 merged while paused.
    QVERIFY2(es::test::waitUntil([&] { return (stepAtPause >= 0 && !rounds.empty()) || !failure.isEmpty(); }, 120000),
             "no pause after round 1");
    QVERIFY2(failure.isEmpty(), qPrintable(failure));
    QCOMPARE(stepAtPause, qint64(3));  // exactly the end of round 1 (sync_every 3)
    QCOMPARE(rounds.front().round, qint64(1));
    QCOMPARE(rounds.front().step, qint64(3));  // merged while the trainer stood still
    QVERIFY(node.paused());
    const auto view = node.view();
    QVERIFY(view.paused);
    QCOMPARE(view.peers.front().id, std::string("peer-solo"));
    QVERIFY(view.peers.front().self);
    QCOMPARE(view.peers.front().claims, (std::vector<int>{0, 1, 2, 3}));  // alone: every expert
    QCOMPARE(view.nExperts, 4);
    QCOMPARE(view.nLayers, 2);
    QCOMPARE(lastStep, qint64(3));  // still nothing trained
    node.setPaused(false);
    QVERIFY2(es::test::waitUntil([&] { return finished || !failure.isEmpty(); }, 120000), "the resumed node did not finish");
    QVERIFY2(failure.isEmpty(), qPrintable(failure));
    QCOMPARE(pauses, (std::vector<bool>{true, false}));
    QCOMPARE(int(rounds.size()), 3);
    QVERIFY(lastStep >= 9);
  }
};

QTEST_GUILESS_MAIN(NodeRounds)
#include "tst_node_rounds.moc"
