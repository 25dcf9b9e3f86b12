// The node's round state machine without a network: two Nodes in one process over the in-memory
// Swarm (tests/support/memory_swarm.h), a tiny model on the bundled corpus. They split the experts,
// merge each other's contributions every round into the same state, and stop after 3 rounds.
#include "core/node/node.h"
#include "core/store/ledger.h"
#include "core/train/corpus_prep.h"
#include "support/memory_swarm.h"
#include "support/node_notes.h"
#include "support/tiny_node.h"
#include "support/wait_until.h"

#include <QElapsedTimer>
#include <QFile>
#include <QTemporaryDir>
#include <QTimer>

#include <algorithm>
#include <array>
#include <functional>

using namespace es::node;

class NodeRounds : public QObject {
  Q_OBJECT

  QTemporaryDir dir_;
  std::unique_ptr<es::train::RunData> data_;

  // The same, in folders of its own under `tag` (a test that reused another's state folder would
  // resume from its last round).
  NodeConfig isolatedConfigFor(const QString& name, const QString& tag) const {
    NodeConfig c = configFor(name);
    const QString own = dir_.filePath(tag + "/" + name);
    c.peer.stateDir = (own + "/state").toStdString();
    c.contribDir = own + "/contrib";
    c.fetchDir = own + "/incoming";
    c.snapshotDir = own + "/snapshots";
    return c;
  }

  NodeConfig configFor(const QString& name) const {
    return es::test::roundingNodeConfig(*data_, dir_.path(), name, 3, 3, 20, 30, name == "peer-a" ? 1 : 2);
  }

 private Q_SLOTS:
  void initTestCase() {
    auto data = es::test::bundledRunData(dir_.filePath("run"));
    QVERIFY2(data.ok(), data ? "" : data.error().c_str());
    data_ = std::make_unique<es::train::RunData>(std::move(*data));
  }

  // With the bundled run's int8 and with a sparse run's codec (issue 39: its size predicted —
  // MemorySwarm refuses any other — its error feedback and scatter-mean at the node).
  void twoNodesSplitTheExpertsAndMergeTheSameState_data() {
    QTest::addColumn<QString>("codec");
    QTest::newRow("int8") << "int8";
    QTest::newRow("sparse") << "sparse/128/4096";
  }
  void twoNodesSplitTheExpertsAndMergeTheSameState() {
    QFETCH(QString, codec);
    const auto configOf = [&](const QString& name) {
      auto c = es::test::roundingNodeConfig(*data_, dir_.filePath("two-" + QString(QTest::currentDataTag())), name, 3,
                                            3, 20, 30, name == "peer-a" ? 1 : 2);
      c.peer.codec = codec.toStdString();
      return c;
    };
    MemorySwarmHub hub("tiny-run");
    MemorySwarm swarmA(hub, "peer-a"), swarmB(hub, "peer-b");
    Node a(swarmA, configOf("peer-a"), data_->train, data_->val);
    Node b(swarmB, configOf("peer-b"), data_->train, data_->val);
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
        qInfo("%s: round %lld closed, %d merged, %s", name.c_str(), static_cast<long long>(s.round), s.peers,
              s.fingerprint.c_str());
      });
    }
    // Every contribution either peer announced (records keep only the newest three).
    std::map<std::string, std::map<qint64, es::ContentId>> announcedBy;
    for (auto* n : {&a, &b})
      connect(n, &Node::roundClosed, this, [&] {
        for (auto* swarm : {&swarmA, &swarmB})
          for (const auto& p : swarm->peers())
            announcedBy[p.id.str()].insert(p.announced.contrib.begin(), p.announced.contrib.end());
      });
    a.start();
    b.start();
    QVERIFY2(es::test::waitUntil([&] { return finished == 2 || !failure.isEmpty(); }, 240000),
             "the nodes did not finish");
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
      QCOMPARE(ra.fingerprint, rb.fingerprint);  // the whole merged state, bit for bit
      QVERIFY(!ra.deadlineHit);
      QCOMPARE(ra.updatedExperts, (std::vector<int>{0, 1, 2, 3}));  // both owners' experts changed
      for (const auto& v : ra.verdicts) QVERIFY2(v.accepted, v.reason.c_str());
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

 private:
  // Three nodes; peer-a never receives peer-b's round-1 contribution (as after a partition), and
  // with `withholdSnapshots` no snapshot either. Records what each node closed and peer-a noted.
  struct OddRun {
    std::map<std::string, std::map<qint64, RoundSummary>> rounds;
    es::test::NodeNotes notesOfA;  // what peer-a decided (Node::noted)
    QString failure;
    bool finished = false;
    double seconds = 0;
    std::vector<es::store::RoundRow> ledgerOfA;  // peer-a's ledger rounds (`heals` runs only)
    std::map<qint64, RoundSummary> repairedByA;  // Node::roundRepaired
  };
  // `heals`: the withholding ends when peer-a's deadline closes round 1 (a partition that heals
  // just too late), so what it missed can be fetched afterwards.
  // `publishDelayMs`: how long each peer's swarm takes to hash what it publishes (Swarm::publish).
  // `loseSnapshotCopy`: peer-a's first fetched snapshot is reported whole but is not on its disk.
  // `withheldLookServed`: peer-a's swarm reports each withheld snapshot's fetch as connected to a
  // peer that sends nothing (else it reports no transfer: nobody serves it).
  OddRun runOddPeerOut(const QString& tag, bool withholdSnapshots, int maxRounds, bool heals = false,
                       int publishDelayMs = 0, bool loseSnapshotCopy = false, bool withheldLookServed = false,
                       int deadlineMaxSeconds = 20) {
    OddRun run;
    MemorySwarmHub hub("tiny-run");
    MemorySwarm swarmA(hub, "peer-a"), swarmB(hub, "peer-b"), swarmC(hub, "peer-c");
    for (auto* swarm : {&swarmA, &swarmB, &swarmC}) swarm->setPublishDelay(publishDelayMs);
    if (withheldLookServed)
      swarmA.reportTraffic([&swarmA] {
        es::node::SwarmTraffic traffic;
        for (const auto& p : swarmA.peers())
          for (const auto& [round, snapshot] : p.announced.snapshot)
            traffic.transfers.push_back({snapshot, 1000, 0, 0, 0, 1, false});
        return traffic;
      });
    bool healed = false;
    swarmA.withhold([&swarmA, &healed, withholdSnapshots](const es::ContentId& id) {
      if (healed) return false;
      for (const auto& p : swarmA.peers()) {
        const auto& contrib = p.announced.contrib;
        if (p.id.str() == "peer-b" && contrib.count(1) && contrib.at(1) == id) return true;
        for (const auto& [round, snapshot] : p.announced.snapshot)
          if (withholdSnapshots && snapshot == id) return true;
      }
      return false;
    });
    int snapshotCopies = 0;
    if (loseSnapshotCopy)
      swarmA.loseCopies([&swarmA, &snapshotCopies](const es::ContentId& id) {
        for (const auto& p : swarmA.peers())
          for (const auto& [round, snapshot] : p.announced.snapshot)
            if (snapshot == id) return snapshotCopies++ == 0;
        return false;
      });
    std::unique_ptr<es::store::Ledger> ledgerA;
    const std::string ledgerPath = dir_.filePath(tag + "-ledger-a.sqlite").toStdString();
    if (heals) {
      auto opened = es::store::Ledger::open(ledgerPath, std::string(ES_SHARE_DIR) + "/sql");
      if (!opened) qFatal("ledger: %s", opened.error().c_str());
      ledgerA = std::move(*opened);
    }
    std::map<std::string, std::unique_ptr<Node>> nodes;
    int finished = 0;
    for (auto [name, swarm] : {std::pair{"peer-a", &swarmA}, {"peer-b", &swarmB}, {"peer-c", &swarmC}}) {
      auto config = configFor(name);
      const QString own = dir_.filePath(tag + "/" + name);  // not another test's state
      config.peer.stateDir = (own + "/state").toStdString();
      config.contribDir = own + "/contrib";
      config.fetchDir = own + "/incoming";
      config.snapshotDir = own + "/snapshots";
      config.maxRounds = maxRounds;
      config.policy.snapshotEvery = 0;  // only the snapshots written on demand (checkAgreement)
      config.policy.deadlineMinSeconds = 8;
      config.policy.deadlineMaxSeconds = deadlineMaxSeconds;
      auto& n = nodes[name] = std::make_unique<Node>(*swarm, config, data_->train, data_->val,
                                                     std::string(name) == "peer-a" ? ledgerA.get() : nullptr);
      const std::string who = name;
      connect(n.get(), &Node::roundClosed, this, [&run, who](const RoundSummary& s) { run.rounds[who][s.round] = s; });
      connect(n.get(), &Node::roundRepaired, this, [&run, who](const RoundSummary& s) {
        if (who == "peer-a") run.repairedByA[s.round] = s;
      });
      connect(n.get(), &Node::finished, this, [&finished] { ++finished; });
      connect(n.get(), &Node::failed, this, [&run](const QString& e) { run.failure = e; });
      connect(n.get(), &Node::message, this, [who](const QString& m) { qInfo("%s: %s", who.c_str(), qPrintable(m)); });
      connect(n.get(), &Node::noted, this, [&run, &healed, heals, who](const QString& kind, const QVariantMap& f) {
        if (who != "peer-a") return;
        if (heals && kind == "deadline" && f.value("round").toLongLong() == 1) healed = true;
        run.notesOfA.add(kind, f);
      });
    }
    QElapsedTimer clock;
    clock.start();
    for (auto& [name, n] : nodes) n->start();
    run.finished = es::test::waitUntil([&] { return finished == 3 || !run.failure.isEmpty(); }, 280000);
    run.seconds = clock.elapsed() / 1000.0;
    if (ledgerA && ledgerA->flush().ok())
      if (auto reader = es::store::LedgerReader::open(ledgerPath); reader.ok())
        if (auto rows = (*reader)->rounds(hub.runId()); rows.ok()) run.ledgerOfA = *rows;
    return run;
  }
  // peer-a noted a decision of `kind` with these fields.
  static bool noted(const OddRun& run, const QString& kind, const QVariantMap& match = {}) {
    return run.notesOfA.has(kind, match);
  }
  // peer-a saw from the others' records that it merged `round` alone: `members` peers merged it into another state.
  static bool outOfStep(const es::test::NodeNotes& notes, qint64 round, int members) {
    return notes.has("outOfStep", {{"by", "records"}, {"round", round}, {"members", members}});
  }

  // Three nodes over the given swarms (peer-a, peer-b, peer-c), configured by `configure`, until
  // all finish; `onClosed` sees every round each closes. What each closed and peer-a noted.
  struct ThreeRun {
    std::map<std::string, std::map<qint64, RoundSummary>> rounds;
    es::test::NodeNotes notesOfA;  // what peer-a decided (Node::noted)
    QString failure;
    bool finished = false;
  };
  ThreeRun runThree(const QString& tag, const std::array<MemorySwarm*, 3>& swarms,
                    const std::function<void(NodeConfig&)>& configure,
                    const std::function<void(const std::string&, const RoundSummary&)>& onClosed = {},
                    const std::map<std::string, int>& startAfterMs = {}) {
    ThreeRun run;
    std::map<std::string, std::unique_ptr<Node>> nodes;
    int finished = 0;
    for (auto* swarm : swarms) {
      const std::string who = swarm->selfId().str();
      auto config = isolatedConfigFor(QString::fromStdString(who), tag);
      configure(config);
      auto& n = nodes[who] = std::make_unique<Node>(*swarm, config, data_->train, data_->val);
      connect(n.get(), &Node::roundClosed, this, [&run, &onClosed, who](const RoundSummary& s) {
        run.rounds[who][s.round] = s;
        if (onClosed) onClosed(who, s);
      });
      connect(n.get(), &Node::finished, this, [&finished] { ++finished; });
      connect(n.get(), &Node::failed, this, [&run](const QString& e) { run.failure = e; });
      connect(n.get(), &Node::message, this, [who](const QString& m) { qInfo("%s: %s", who.c_str(), qPrintable(m)); });
      connect(n.get(), &Node::noted, this, [&run, who](const QString& kind, const QVariantMap& f) {
        if (who == "peer-a") run.notesOfA.add(kind, f);
      });
    }
    for (auto& [name, n] : nodes) {
      const auto delay = startAfterMs.find(name);
      if (delay == startAfterMs.end())
        n->start();
      else
        QTimer::singleShot(delay->second, n.get(), [node = n.get()] { node->start(); });
    }
    run.finished = es::test::waitUntil([&] { return finished == 3 || !run.failure.isEmpty(); }, 240000);
    return run;
  }

  // Which of peer-b and peer-c got a stale contribution (built on another base; from `from`, or
  // from anyone), in which round; empty when none did.
  static QString staleContribution(const OddRun& run, const std::string& from = {}) {
    for (const auto* name : {"peer-b", "peer-c"})
      if (const auto it = run.rounds.find(name); it != run.rounds.end())
        for (const auto& [r, summary] : it->second)
          for (const auto& v : summary.verdicts)
            if (v.stale && (from.empty() || v.sender.str() == from))
              return QString("%1 got a stale contribution from %2 in round %3")
                  .arg(name, QString::fromStdString(v.sender.str()))
                  .arg(r);
    return {};
  }

  // aSplitFromALateContributionIsRepairedWithoutASnapshot (below), with `publishDelayMs` ms of
  // hashing for every file the peers publish.
  void checkRepairedWithoutASnapshot(const QString& tag, int publishDelayMs) {
    const auto run = runOddPeerOut(tag, false, 4, true, publishDelayMs);
    QVERIFY2(run.finished, "the nodes did not finish");
    QVERIFY2(run.failure.isEmpty(), qPrintable(run.failure));
    auto rounds = run.rounds;
    QCOMPARE(rounds["peer-a"].at(1).peers, 2);  // round 1 closed without peer-b's contribution
    QCOMPARE(rounds["peer-b"].at(1).peers, 3);
    QVERIFY2(outOfStep(run.notesOfA, 1, 2), "peer-a did not see the split");
    QVERIFY2(noted(run, "repair", {{"round", 1}, {"contributions", 3}, {"fetching", 1}}),
             "peer-a did not look for the majority's set");
    QVERIFY2(noted(run, "repaired",
                   {{"round", 1},
                    {"contributions", 3},
                    {"fingerprint", QString::fromStdString(rounds["peer-b"].at(1).fingerprint)}}),
             "peer-a did not land on the majority's state");
    // peer-a's ledger says round 1 ended in the majority's state (its shared tensors' fingerprint,
    // as every round row), not the state it merged first.
    const auto rowOne = std::find_if(run.ledgerOfA.begin(), run.ledgerOfA.end(), [](auto& r) { return r.round == 1; });
    QVERIFY2(rowOne != run.ledgerOfA.end(), "peer-a's ledger has no round 1");
    QCOMPARE(rowOne->mergedFingerprint, rounds["peer-b"].at(1).sharedFingerprint);
    QCOMPARE(rowOne->accepted, 3);
    // and reports round 1 again, as it ended (the headless client prints it as a second line).
    QVERIFY2(run.repairedByA.count(1), "peer-a did not report the repaired round");
    QCOMPARE(run.repairedByA.at(1).fingerprint, rounds["peer-b"].at(1).fingerprint);
    QCOMPARE(run.repairedByA.at(1).peers, 3);
    QVERIFY(run.repairedByA.at(1).repaired && !run.repairedByA.at(1).valLoss);
    QVERIFY2(!noted(run, "resync"), "peer-a fetched a snapshot all the same");
    QVERIFY2(!noted(run, "snapshot"), "peer-a took a snapshot all the same");
    for (qint64 r = 3; r <= 4; ++r) {
      for (const auto* name : {"peer-a", "peer-b", "peer-c"}) {
        QVERIFY2(rounds[name].count(r), qPrintable(QString("%1 has no round %2").arg(name).arg(r)));
        QCOMPARE(rounds[name].at(r).peers, 3);
      }
      QCOMPARE(rounds["peer-a"].at(r).fingerprint, rounds["peer-b"].at(r).fingerprint);
      QCOMPARE(rounds["peer-c"].at(r).fingerprint, rounds["peer-b"].at(r).fingerprint);
    }
    QVERIFY2(staleContribution(run).isEmpty(), qPrintable(staleContribution(run)));
    qInfo("three nodes closed 4 rounds in %.1f s; peer-a repaired round 1 without a snapshot%s", run.seconds,
          noted(run, "contributionDropped") ? " (and dropped a contribution hashed across the repair)" : "");
  }

 private Q_SLOTS:
  // After a partition one peer closes round 1 without a contribution the two others got (here
  // withheld from it): the odd one out, with the lowest id, must take the others' snapshot — not
  // declare itself the reference (it did, and the swarm stayed split for good) — and from then
  // on every round merges all three contributions into one state everywhere. It must see the
  // split from the others' records (their merged-state fingerprints) as soon as it merges, not
  // one round later from their contributions. No regular snapshots here: the one it takes is
  // the one the others write when they see it disagree.
  void theOddPeerOutTakesTheMajoritysSnapshot() {
    const auto run = runOddPeerOut("odd-one-out", false, 6);
    QVERIFY2(run.finished, "the nodes did not finish");
    QVERIFY2(run.failure.isEmpty(), qPrintable(run.failure));
    auto rounds = run.rounds;
    for (const auto* name : {"peer-a", "peer-b", "peer-c"}) QVERIFY2(rounds[name].count(1), name);
    QCOMPARE(rounds["peer-a"].at(1).peers, 2);  // round 1 without peer-b's contribution
    QCOMPARE(rounds["peer-b"].at(1).peers, 3);
    QCOMPARE(rounds["peer-c"].at(1).fingerprint, rounds["peer-b"].at(1).fingerprint);
    QVERIFY2(!noted(run, "keepingReference"), "the odd one out kept its state");
    QVERIFY(noted(run, "snapshot"));
    QVERIFY2(run.notesOfA.any("repairAbandoned",
                              [](const QVariantMap& f) {
                                return f.value("round").toLongLong() == 1 &&
                                       f.value("reason").toString().startsWith("no bytes for");
                              }),
             "peer-a did not try, or did not give up, the repair whose contribution never arrives");
    // The split is seen from the records in the round it happened: peer-a never trained a round on
    // the state only it held, so nobody ever got a stale contribution from it. (Only from it. Seen
    // once under load: peer-a's round-3 contribution, late while it adopted the snapshot, reached
    // peer-b in time and not peer-c, whose deadline closed round 3 without it; peer-c repaired round
    // 3, but its round-4 contribution, already out, was built on its state before the repair.)
    QVERIFY2(outOfStep(run.notesOfA, 1, 2), "peer-a did not see from the others' records that it merged round 1 alone");
    QVERIFY2(staleContribution(run, "peer-a").isEmpty(), qPrintable(staleContribution(run, "peer-a")));
    // Back in step: the last two rounds merged all three, bit for bit the same state. (Before the
    // snapshot, peer-a tries to merge round 1 again with the others' set — the contribution it
    // lacks never arrives here — and gives that up after deadline.min_seconds without bytes.)
    for (qint64 r = 5; r <= 6; ++r) {
      for (const auto* name : {"peer-a", "peer-b", "peer-c"}) {
        QVERIFY2(rounds[name].count(r), qPrintable(QString("%1 has no round %2").arg(name).arg(r)));
        QCOMPARE(rounds[name].at(r).peers, 3);
      }
      QCOMPARE(rounds["peer-a"].at(r).fingerprint, rounds["peer-b"].at(r).fingerprint);
      QCOMPARE(rounds["peer-c"].at(r).fingerprint, rounds["peer-b"].at(r).fingerprint);
    }
    qInfo("peer-a waited for the majority's snapshot: %s",
          noted(run, "waitingForMajority") ? "yes" : "no (it was there already)");
  }

  // The snapshot peer-a fetched is not on its disk when its trainer opens it (removed under the
  // transfer: at afd6a98 in tst_swarm_adversary, after libtorrent failed its first download). That
  // is this disk's fault, not the content's: fetched again and adopted, and nobody is banned
  // (the newcomer banned the five honest peers that announced it).
  void aSnapshotLostOnOurDiskIsFetchedAgainNotBlamed() {
    const auto run = runOddPeerOut("lost-copy", false, 5, false, 0, true);
    QVERIFY2(run.finished, "the nodes did not finish");
    QVERIFY2(run.failure.isEmpty(), qPrintable(run.failure));
    QVERIFY2(
        run.notesOfA.any("snapshotUnreadable",
                         [](const QVariantMap& f) { return f.value("error").toString().startsWith("cannot read"); }),
        "peer-a's snapshot copy was not lost");
    QVERIFY2(!noted(run, "snapshotRefused") &&
                 !run.notesOfA.any("ban",
                                   [](const QVariantMap& f) {
                                     return f.value("reason").toString().startsWith("announced a snapshot");
                                   }),
             "peer-a blamed the snapshot's announcers");
    QVERIFY2(noted(run, "snapshot"), "peer-a never adopted the snapshot fetched again");
    // Once a snapshot is adopted, only a new split starts another fetch (CI, 2026-12-05: a record
    // got the lost copy fetched again and adopted before the retry's 500 ms timer ran; the timer
    // then fetched the same snapshot a third time, in step, and the run failed). Timing decides
    // whether a run takes that path (3 local runs did not): this catches it when it does.
    bool inStep = false;
    for (const auto& n : run.notesOfA.all()) {
      if (n.kind == "snapshot") inStep = true;
      if (n.kind == "outOfStep") inStep = false;
      QVERIFY2(
          !(inStep && n.kind == "resync"),
          qPrintable("peer-a fetched a snapshot again after adopting one, in step; it noted: " + run.notesOfA.trail()));
    }
    // In step at the end: round 5 merged into the others' state — or, under load (README run,
    // 2026-12-05: after peer-a's round-3 repair the others' round-5 contributions were on another
    // base than its own), peer-a saw it and was fetching (or had adopted) their snapshot of round
    // 5 when the run ended.
    // CI, 2026-12-06: peer-a's adopted snapshot left it training round 3 after the others had
    // closed it; it repaired round 3 (merged the others' set again), and later rounds went the same
    // way — a repair of round 5 under way or done is in step by the same rule.
    auto rounds = run.rounds;
    const QString trail = "; peer-a noted: " + run.notesOfA.trail();
    for (const auto* name : {"peer-a", "peer-b", "peer-c"})
      QVERIFY2(rounds[name].count(5), qPrintable(QString("%1 has no round 5").arg(name) + trail));
    // (README run of 4959189: peer-b, seeing peer-a's record still name its round-1 state beside
    // its own, took peer-a for the majority, waited 23 s for a snapshot and fell two rounds out;
    // peer-b and peer-c ended round 5 in different states. peer-a's notes here; the others' lines
    // are in the log above.)
    QVERIFY2(rounds["peer-c"].at(5).fingerprint == rounds["peer-b"].at(5).fingerprint,
             qPrintable("peer-b and peer-c ended round 5 in different states" + trail));
    const auto& majority = rounds["peer-b"].at(5).fingerprint;
    const bool repaired = run.repairedByA.count(5) && run.repairedByA.at(5).fingerprint == majority;
    QVERIFY2(rounds["peer-a"].at(5).fingerprint == majority || repaired || run.notesOfA.has("repair", {{"round", 5}}) ||
                 run.notesOfA.has("resync", {{"round", 5}}) || run.notesOfA.has("snapshot", {{"round", 5}}),
             qPrintable("peer-a ended out of step" + trail));
  }

  // Issue 12 (partition recovery): peer-b's round-1 contribution reaches peer-a only after peer-a's
  // deadline closed round 1 without it (the partition healed just too late). The others' records
  // name the set they merged; peer-a finds it, fetches the one contribution it lacked and merges
  // round 1 again from the same base — the majority's state, bit for bit — without a snapshot,
  // and its round-2 contribution (if already written on its odd state) goes out again on the
  // repaired one. Round 2 may still close without it on the others (their round-2 deadline ran
  // while peer-a waited out its round-1 deadline; the training here takes no time): then that
  // round is repaired the same way. From round 3 on every round merges all three everywhere.
  void aSplitFromALateContributionIsRepairedWithoutASnapshot() { checkRepairedWithoutASnapshot("repair", 0); }

  // Issue 13 item 6: the same with hashing that takes time (1.5 s for each file published: a
  // large snapshot on a slow disk). peer-a's round-2 contribution, written on its odd state, may
  // still be hashing when it sees the split (it is then held) or when its repair lands (dropped:
  // the trainer sends it again on the repaired state); which one depends on timing, and either
  // way it is never announced — b and c never get a stale contribution from it — and the rounds
  // end as without the delay.
  void aSplitIsRepairedWhileContributionsAreHashed() { checkRepairedWithoutASnapshot("repair-slow-hash", 1500); }

  // Issue 15: a split three ways. Each peer misses another's round-1 contribution for good (a
  // misses c's, b misses a's, c misses b's), so round 1 closes by its deadline everywhere with a
  // different pair: three states, each held by one peer, no majority by head count. Wanted: one
  // state with all three contributions from round 3. Four rules make it (each one's removal failed
  // this twice in two runs, 2026-12-04): the vote on a round weighs standing from before that round
  // (Node::standingBefore: all three pick the same winner — with the round's own merge counted,
  // each picked another); a peer whose base changed withdraws the contributions it built on the
  // state it left (Node::forgetContributionsAfter) and the others drop a withdrawn one
  // (Node::gather) and do not count a contribution whose sender's record names another base
  // (Node::builtOnAnotherState) — without those, the repaired peer stayed a round behind: the
  // others closed each round on its stale contribution and never merged the rewrite. (Under load
  // the state is whole from round 4: see the check.)
  void aSplitThreeWaysComesBackToOneState() {
    MemorySwarmHub hub("tiny-run");
    MemorySwarm swarmA(hub, "peer-a"), swarmB(hub, "peer-b"), swarmC(hub, "peer-c");
    const auto misses = [](MemorySwarm& self, const char* from) {
      self.withhold([&self, from](const es::ContentId& id) {
        for (const auto& p : self.peers())
          if (p.id.str() == from && p.announced.contrib.count(1) && p.announced.contrib.at(1) == id) return true;
        return false;
      });
    };
    misses(swarmA, "peer-c");
    misses(swarmB, "peer-a");
    misses(swarmC, "peer-b");
    const auto run = runThree("three-way", {&swarmA, &swarmB, &swarmC}, [](NodeConfig& c) {
      c.maxRounds = 5;
      c.policy.snapshotEvery = 0;  // only the snapshots written on demand (checkAgreement)
      c.policy.deadlineMinSeconds = 8;
      c.policy.deadlineMaxSeconds = 20;
    });
    QVERIFY2(run.finished, "the nodes did not finish");
    QVERIFY2(run.failure.isEmpty(), qPrintable(run.failure));
    auto rounds = run.rounds;
    std::set<std::string> splitStates;
    for (const auto* name : {"peer-a", "peer-b", "peer-c"}) {
      QVERIFY2(rounds[name].count(1), name);
      QCOMPARE(rounds[name].at(1).peers, 2);
      splitStates.insert(rounds[name].at(1).fingerprint);
    }
    QCOMPARE(int(splitStates.size()), 3);
    for (const auto* name : {"peer-a", "peer-b", "peer-c"})
      for (const auto& [r, summary] : rounds[name])
        qInfo("%s round %lld: %d contributions, state %s", name, static_cast<long long>(r), summary.peers,
              summary.fingerprint.c_str());
    // From round 3 — or 4 under load: in the README run at 18ad25d peer-c, repairing round 2, took
    // a snapshot and skipped round 3, which a and b merged without it (alone here, 3 each time) —
    // every round merges all three into one state on every peer.
    const auto whole = [&](qint64 r) {
      for (const auto* name : {"peer-a", "peer-b", "peer-c"})
        if (!rounds[name].count(r) || rounds[name].at(r).peers != 3) return false;
      return rounds["peer-a"].at(r).fingerprint == rounds["peer-b"].at(r).fingerprint &&
             rounds["peer-c"].at(r).fingerprint == rounds["peer-b"].at(r).fingerprint;
    };
    const qint64 from = whole(3) ? 3 : 4;
    qInfo("one state with all three contributions from round %lld", static_cast<long long>(from));
    for (qint64 r = from; r <= 5; ++r) {
      for (const auto* name : {"peer-a", "peer-b", "peer-c"}) {
        QVERIFY2(rounds[name].count(r), qPrintable(QString("%1 has no round %2").arg(name).arg(r)));
        QCOMPARE(rounds[name].at(r).peers, 3);
      }
      QCOMPARE(rounds["peer-a"].at(r).fingerprint, rounds["peer-b"].at(r).fingerprint);
      QCOMPARE(rounds["peer-c"].at(r).fingerprint, rounds["peer-b"].at(r).fingerprint);
    }
  }

  // Issue 12 (partition recovery): a peer that lags the others closes the round it gathers on
  // the set they merged, as soon as their records name it and it holds that set — not at its own
  // deadline with another set, to repair afterwards (the netlab: a cut peer gathered round 8 for
  // two minutes after the others had merged it). Here peer-a's round-1 contribution never reaches
  // b and c, who close round 1 at their deadline with {b, c}; peer-b's reaches peer-a only once
  // b's and c's records say they merged round 1, and peer-a's own deadline is later. Holding {a, b, c},
  // peer-a closes round 1 with {b, c}: their state, no split, no repair.
  void aLatePeerClosesTheRoundOnTheSetTheOthersMerged() {
    MemorySwarmHub hub("tiny-run");
    MemorySwarm swarmA(hub, "peer-a"), swarmB(hub, "peer-b"), swarmC(hub, "peer-c");
    auto contributionOf = [](const MemorySwarm& swarm, const char* peer, const es::ContentId& id) {
      for (const auto& p : swarm.peers())
        if (p.id.str() == peer && p.announced.contrib.count(1) && p.announced.contrib.at(1) == id) return true;
      return false;
    };
    for (auto* swarm : {&swarmB, &swarmC})
      swarm->withhold(
          [swarm, contributionOf](const es::ContentId& id) { return contributionOf(*swarm, "peer-a", id); });
    // Released once both b's and c's records say they merged round 1: with only b's, a could
    // hold all three contributions while c still gathers and rightly close on the full set (seen
    // under load in the full suite, when c's deadline fell 0.8 s after b's).
    swarmA.withhold([&swarmA, contributionOf](const es::ContentId& id) {
      int merged = 0;
      for (const auto& p : swarmA.peers())
        if ((p.id.str() == "peer-b" || p.id.str() == "peer-c") && p.announced.merged.count(1)) ++merged;
      return merged < 2 && contributionOf(swarmA, "peer-b", id);
    });
    QTimer heal;
    connect(&heal, &QTimer::timeout, this, [&swarmA] { swarmA.deliverWithheld(); });
    heal.start(100);
    const auto run = runThree("late", {&swarmA, &swarmB, &swarmC},
                              [](NodeConfig& c) { c.policy.deadlineMinSeconds = c.peer.selfId == "peer-a" ? 25 : 8; });
    QVERIFY2(run.finished, "the nodes did not finish");
    QVERIFY2(run.failure.isEmpty(), qPrintable(run.failure));
    auto rounds = run.rounds;
    const auto& notes = run.notesOfA;
    QCOMPARE(rounds["peer-b"].at(1).peers, 2);  // without peer-a's contribution
    QVERIFY2(notes.has("swarmSet", {{"round", 1}, {"peers", 2}, {"contributions", 2}}),
             "peer-a did not close round 1 on the others' set");
    QCOMPARE(rounds["peer-a"].at(1).peers, 2);
    QCOMPARE(rounds["peer-a"].at(1).fingerprint, rounds["peer-b"].at(1).fingerprint);
    QVERIFY2(!rounds["peer-a"].at(1).deadlineHit, "peer-a waited for its deadline");
    QVERIFY2(!notes.has("outOfStep"), "peer-a split from the others");
    QVERIFY2(!notes.has("repaired"), "peer-a repaired a round");
    for (qint64 r = 2; r <= 3; ++r)
      for (const auto* name : {"peer-a", "peer-c"}) {
        QCOMPARE(rounds[name].at(r).peers, 3);
        QCOMPARE(rounds[name].at(r).fingerprint, rounds["peer-b"].at(r).fingerprint);
      }
  }

  // A run's first round waits for the peers seen joining. peer-c starts 0.7 s after a and b (as
  // a peer whose identity work took longer): a and b see its record, without claims, before their
  // 1 s join windows end, and claim first. Their round 1 waits for c to claim and contribute, so
  // all three merge round 1 together — before, a and b closed it alone a moment before c claimed
  // (the netlab bench's lone first rounds), and c had to resync.
  void aRunsFirstRoundWaitsForThePeersSeenJoining() {
    MemorySwarmHub hub("tiny-run");
    MemorySwarm swarmA(hub, "peer-a"), swarmB(hub, "peer-b"), swarmC(hub, "peer-c");
    const auto run = runThree("joining", {&swarmA, &swarmB, &swarmC},
                              [](NodeConfig& c) {
                                c.maxRounds = 2;
                                c.policy.joinWindowMs = 1000;
                                c.policy.deadlineMinSeconds = 20;
                                c.policy.deadlineMaxSeconds = 40;
                              },
                              {}, {{"peer-c", 700}});
    QVERIFY2(run.finished, "the nodes did not finish");
    QVERIFY2(run.failure.isEmpty(), qPrintable(run.failure));
    auto rounds = run.rounds;
    for (qint64 r = 1; r <= 2; ++r)
      for (const auto* name : {"peer-a", "peer-b", "peer-c"}) {
        QVERIFY2(rounds[name].count(r), qPrintable(QString("%1 has no round %2").arg(name).arg(r)));
        QCOMPARE(rounds[name].at(r).peers, 3);
        QVERIFY2(!rounds[name].at(r).deadlineHit, qPrintable(QString("%1 waited for its deadline").arg(name)));
        QCOMPARE(rounds[name].at(r).fingerprint, rounds["peer-a"].at(r).fingerprint);
      }
  }

  // Issue 12 (partition recovery): a peer cut off from everyone does not merge alone. peer-a's
  // link is cut as its round 1 closes and restored 12 s later: b and c close round 2 at their
  // deadline (8 s) without it; peer-a, having heard from neither since its last merge, waits
  // past its deadline (deadline.max_seconds is 20 s) instead of merging round 2 alone, and once
  // the link is back closes it on their set — no split, no repair, no snapshot.
  void aCutOffPeerWaitsInsteadOfMergingAlone() {
    MemorySwarmHub hub("tiny-run");
    MemorySwarm swarmA(hub, "peer-a"), swarmB(hub, "peer-b"), swarmC(hub, "peer-c");
    const auto run = runThree(
        "cut-off", {&swarmA, &swarmB, &swarmC},
        [](NodeConfig& c) {
          c.maxRounds = 4;
          c.policy.deadlineMinSeconds = 8;
          c.policy.deadlineMaxSeconds = 20;
        },
        [this, &swarmA](const std::string& who, const RoundSummary& s) {
          if (who != "peer-a" || s.round != 1) return;
          swarmA.setCut(true);
          QTimer::singleShot(12000, this, [&swarmA] { swarmA.setCut(false); });
        });
    QVERIFY2(run.finished, "the nodes did not finish");
    QVERIFY2(run.failure.isEmpty(), qPrintable(run.failure));
    auto rounds = run.rounds;
    const auto& notes = run.notesOfA;
    QCOMPARE(rounds["peer-b"].at(2).peers, 2);  // closed without peer-a
    QVERIFY2(notes.has("cutOff", {{"round", 2}, {"heard", 0}, {"others", 2}}), "peer-a did not see it was cut off");
    QCOMPARE(rounds["peer-a"].at(2).fingerprint, rounds["peer-b"].at(2).fingerprint);
    QVERIFY2(!notes.has("outOfStep"), "peer-a merged round 2 alone");
    for (qint64 r = 3; r <= 4; ++r)
      for (const auto* name : {"peer-a", "peer-c"}) {
        QCOMPARE(rounds[name].at(r).peers, 3);
        QCOMPARE(rounds[name].at(r).fingerprint, rounds["peer-b"].at(r).fingerprint);
      }
  }

  // Issue 15: no state makes the trainer wait forever. The odd peer out never receives any
  // snapshot (every fetch of one hangs, as from a peer that announces and never seeds): the
  // watchdog sees the transfer get no bytes, gives up, publishes the round it held and carries
  // on — every node finishes all its rounds. Before the watchdog peer-a waited at the round-1
  // boundary for good. Served (a peer connected, sending nothing): given up at
  // `deadline.max_seconds` (20 s here) out of step; unserved (no peer at all: the run's peers
  // left, or only silent keys announced it): after two of the watchdog's looks (2 × 8 s), long
  // before `deadline.max_seconds` (60 s in that row).
  void aSnapshotThatNeverArrivesDoesNotHoldThePeerForever_data() {
    QTest::addColumn<bool>("served");
    QTest::newRow("nobody serves it") << false;
    QTest::newRow("a peer sends nothing") << true;
  }
  void aSnapshotThatNeverArrivesDoesNotHoldThePeerForever() {
    QFETCH(bool, served);
    const auto run = runOddPeerOut(served ? "never-arrives-served" : "never-arrives", true, 3, false, 0, false, served,
                                   served ? 20 : 60);
    QVERIFY2(run.finished, "the nodes did not finish: a peer waited for a snapshot that never came");
    QVERIFY2(run.failure.isEmpty(), qPrintable(run.failure));
    QVERIFY2(outOfStep(run.notesOfA, 1, 2), "peer-a never went out of step");
    QVERIFY2(noted(run, "resync"), "peer-a never tried a snapshot");
    QVERIFY2(noted(run, "resyncGivenUp", {{"reason", served ? "deadline" : "unserved"}}),
             "peer-a did not give up waiting, or not for the reason its transfer gave");
    QVERIFY(!noted(run, "resyncGivenUp", {{"reason", served ? "unserved" : "deadline"}}));
    QVERIFY2(!noted(run, "snapshot"), "a withheld snapshot was adopted");
    for (const auto* name : {"peer-a", "peer-b", "peer-c"})
      for (qint64 r = 1; r <= 3; ++r)
        QVERIFY2(run.rounds.at(name).count(r), qPrintable(QString("%1 has no round %2").arg(name).arg(r)));
    qInfo("three nodes closed 3 rounds in %.1f s with peer-a's snapshots withheld", run.seconds);
  }

  // Issue 15 item 2: a peer that claims experts 2 and 3, renews its lease every round and never
  // publishes is waited for in rounds 1 and 2, then is silent (nothing for 2 rounds): its experts
  // are re-claimed for round 3, which closes without waiting for it.
  void aSilentClaimersExpertsAreReclaimed() {
    MemorySwarmHub hub("tiny-run");
    MemorySwarm swarm(hub, "peer-live"), silent(hub, "peer-silent");
    auto config = configFor("peer-live");
    config.policy.deadlineMinSeconds = 3;
    config.policy.deadlineMaxSeconds = 10;
    const int lease = config.policy.leaseRounds;
    const auto claimRound = [&silent, lease](qint64 round) {
      Announcement a;
      a.round = round;
      a.claims = {2, 3};
      a.leaseUntil = round + lease;
      QVERIFY(silent.announce(a).ok());
    };
    claimRound(1);
    // The ledger records each round's claims as they were in that round (issue 13, item 3): the
    // claims change in round 3, after round 2 was merged and before its state was durable.
    const std::string ledgerPath = dir_.filePath("silent-ledger.sqlite").toStdString();
    auto ledger = es::store::Ledger::open(ledgerPath, std::string(ES_SHARE_DIR) + "/sql");
    QVERIFY2(ledger.ok(), ledger ? "" : ledger.error().c_str());
    config.peer.tokenizer = std::make_shared<const es::train::BpeTokenizer>(data_->tokenizer);
    int gpuReads = 0;  // issue 16: a fake GPU whose temperature counts its readings
    config.readGpu = [&gpuReads]() -> std::optional<es::node::GpuReading> {
      ++gpuReads;
      return es::node::GpuReading{50, 1LL << 30, 8LL << 30, 40 + gpuReads, 100};
    };
    Node node(swarm, config, data_->train, data_->val, ledger->get());
    std::vector<RoundSummary> rounds;
    bool finished = false;
    QString failure;
    connect(&node, &Node::roundClosed, this, [&](const RoundSummary& s) {
      rounds.push_back(s);
      claimRound(s.round + 1);  // keeps up with the swarm
    });
    connect(&node, &Node::finished, this, [&] { finished = true; });
    connect(&node, &Node::failed, this, [&](const QString& e) { failure = e; });
    node.start();
    QVERIFY2(es::test::waitUntil([&] { return finished || !failure.isEmpty(); }, 180000), "the node did not finish");
    QVERIFY2(failure.isEmpty(), qPrintable(failure));
    QCOMPARE(int(rounds.size()), 3);
    QVERIFY(rounds[0].deadlineHit);   // it was live: waited for
    QCOMPARE(rounds[2].expected, 1);  // silent: not waited for
    QVERIFY(!rounds[2].deadlineHit);
    QCOMPARE(node.claims(), (std::vector<int>{0, 1, 2, 3}));
    QVERIFY((*ledger)->flush().ok());
    auto reader = es::store::LedgerReader::open(ledgerPath);
    QVERIFY(reader.ok());
    const std::vector<std::vector<int>> want{{0, 1}, {0, 1}, {0, 1, 2, 3}};
    for (int r = 1; r <= 3; ++r) {
      const auto rows = (*reader)->claims(hub.runId(), r);
      QVERIFY(rows.ok());
      std::vector<int> experts;
      for (const auto& row : *rows)
        if (row.peerId == "peer-live") experts.push_back(row.expert);
      QVERIFY2(experts == want[r - 1],
               qPrintable(QString("round %1: %2 claims in the ledger").arg(r).arg(experts.size())));
    }
    // Issue 17 item 4: each eval round's sample (the merged model's greedy continuation of the
    // run's prompt, the first tokens of its validation text) is in the ledger, and only those.
    const auto samples = (*reader)->samples(hub.runId());
    QVERIFY(samples.ok());
    std::vector<qint64> evalRounds, sampled;
    for (const auto& s : rounds)
      if (s.valLoss) evalRounds.push_back(s.round);
    const auto& val = *data_->val;
    const std::string prompt = data_->tokenizer.decode({val.begin(), val.begin() + 12});
    for (const auto& row : *samples) {
      sampled.push_back(row.round);
      QCOMPARE(row.prompt, prompt);
      QVERIFY(!row.text.empty());
      QCOMPARE(row.text, rounds[std::size_t(row.round - 1)].sample->text);
    }
    QVERIFY(!evalRounds.empty());
    QCOMPARE(sampled, evalRounds);
    // Each reading is on exactly one step's row, at most one a second; the other rows have none.
    const auto metrics = (*reader)->metrics(hub.runId());
    QVERIFY(metrics.ok());
    std::vector<std::int64_t> readAt;
    for (const auto& m : *metrics)
      if (m.gpu) {
        QCOMPARE(m.gpu->temperatureC, double(41 + readAt.size()));
        readAt.push_back(m.at);
      }
    QVERIFY(gpuReads >= 1);
    QCOMPARE(int(readAt.size()), gpuReads);
    QVERIFY2(int(metrics->size()) > gpuReads, "every step carried a reading: not throttled");
    for (std::size_t i = 1; i < readAt.size(); ++i)
      QVERIFY2(readAt[i] - readAt[i - 1] >= Node::kGpuReadingMs - 20,
               qPrintable(QString::number(readAt[i] - readAt[i - 1])));
  }

  // Issue 15 item 1 (Sybil majorities): from round 2 on, three fresh keys report in their records
  // that they merged every round into a state of their own, and announce a snapshot of it. By
  // head count they are the majority (3 against 2) and the honest pair took "their" snapshot;
  // weighted by accepted work (core/node/rules/standing.h) they weigh 3 against the pair's 2 × (1 + 2)
  // and more each round, so neither honest node leaves its state and both agree every round.
  void freshKeysReportingAnotherStateDoNotPullTheSwarm() {
    MemorySwarmHub hub("tiny-run");
    MemorySwarm swarmA(hub, "peer-a"), swarmB(hub, "peer-b");
    std::vector<std::unique_ptr<MemorySwarm>> sybils;
    for (const char* id : {"sybil-1", "sybil-2", "sybil-3"}) sybils.push_back(std::make_unique<MemorySwarm>(hub, id));
    auto configA = isolatedConfigFor("peer-a", "sybil"), configB = isolatedConfigFor("peer-b", "sybil");
    for (auto* c : {&configA, &configB}) {
      c->maxRounds = 4;
      c->policy.deadlineMinSeconds = 3;
      c->policy.deadlineMaxSeconds = 10;
    }
    Node a(swarmA, configA, data_->train, data_->val), b(swarmB, configB, data_->train, data_->val);
    std::map<std::string, std::map<qint64, std::string>> fingerprints;
    QStringList resyncs;
    int finished = 0;
    QString failure;
    const auto lie = [&sybils](qint64 merged) {  // every Sybil: "we merged `merged` into our state"
      for (auto& s : sybils) {
        Announcement an;
        an.round = merged + 1;
        an.claims = {0};
        an.leaseUntil = merged + 2;
        an.merged = {{merged - 1, "5ca1ab1e5ca1ab1e"}, {merged, "5ca1ab1e5ca1ab1e"}};
        an.snapshot = {{merged, es::ContentId("5ca1ab1e00000000")}};
        QVERIFY(s->announce(an).ok());
      }
    };
    for (auto* n : {&a, &b}) {
      const std::string name = n == &a ? "peer-a" : "peer-b";
      connect(n, &Node::roundClosed, this, [&, name](const RoundSummary& s) {
        fingerprints[name][s.round] = s.fingerprint;
        if (s.round >= 2) lie(s.round);
      });
      connect(n, &Node::message, this, [name](const QString& m) { qInfo("%s: %s", name.c_str(), qPrintable(m)); });
      connect(n, &Node::noted, this, [&resyncs, name](const QString& kind, const QVariantMap&) {
        if (kind == "outOfStep" || kind == "resync") resyncs << QString::fromStdString(name) + ": " + kind;
      });
      connect(n, &Node::finished, this, [&finished] { ++finished; });
      connect(n, &Node::failed, this, [&failure](const QString& e) { failure = e; });
    }
    a.start();
    b.start();
    QVERIFY2(es::test::waitUntil([&] { return finished == 2 || !failure.isEmpty(); }, 240000),
             "the nodes did not finish");
    QVERIFY2(failure.isEmpty(), qPrintable(failure));
    QVERIFY2(resyncs.isEmpty(), qPrintable(resyncs.join("\n")));
    QCOMPARE(int(fingerprints["peer-a"].size()), 4);
    QCOMPARE(fingerprints["peer-a"], fingerprints["peer-b"]);
  }

  // Issue 15 item 3: two peers claim experts and announce a contribution every round; the ghost
  // never serves a byte, the trickler one byte more at every look. Neither holds a round past its
  // deadline (the old rule waited for the trickle to the maximum); after 2 rounds the ghost is a
  // no-show — not waited for, not an owner — while the trickler, which does send, is still waited
  // for to the deadline (as a slow honest uplink is). From round 3 on the ghost's record says it
  // merged the live peer's state (as a peer back in step after a partition says): the live peer
  // waits for it again from round 4, as soon as that record arrives — once: when it stays away it
  // is out again from round 6, and the next lift comes kNoShowLiftRounds rounds after the first
  // (round 8).
  void announcersThatNeverServeOrTrickleDoNotHoldRounds() {
    MemorySwarmHub hub("tiny-run");
    MemorySwarm swarm(hub, "peer-live"), ghost(hub, "peer-ghost"), trickler(hub, "peer-trickle");
    auto config = isolatedConfigFor("peer-live", "ghost");
    config.maxRounds = 8;
    config.policy.expertsPerPeer = 1;
    config.policy.deadlineMinSeconds = 3;
    config.policy.deadlineMaxSeconds = 20;
    const int lease = config.policy.leaseRounds;
    std::set<es::ContentId> ghostIds, trickleIds;
    swarm.withhold([&](const es::ContentId& id) { return ghostIds.count(id) > 0 || trickleIds.count(id) > 0; });
    std::int64_t trickle = 0;
    swarm.reportTraffic([&] {
      es::node::SwarmTraffic t;
      for (const auto& id : trickleIds) t.transfers.push_back({id, 1 << 20, ++trickle, 0, trickle});
      return t;
    });
    std::map<std::int64_t, std::string> ghostMerged;  // what the ghost says it merged (ours, from round 3)
    const auto announceRound = [&](MemorySwarm& who, std::set<es::ContentId>& ids, std::vector<int> claims,
                                   qint64 round) {
      const QString path =
          dir_.filePath(QStringLiteral("%1-%2.bin").arg(QString::fromStdString(who.selfId().str())).arg(round));
      QFile f(path);
      const QByteArray bytes =
          QByteArray(64, char(round)) + QByteArray::fromStdString(who.selfId().str());  // ids name bytes
      QVERIFY(f.open(QIODevice::WriteOnly) && f.write(bytes) == bytes.size());
      f.close();
      const auto id = who.publish(path.toStdString());
      QVERIFY(id.ok());
      ids.insert(*id);
      Announcement a;
      a.round = round;
      a.claims = claims;
      a.leaseUntil = round + lease;
      a.contrib[round] = *id;
      if (&who == &ghost) a.merged = ghostMerged;
      QVERIFY(who.announce(a).ok());
    };
    const auto announceBoth = [&](qint64 round) {
      announceRound(ghost, ghostIds, {2, 3}, round);
      announceRound(trickler, trickleIds, {0, 1}, round);
    };
    announceBoth(1);
    Node node(swarm, config, data_->train, data_->val);
    std::vector<RoundSummary> rounds;
    bool finished = false;
    QString failure;
    es::test::NodeNotes notes;
    connect(&node, &Node::roundClosed, this, [&](const RoundSummary& s) {
      rounds.push_back(s);
      if (s.round >= 3) ghostMerged = {{s.round, s.fingerprint}};
      announceBoth(s.round + 1);  // they keep announcing
    });
    connect(&node, &Node::finished, this, [&] { finished = true; });
    connect(&node, &Node::failed, this, [&](const QString& e) { failure = e; });
    connect(&node, &Node::message, this, [&](const QString& m) { qInfo("live: %s", qPrintable(m)); });
    connect(&node, &Node::noted, this, [&](const QString& kind, const QVariantMap& f) { notes.add(kind, f); });
    node.start();
    QVERIFY2(es::test::waitUntil([&] { return finished || !failure.isEmpty(); }, 180000), "the node did not finish");
    QVERIFY2(failure.isEmpty(), qPrintable(failure));
    QCOMPARE(int(rounds.size()), 8);
    const std::vector<int> expected{3, 3, 2, 3, 3, 2, 2, 3};  // the ghost: waited for, out, in step, out, in step
    for (int r = 0; r < 8; ++r) {
      QVERIFY(rounds[r].deadlineHit);  // the trickler is waited for, to the deadline
      QCOMPARE(rounds[r].expected, expected[r]);
      // A trickle that would take days is not waited for past the deadline (1.5 × the round
      // time, a few seconds here); the old rule waited on to the 20 s maximum.
      QVERIFY2(rounds[r].gatherSeconds < 15, qPrintable(QString::number(rounds[r].gatherSeconds)));
    }
    const auto noShow = notes.of("noShow", {{"rounds", 2}});
    QCOMPARE(noShow.size(), 2);
    QCOMPARE(noShow.front().fields.value("peer").toString(), QString("peer-ghost"));
    const auto lifted = notes.of("waitedForAgain");
    QCOMPARE(lifted.size(), 2);  // in rounds 4 and 8 (what rounds 3 and 7 merged)
    QCOMPARE(lifted.front().fields.value("round").toLongLong(), 3);
    QCOMPARE(lifted.back().fields.value("round").toLongLong(), 7);
    // The ghost's orphans are dealt to the live peers, fewest claims first: ours had one, the
    // trickler two, so at least one of them is ours now (the other goes by roundRank).
    const auto claims = node.claims();
    QVERIFY2(std::count(claims.begin(), claims.end(), 2) || std::count(claims.begin(), claims.end(), 3),
             "the ghost's experts were not dealt again");
  }

  // Issue 15 item 3: an impostor announces another peer's contribution as its own. It does not
  // take over that peer's slot: the one transfer serves both, peer-b's contribution is merged
  // every round, and the impostor is rejected (the file names its real sender) and banned.
  void anImpostorCannotTakeAnotherSendersContribution() {
    MemorySwarmHub hub("tiny-run");
    MemorySwarm swarmA(hub, "peer-a"), swarmB(hub, "peer-b"), impostor(hub, "peer-0-impostor");
    Node a(swarmA, isolatedConfigFor("peer-a", "impostor"), data_->train, data_->val);
    Node b(swarmB, isolatedConfigFor("peer-b", "impostor"), data_->train, data_->val);
    std::vector<RoundSummary> roundsA;
    int finished = 0;
    QString failure;
    for (auto* n : {&a, &b}) {
      connect(n, &Node::finished, this, [&finished] { ++finished; });
      connect(n, &Node::failed, this, [&failure](const QString& e) { failure = e; });
    }
    connect(&a, &Node::roundClosed, this, [&roundsA](const RoundSummary& s) { roundsA.push_back(s); });
    connect(&a, &Node::message, this, [](const QString& m) { qInfo("a: %s", qPrintable(m)); });
    es::test::NodeNotes notesOfB;
    connect(&b, &Node::message, this, [](const QString& m) { qInfo("b: %s", qPrintable(m)); });
    connect(&b, &Node::noted, this, [&notesOfB](const QString& kind, const QVariantMap& f) { notesOfB.add(kind, f); });
    // Copies peer-b's newest contribution id into its own record as soon as it appears.
    std::set<es::ContentId> copied;
    QTimer copier;
    connect(&copier, &QTimer::timeout, this, [&] {
      for (const auto& p : impostor.peers()) {
        const auto& contrib = p.announced.contrib;
        if (p.id.str() != "peer-b" || contrib.empty() || copied.count(contrib.rbegin()->second)) continue;
        Announcement fake;
        fake.round = contrib.rbegin()->first;
        fake.claims = {0};
        fake.leaseUntil = fake.round + 2;
        fake.contrib = {*contrib.rbegin()};
        QVERIFY(impostor.announce(fake).ok());
        copied.insert(contrib.rbegin()->second);
      }
    });
    copier.start(20);
    a.start();
    b.start();
    QVERIFY2(es::test::waitUntil([&] { return finished == 2 || !failure.isEmpty(); }, 240000),
             "the nodes did not finish");
    QVERIFY2(failure.isEmpty(), qPrintable(failure));
    QVERIFY2(!copied.empty(), "the impostor never announced");
    QCOMPARE(int(roundsA.size()), 3);
    bool rejected = false;
    for (const auto& s : roundsA) {
      QCOMPARE(s.peers, 2);  // ours and peer-b's, every round
      for (const auto& v : s.verdicts) {
        if (v.sender.str() == "peer-b") QVERIFY2(v.accepted, v.reason.c_str());
        if (v.sender.str() != "peer-0-impostor") continue;
        QVERIFY(!v.accepted);
        QVERIFY2(v.reason.find("names sender") != std::string::npos, v.reason.c_str());
        rejected = true;
      }
    }
    QVERIFY2(rejected, "the impostor's copy never reached a verdict");
    // peer-b never fetches its own contribution from the impostor's announcement (it did, and at the
    // round's close retired it — stopped seeding it — so peer-a never got it).
    QVERIFY2(!notesOfB.has("fetchFailed"), "peer-b fetched its own contribution");
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
    // Paused exactly at the end of the round under way when the request reached the trainer: round
    // 1, or round 2 when the trainer's steps outran the request (asked at step 1, queued from this
    // thread; this tiny model's steps take milliseconds, and in the README run of e6ef7bc it paused
    // at step 6). That round merged while paused.
    QVERIFY2(es::test::waitUntil(
                 [&] { return (stepAtPause > 0 && qint64(rounds.size()) >= stepAtPause / 3) || !failure.isEmpty(); },
                 120000),
             "no pause at a round's end");
    QVERIFY2(failure.isEmpty(), qPrintable(failure));
    QVERIFY2(stepAtPause % 3 == 0 && stepAtPause / 3 <= 2, qPrintable(QString::number(stepAtPause)));  // sync_every 3
    const qint64 pausedRound = stepAtPause / 3;
    QCOMPARE(qint64(rounds.size()), pausedRound);
    QCOMPARE(rounds.back().round, pausedRound);
    QCOMPARE(rounds.back().step, stepAtPause);  // merged while the trainer stood still
    QVERIFY(node.paused());
    const auto view = node.view();
    QVERIFY(view.paused);
    QCOMPARE(view.peers.front().id, std::string("peer-solo"));
    QVERIFY(view.peers.front().self);
    QCOMPARE(view.peers.front().claims, (std::vector<int>{0, 1, 2, 3}));  // alone: every expert
    QCOMPARE(view.nExperts, 4);
    QCOMPARE(view.nLayers, 2);
    QCOMPARE(lastStep, stepAtPause);  // still nothing trained
    node.setPaused(false);
    QVERIFY2(es::test::waitUntil([&] { return finished || !failure.isEmpty(); }, 120000),
             "the resumed node did not finish");
    QVERIFY2(failure.isEmpty(), qPrintable(failure));
    QCOMPARE(pauses, (std::vector<bool>{true, false}));
    QCOMPARE(int(rounds.size()), 3);
    QVERIFY(lastStep >= 9);
  }
};

QTEST_GUILESS_MAIN(NodeRounds)
#include "tst_node_rounds.moc"
