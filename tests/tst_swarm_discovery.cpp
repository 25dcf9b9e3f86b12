// Issue 4, acceptance 1, 2, 5 (over the wire) and 6 (same lease map everywhere): 8 peers as
// separate processes plus one DHT bootstrap node, real libtorrent sessions on 127.0.0.1 (inside a
// network namespace with only `lo` where available: scripts/in-netns).
#include "p2p/identity.h"
#include "p2p/peer_record.h"
#include "p2p/torrent_maker.h"
#include "support/swarm_probes.h"

#include <QTemporaryDir>

using namespace es::test;
using es::p2p::Identity;

class SwarmDiscovery : public QObject {
  Q_OBJECT

  static constexpr int kPeers = 8;
  QTemporaryDir dir_;
  std::unique_ptr<Probe> bootstrap_;
  std::vector<std::unique_ptr<Probe>> peers_;
  std::vector<QString> keys_;  // public keys (hex), by peer
  QString runId_;

  int recordsSeen(const Probe& p, const QString& pk, qint64 seq) const {
    return p.count([&](const QJsonObject& e) {
      return isEvent(e, "record") && e.value("pk").toString() == pk && e.value("seq").toInteger() == seq;
    });
  }
  QJsonObject firstRecord(const Probe& p, const QString& pk, qint64 seq) const {
    return p.find([&](const QJsonObject& e) {
      return isEvent(e, "record") && e.value("pk").toString() == pk && e.value("seq").toInteger() == seq;
    });
  }

 private Q_SLOTS:
  void initTestCase() {
    QVERIFY(dir_.isValid());
    // The run torrent: a small run folder every peer already has (they all seed it).
    QFile manifest(QStringLiteral(ES_SHARE_DIR "/runs/sotu-text/run.json"));
    QVERIFY(manifest.open(QIODevice::ReadOnly));
    const auto bytes = manifest.readAll();
    for (int i = 0; i < kPeers; ++i) {
      QDir().mkpath(dir_.filePath(QString("peer%1/run").arg(i)));
      QFile copy(dir_.filePath(QString("peer%1/run/run.json").arg(i)));
      QVERIFY(copy.open(QIODevice::WriteOnly));
      copy.write(bytes);
    }
    auto torrent = es::p2p::makeTorrent(dir_.filePath("peer0/run/run.json").toStdString());
    QVERIFY2(torrent.ok(), torrent.ok() ? "" : torrent.error().c_str());
    runId_ = QString::fromStdString(torrent->infoHashV2);
    QFile file(dir_.filePath("run.torrent"));
    QVERIFY(file.open(QIODevice::WriteOnly));
    file.write(torrent->bytes.data(), qint64(torrent->bytes.size()));
  }

  void everyPeerHoldsEveryRecordWithin30Seconds() {
    bootstrap_ = std::make_unique<Probe>(
        "bootstrap", QStringList{"--listen", "127.0.0.1:0", "--key", dir_.filePath("bootstrap.key")});
    QVERIFY(waitUntil([&] { return !bootstrap_->find([](auto& e) { return isEvent(e, "ready"); }).isEmpty(); }, 10000));
    const auto node = bootstrap_->find([](auto& e) { return isEvent(e, "ready"); }).value("endpoint").toString();

    QElapsedTimer clock;
    clock.start();
    for (int i = 0; i < kPeers; ++i)
      peers_.push_back(std::make_unique<Probe>(
          QString("peer%1").arg(i),
          QStringList{"--listen", "127.0.0.1:0", "--bootstrap", node, "--key",
                      dir_.filePath(QString("peer%1.key").arg(i)), "--run", dir_.filePath("run.torrent"), "--run-dir",
                      dir_.filePath(QString("peer%1/run").arg(i))}));
    for (auto& p : peers_) {
      QVERIFY2(waitUntil([&] { return !p->find([](auto& e) { return isEvent(e, "ready"); }).isEmpty(); }, 10000),
               qPrintable(p->name()));
      keys_.push_back(p->find([](auto& e) { return isEvent(e, "ready"); }).value("pk").toString());
    }
    // Each peer claims expert i of 8 for rounds 0..10.
    for (int i = 0; i < kPeers; ++i) peers_[i]->send(QString("record 1 0 %1 10").arg(i));
    const bool all = waitUntil(
        [&] {
          for (int i = 0; i < kPeers; ++i)
            for (int j = 0; j < kPeers; ++j)
              if (i != j && recordsSeen(*peers_[i], keys_[j], 1) == 0) return false;
          return true;
        },
        30000);
    const double seconds = clock.elapsed() / 1000.0;
    qInfo("discovery: all %d peers hold all %d records %.2f s after the processes were started", kPeers, kPeers,
          seconds);
    QVERIFY2(all, "some peer lacks some record after 30 s");
    for (auto& p : peers_) {
      const auto status = ask(*p, "status", "status");
      QCOMPARE(status.value("records").toInt(), kPeers);  // its own + 7
      QCOMPARE(status.value("dropped").toInt(), 0);
    }
  }

  void recordUpdatesReachEveryPeer() {
    QVERIFY(peers_.size() == kPeers);
    std::vector<double> latencies;
    for (int i = 0; i < kPeers; ++i) {
      const auto sentAt =
          ask(*peers_[i], QString("record 2 1 %1 11").arg(i), "published-record").value("t").toInteger();
      QVERIFY(sentAt > 0);
      QVERIFY2(waitUntil(
                   [&] {
                     for (int j = 0; j < kPeers; ++j)
                       if (j != i && recordsSeen(*peers_[j], keys_[i], 2) == 0) return false;
                     return true;
                   },
                   15000),
               qPrintable(QString("update of peer %1 did not reach everyone in 15 s").arg(i)));
      for (int j = 0; j < kPeers; ++j)
        if (j != i) latencies.push_back(double(firstRecord(*peers_[j], keys_[i], 2).value("t").toInteger() - sentAt));
    }
    const double worst = *std::max_element(latencies.begin(), latencies.end());
    qInfo("record update latency over %zu deliveries: median %.0f ms, max %.0f ms", latencies.size(), median(latencies),
          worst);
  }

  void allPeersComputeTheSameLeaseMap() {
    QJsonArray first;
    for (int i = 0; i < kPeers; ++i) {
      const auto owners = ask(*peers_[i], "leases 1 8 10", "leases").value("owners").toArray();
      QCOMPARE(owners.size(), 8);
      for (int e = 0; e < 8; ++e) {
        QCOMPARE(owners[e].toArray().size(), 1);
        QCOMPARE(owners[e].toArray()[0].toString(), keys_[e].left(8));  // expert e is peer e's
      }
      if (i == 0) first = owners;
      QCOMPARE(owners, first);
    }
    // Leases end: in round 12 (past lease 11) nobody owns anything. (The records say round 1, lease
    // 11: lease_rounds 10 keeps them within the longest lease; see es::leaseHolds.)
    const auto expired = ask(*peers_[3], "leases 12 8 10", "leases").value("owners").toArray();
    for (const auto& owners : expired) QVERIFY(owners.toArray().isEmpty());
  }

  void invalidRecordsOverTheWireAreDroppedAndCounted() {
    // Peer 7 pushes six bad records into the gossip; every other peer must drop all of them.
    auto forger = Identity::fromSeed({});
    auto victim = Identity::load(dir_.filePath("peer0.key").toStdString());
    QVERIFY(victim.ok());
    es::p2p::PeerRecord base;
    base.run = runId_.toStdString();
    base.pk = victim->publicKey();
    base.seq = 1;  // peer 0 is at seq 2: a replay
    base.claims = {0};
    base.leaseUntil = 10;
    const auto replay = es::p2p::signRecord(base, *victim);
    QVERIFY(replay.ok());
    auto badSig = *replay;
    badSig[badSig.find("3:sig64:") + 8 + 10] ^= 0x01;  // a byte inside the signature
    auto otherRun = base;
    otherRun.run = std::string(64, 'a');
    otherRun.seq = 9;
    const auto wrongRun = es::p2p::signRecord(otherRun, *victim);
    auto stolen = base;
    stolen.seq = 50;  // peer 0's key, signed by someone else
    auto stolenBytes = es::p2p::recordPayload(stolen);
    const auto forgedSig = forger.sign(stolenBytes);
    // Canonical form: "sig" sorts between "seq" and "snapshot".
    stolenBytes.insert(stolenBytes.find("8:snapshot"),
                       "3:sig64:" + std::string(reinterpret_cast<const char*>(forgedSig.data()), 64));
    const std::vector<std::string> bad = {
        "garbage, not bencode", std::string(1500, 'x'), *replay, badSig, *wrongRun, stolenBytes};
    std::vector<std::size_t> before;
    for (auto& p : peers_) before.push_back(p->events().size());
    for (const auto& b : bad) peers_[7]->send("inject " + QByteArray::fromStdString(b).toHex());
    auto reasonsOf = [&](int i) {
      QStringList reasons;
      for (std::size_t k = before[i]; k < peers_[i]->events().size(); ++k)
        if (isEvent(peers_[i]->events()[k], "dropped"))
          reasons << peers_[i]->events()[k].value("reason").toString().section(':', 0, 0);
      return reasons;
    };
    // The bad bytes reach peer 7's direct neighbours; nobody relays what it refused, so each
    // neighbour must drop exactly the six, and everyone else sees none of them.
    auto neighbours = [&] {
      int n = 0;
      for (int i = 0; i < kPeers - 1; ++i) n += reasonsOf(i).isEmpty() ? 0 : 1;
      return n;
    };
    const bool dropped = waitUntil(
        [&] {
          for (int i = 0; i < kPeers - 1; ++i)
            if (!reasonsOf(i).isEmpty() && reasonsOf(i).size() < int(bad.size())) return false;
          return neighbours() >= 1;
        },
        15000);
    for (int i = 0; i < kPeers - 1; ++i) qInfo() << peers_[i]->name() << "dropped:" << reasonsOf(i);
    qInfo("%d of %d peers were connected to the forger and dropped its records", neighbours(), kPeers - 1);
    QVERIFY2(dropped, "the forger's neighbours did not drop all six bad records within 15 s");
    for (int i = 0; i < kPeers - 1; ++i) {
      const auto reasons = reasonsOf(i);
      if (!reasons.isEmpty()) {
        QCOMPARE(reasons.size(), int(bad.size()));
        for (const char* reason : {"garbage", "oversize", "stale", "bad signature", "wrong run"})
          QVERIFY2(reasons.contains(reason), reason);
        QCOMPARE(reasons.count("bad signature"), 2);  // the flipped byte and the stolen key
        QVERIFY(ask(*peers_[i], "status", "status").value("dropped").toInt() >= int(bad.size()));
      }
      QVERIFY(peers_[i]->running());
      QCOMPARE(ask(*peers_[i], "status", "status").value("records").toInt(), kPeers);  // nothing bad was stored
    }
    // The swarm still works: a fresh update from peer 0 reaches everyone.
    peers_[0]->send("record 3 2 0 12");
    QVERIFY(waitUntil(
        [&] {
          for (int j = 1; j < kPeers; ++j)
            if (recordsSeen(*peers_[j], keys_[0], 3) == 0) return false;
          return true;
        },
        15000));
  }

  void cleanupTestCase() {
    peers_.clear();
    bootstrap_.reset();
  }
};

QTEST_GUILESS_MAIN(SwarmDiscovery)
#include "tst_swarm_discovery.moc"
