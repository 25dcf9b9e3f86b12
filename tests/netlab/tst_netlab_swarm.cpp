// Issue 12, acceptance 1 and 2: six `expertswarm --no-gui` peers on the emulated internet of
// scripts/netlab — two public peers on one /24, two behind a NAT router that maps ports
// (NAT-PMP), two behind a NAT router that maps nothing — every uplink shaped, the project's own
// DHT node as the only bootstrap, no same-host relaxations (they listen on 0.0.0.0, as a
// volunteer's client does). They train the default run for 6 rounds: from round 2 on every round
// merges all 6 contributions on all 6 peers with the same fingerprint, and each peer's
// reachability self-test says what its site allows.
// Then the plain NAT router's uplink is cut for 60 s (ES_NETLAB_CUT_S=N for N s; ES_NETLAB_PARTITION=0
// skips it): the others keep closing rounds, and the cut peers merge with everyone again within 2
// rounds of the restore. A 60 s cut is usually absorbed by the round's ~150 s deadline; the forced
// split (200 s, longer than a deadline) costs ~4 min more and is a campaign, not CI
// (scripts/netlab-partition).
#include "netlab/netlab.h"

#include <QProcess>
#include <QRegularExpression>
#include <QTemporaryDir>

#include <algorithm>
#include <map>

using namespace es::test;

class NetlabSwarm : public QObject {
  Q_OBJECT

  static constexpr int kCleanRounds = 6;
  static constexpr int kMaxRounds = 14;
  QTemporaryDir dir_;

  // Each peer on a port of its own, as installed clients are (a random port kept from the first
  // run): two peers behind one NAT on one port would collide in its mappings.
  QStringList peerArgs(const LabHost& host, int index) const {
    const QString listen = QString("0.0.0.0:%1").arg(20000 + 111 * index);
    QStringList a{"--no-gui",
                  "--data-dir",
                  dir_.filePath(host.name),
                  "--listen",
                  listen,
                  "--bootstrap",
                  NetLab::kBootstrap,
                  "--sync-every",
                  "3",
                  "--eval-every",
                  "3",
                  "--rounds",
                  QString::number(kMaxRounds),
                  "--threads",
                  "1"};
    if (host.site == QLatin1String("mapped-nat")) a << "--port-mapping";
    return a;
  }

  static int lastRound(const SwarmClient& c) { return c.rounds().empty() ? 0 : c.rounds().rbegin()->first; }

  // Round r merged all `n` contributions on every client, with one fingerprint.
  static bool agreedRound(const std::vector<std::unique_ptr<SwarmClient>>& peers, int r, int n) {
    QString merged;
    for (const auto& p : peers) {
      const auto it = p->rounds().find(r);
      if (it == p->rounds().end() || it->second.peers != n) return false;
      if (merged.isEmpty()) merged = it->second.merged;
      if (it->second.merged != merged) return false;
    }
    return true;
  }

  // SIGTERM, then every client must have left within 90 s (systemd's default stop timeout).
  // One that has not is shown: its last log lines and what each of its threads is doing.
  static bool stopAll(const std::vector<std::unique_ptr<SwarmClient>>& peers) {
    for (auto& p : peers) p->terminate();
    const bool stopped = waitUntil(
        [&] { return std::none_of(peers.begin(), peers.end(), [](auto& p) { return p->running(); }); }, 90000);
    for (const auto& p : peers)
      if (p->running())
        qInfo().noquote() << p->name() << "still running 90 s after SIGTERM; its log ends:\n  "
                          << p->log().mid(std::max(0, int(p->log().size()) - 15)).join("\n  ") << "\nthreads:\n"
                          << p->threads();
    return stopped;
  }

  static void dump(const std::vector<std::unique_ptr<SwarmClient>>& peers) {
    for (const auto& p : peers) {
      QStringList rounds;
      for (const auto& [r, line] : p->rounds())
        rounds << QString("%1:%2/%3").arg(r).arg(line.peers).arg(line.merged.left(8));
      qInfo().noquote() << p->name() << p->exitState() << "rounds" << rounds.join(' ') << "\n  "
                        << p->timedLog().join("\n  ");
    }
  }

 private Q_SLOTS:
  void initTestCase() {
    if (const auto why = NetLab::unavailableReason(); !why.isEmpty())
      QSKIP(qPrintable("the emulated internet cannot be built here: " + why));
  }

  void sixPeersAcrossNats() {
    NetLab lab(2);
    QVERIFY2(lab.ok(), qPrintable(lab.log()));
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    env.insert("ES_REACHABILITY_GRACE_S", "45");
    auto boot = lab.start("boot", "boot", ES_SWARM_PROBE,
                          {"--listen", NetLab::kBootstrap, "--key", dir_.filePath("boot.key"), "--internet"});
    std::vector<std::unique_ptr<SwarmClient>> peers;
    for (const auto& host : lab.peers())
      peers.push_back(lab.start(host.name, host.name, ES_CLIENT_BINARY, peerArgs(host, int(peers.size())), env));
    QCOMPARE(int(peers.size()), 6);
    auto lab_site = [&](const SwarmClient& c) {
      for (const auto& h : lab.peers())
        if (h.name == c.name()) return h.site;
      return QString();
    };

    // 1. Six clean rounds.
    const bool clean = waitUntil(
        [&] {
          return std::all_of(peers.begin(), peers.end(),
                             [](auto& p) { return lastRound(*p) >= kCleanRounds || !p->running(); });
        },
        900000);
    // A client that left early shows why (its log ends with the reason; CI at 2ba6da5: "pub1
    // exited" with nothing else to go on).
    if (!clean || std::any_of(peers.begin(), peers.end(), [](auto& p) { return !p->running(); })) dump(peers);
    QVERIFY2(clean, "the six peers did not close 6 rounds in 15 minutes");
    for (auto& p : peers) QVERIFY2(p->running(), qPrintable(p->name() + " left: " + p->exitState()));
    for (int r = 2; r <= kCleanRounds; ++r) {
      if (!agreedRound(peers, r, 6)) dump(peers);
      QVERIFY2(agreedRound(peers, r, 6),
               qPrintable(QString("round %1 did not merge all 6 contributions everywhere").arg(r)));
    }
    // The reachability self-test: the public peers are reachable, the NAT-PMP peers reachable via
    // their mapping, the plain-NAT peers outgoing-only (their contributions reached everyone all
    // the same: the rounds above merged 6 of 6).
    const std::map<QString, QString> expected{{"public", "reachability: reachable ("},
                                              {"mapped-nat", "reachability: reachable via port mapping ("},
                                              {"plain-nat", "reachability: outgoing-only ("}};
    for (auto& p : peers) {
      QString said = QStringLiteral("(nothing)");
      for (const auto& line : p->log())
        if (line.startsWith("reachability: ")) said = line;
      qInfo().noquote() << p->name() << lab_site(*p) << said;
      QVERIFY2(said.startsWith(expected.at(lab_site(*p))), qPrintable(p->name() + " said " + said));
    }

    // 2. Partition: nat2 (the plain NAT, whose peers are outgoing-only) is cut off for 60 s.
    // Measured: at 49f00f1 one cut peer merged the cut round without a contribution and was not
    // back in step within 2 rounds. Since the records carry merged-state fingerprints
    // (Node::checkAgreement): by hand at fe31ada and in this test at 115d504 the round in progress
    // (deadline ~150 s, 1.5 × the ~100 s round) absorbed the 60 s cut and every round merged 6 of 6
    // (pass); at e37bad8 the cut peers missed round 7, saw the split at once, but waited for the
    // round-8 snapshot (fail) — a resync bug fixed in 115d504, whose netlab run did not split.
    // Forced split (ES_NETLAB_CUT_S=200, longer than the ~150 s deadline) at 6b20a09: the others
    // closed round 7 with 4; each cut peer merged round 7 alone; one saw the split only after its
    // round 8 (the others' records reached it late after the restore); both took the round-8
    // snapshot during round 9 and missed it (fail: back in round 10 at the earliest, not 8..9).
    // 60 s cut at b0de652 (beside nothing else): the cut began in round 7 and ended before it
    // closed; round 7 split three ways (the 4 outside merged 5 of 6, natp1 5 into another state,
    // natp2 4); natp1 took the round-7 snapshot during round 8, natp2 saw the split only after its
    // round 8 closed; rounds 8 (outside 5 of 6) and 9 (map2: 4 of 6) did not merge all 6 (fail).
    // Since 0656ce7 a peer out of step in the round it merged last first merges that round again
    // with the majority's set (records name it; "Repair before snapshot"), which is what that
    // three-way split needed. 60 s cut at 0656ce7: absorbed again (round 7 merged 6 of 6; pass).
    // Forced 200 s cut at 3ca9967 and 64105a3: the cut peers merged round 7 (and one also 8)
    // alone; the repair of round 7 got no bytes in its watchdog look and gave way to the round-8
    // snapshot; round 9 was trained again from scratch and missed the others' deadline (fail). At
    // 3ca9967 the others had also marked the cut peers no-shows for good (fixed in 64105a3: a
    // no-show in step again is waited for again); natp1 then repaired round 9 with 0 to fetch.
    // Forced 200 s cut, timed (the dumps carry arrival times since 6fe26bb): at 23b3d88 the cut
    // peers saw the others' records 34 s after the restore, one repaired round 7 in 14 s and then
    // gathered round 8 two minutes after the others had merged it. At 6fe26bb (close on the
    // swarm's set, no-shows lifted at once, rendezvous cap 15 s): round 9 merged 5 of 6 with one
    // fingerprint on all six (fail: 6 of 6 came in round 10). At f0da682 (a cut-off peer waits):
    // neither cut peer merged round 8 alone, but the repair of round 7 got no bytes in 30 s after
    // the restore, the round-8 snapshot took ~60 s and round 9 closed without them (fail).
    // The cause under it: libtorrent never dials a known seed while its own copy is complete, so
    // the outgoing-only peers never linked to the run torrent again (p2p/run_links.h;
    // tst_netlab_relink). With relinking (1e4aa1d) and at 74ecda1: passed, twice (the first
    // passes of the forced 200 s cut). At 540b932: the forced 200 s cut passed again (round 7
    // closed 4 of 6 outside, all 6 merged one state again within rounds 8..9) and the 60 s cut
    // passed (absorbed: round 7 merged 6 of 6) — since then the 60 s cut runs in every CI run.
    if (qEnvironmentVariable("ES_NETLAB_PARTITION") == QLatin1String("0")) {
      qInfo("partition scenario not run (ES_NETLAB_PARTITION=0)");
      QVERIFY2(stopAll(peers), "a client did not stop within 90 s of SIGTERM");
      return;
    }
    const int before = lastRound(*peers[0]);
    // ES_NETLAB_CUT_S: a longer cut than the round's deadline forces the split (60 s is absorbed
    // when the deadline is longer).
    const int cutSeconds =
        qEnvironmentVariableIntValue("ES_NETLAB_CUT_S") > 0 ? qEnvironmentVariableIntValue("ES_NETLAB_CUT_S") : 60;
    QVERIFY(lab.cut("nat2"));
    qInfo().noquote() << SwarmClient::stamp() + "nat2 cut";
    waitUntil([] { return false; }, cutSeconds * 1000);  // the cut's length is the scenario, not a hope
    QVERIFY(lab.restore("nat2"));
    qInfo().noquote() << SwarmClient::stamp() + "nat2 restored";
    std::vector<SwarmClient*> outside, inside;
    for (auto& p : peers) (lab_site(*p) == "plain-nat" ? inside : outside).push_back(p.get());
    const int restoredAt = lastRound(*outside[0]);
    // The partition did not stall the others: the round in progress during the cut closes on all
    // of them (at its deadline, when the cut peers' contributions could not arrive in time).
    const bool continued = waitUntil(
        [&] {
          return std::all_of(outside.begin(), outside.end(),
                             [&](auto* p) { return lastRound(*p) > before || !p->running(); });
        },
        300000);
    if (!continued) dump(peers);
    QVERIFY2(continued, "the peers outside the cut did not close the round in progress during it");
    // A client that left shows why (CI at afd6a98: "pub1 exited" during the cut, nothing else).
    if (std::any_of(outside.begin(), outside.end(), [](auto* p) { return !p->running(); })) dump(peers);
    for (auto* p : outside) QVERIFY2(p->running(), qPrintable(p->name() + " left: " + p->exitState()));
    qInfo("cut during round %d; restored after round %d; round %d merged %d contributions outside the cut", before + 1,
          restoredAt, before + 1, outside[0]->rounds().at(before + 1).peers);
    const bool rejoined = waitUntil(
        [&] {
          for (int r = restoredAt + 1; r <= restoredAt + 2; ++r)
            if (agreedRound(peers, r, 6)) return true;
          return std::any_of(peers.begin(), peers.end(),
                             [&](auto& p) { return lastRound(*p) > restoredAt + 2 || !p->running(); });
        },
        600000);
    const bool merged = agreedRound(peers, restoredAt + 1, 6) || agreedRound(peers, restoredAt + 2, 6);
    if (!merged) dump(peers);
    QVERIFY(rejoined);
    QVERIFY2(merged, qPrintable(QString("the cut peers did not merge with everyone within rounds %1..%2")
                                    .arg(restoredAt + 1)
                                    .arg(restoredAt + 2)));
    QVERIFY2(stopAll(peers), "a client did not stop within 90 s of SIGTERM");
    boot->kill();
  }

  // Issue 40's netlab case, a campaign (ES_NETLAB_CREATED_RUN=1; skipped otherwise, CI included):
  // a run made with create-run (tiny preset) is hosted by pub1 and joined by magnet link by the
  // five others — the two behind the plain NAT both on port 6881 — and all six merge rounds in one
  // state. Not in CI (minutes beside the 6-peer test above). By hand: ES_NETLAB_CREATED_RUN=1
  // QTEST_FUNCTION_TIMEOUT=900000 build/tests/tst_netlab_swarm aCreatedRunJoinedByMagnetAcrossNats
  void aCreatedRunJoinedByMagnetAcrossNats() {
    if (qEnvironmentVariable("ES_NETLAB_CREATED_RUN") != QLatin1String("1"))
      QSKIP("a campaign, not CI: ES_NETLAB_CREATED_RUN=1 runs it");
    const QString runDir = dir_.filePath("lab-run");
    QProcess create;
    // 300 steps a round: a few seconds even alone. At 3 (2026-12-06) pub1, alone until the others had
    // the manifest, closed thousands of rounds, and each snapshot it announced was retired before a
    // newcomer got a byte of it ("no bytes for 30 s", over and over): they never caught up.
    create.start(ES_CLIENT_BINARY, {"create-run", "--out", runDir, "--preset", "tiny", "--sync-every", "300",
                                    ES_SHARE_DIR "/runs/sotu-text/corpus"});
    QVERIFY(create.waitForFinished(300000) && create.exitCode() == 0);
    const auto link =
        QRegularExpression("magnet:\\?xt=urn:btmh:1220[0-9a-f]{64}").match(create.readAllStandardOutput());
    QVERIFY(link.hasMatch());
    NetLab lab(2);
    QVERIFY2(lab.ok(), qPrintable(lab.log()));
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    env.insert("ES_REACHABILITY_GRACE_S", "45");
    auto boot = lab.start("boot", "boot", ES_SWARM_PROBE,
                          {"--listen", NetLab::kBootstrap, "--key", dir_.filePath("lab-boot.key"), "--internet"});
    std::vector<std::unique_ptr<SwarmClient>> peers;
    auto argsOf = [&](const LabHost& host, int index) {
      QStringList a = peerArgs(host, index);
      a[a.indexOf("--rounds") + 1] = "100000";   // until stopped
      a[a.indexOf("--sync-every") + 1] = "300";  // the run's
      a[a.indexOf("--data-dir") + 1] = dir_.filePath("lab-" + host.name);
      if (host.name.startsWith("natp")) a[a.indexOf("--listen") + 1] = "0.0.0.0:6881";  // one port behind one NAT
      return a << "--run" << (host.name == "pub1" ? runDir : link.captured(0));
    };
    for (const auto& host : lab.peers()) {
      if (host.name != "pub1") continue;
      peers.push_back(lab.start(host.name, host.name, ES_CLIENT_BINARY, argsOf(host, 0), env));
    }
    QCOMPARE(int(peers.size()), 1);
    for (const auto& host : lab.peers())
      if (host.name != "pub1")
        peers.push_back(lab.start(host.name, host.name, ES_CLIENT_BINARY, argsOf(host, int(peers.size())), env));
    QCOMPARE(int(peers.size()), 6);
    auto agreedRounds = [&] {
      int agreed = 0;
      for (const auto& [r, line] : peers.front()->rounds()) agreed += agreedRound(peers, r, 6) ? 1 : 0;
      return agreed;
    };
    const bool together = waitUntil(
        [&] {
          return agreedRounds() >= 3 || std::any_of(peers.begin(), peers.end(), [](auto& p) { return !p->running(); });
        },
        600000);
    if (!together || agreedRounds() < 3) dump(peers);
    QVERIFY2(together && agreedRounds() >= 3, "the six peers did not merge 3 rounds of the created run in one state");
    for (auto& p : peers)
      QVERIFY2(p->logContains("Fetched the run's manifest") || p->name() == "pub1", qPrintable(p->name()));
    QVERIFY(stopAll(peers));
  }
};

QTEST_GUILESS_MAIN(NetlabSwarm)
#include "tst_netlab_swarm.moc"
