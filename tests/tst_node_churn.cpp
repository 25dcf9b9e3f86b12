// Issue 38, churn: four Nodes over the in-memory Swarm (tests/support/memory_swarm.h) in a run
// that shards from 4 senders with merged work, one reducer a shard; peer-d is killed once it
// merged round 2 — its Node destroyed, its record left as the last it signed (a killed process's
// lingers in the DHT). By the ledger it stays a reducer candidate for the two rounds after (it sent
// rounds 1 and 2), so rounds 3 and 4 are still planned with it; it sent neither, so at their close
// the next of each of its shards' orders that sent the round reduces the shard in its place
// (protocol step 2, RoundTopology::withReducersAmong) — nobody waits for its outputs or
// recomputes its shards. The three survivors end every round in one state. (The gather still
// waits for peer-d to the deadline in those rounds, as for a cut-off peer: from here a dead peer
// and a cut link look the same, and the netlab's partitions are waited for.)
#include "core/node/node.h"
#include "support/memory_swarm.h"
#include "support/node_notes.h"
#include "support/tiny_node.h"
#include "support/wait_until.h"

#include <QTemporaryDir>
#include <QTimer>

#include <memory>
#include <set>

using namespace es::node;

class NodeChurn : public QObject {
  Q_OBJECT
  QTemporaryDir dir_;
  std::unique_ptr<es::train::RunData> data_;

  struct Run {
    std::map<std::string, std::map<qint64, RoundSummary>> rounds;
    std::map<std::string, es::test::NodeNotes> notes;
    QString failure;
    std::set<std::string> finishedBy;
  };

  // peer-a … peer-d to round `rounds`; peer-d is destroyed once it closed round `killAfter`.
  // Deadlines of 6 to 30 s: the survivors wait for peer-d to the deadline in rounds 3 and 4.
  Run runFour(const QString& tag, int rounds, qint64 killAfter) {
    MemorySwarmHub hub("tiny-run");
    std::vector<std::unique_ptr<MemorySwarm>> swarms;
    std::vector<std::unique_ptr<Node>> nodes;
    Run run;
    for (int k = 0; k < 4; ++k) {
      const QString name = QStringLiteral("peer-%1").arg(QChar('a' + k));
      swarms.push_back(std::make_unique<MemorySwarm>(hub, name.toStdString()));
      auto c = es::test::roundingNodeConfig(*data_, dir_.filePath(tag), name, 3, rounds, 6, 30, 1 + k);
      c.peer.codec = "int8";
      c.peer.reduction = {1, 0, 4};
      nodes.push_back(std::make_unique<Node>(*swarms.back(), c, data_->train, data_->val));
      Node* n = nodes.back().get();
      const std::string id = name.toStdString();
      connect(n, &Node::roundClosed, this, [&run, &nodes, &swarms, id, killAfter, k](const RoundSummary& s) {
        run.rounds[id][s.round] = s;
        if (id != "peer-d" || s.round != killAfter) return;
        QTimer::singleShot(0, [&nodes, &swarms, k] {  // after this slot: the node is mid-emit
          swarms[std::size_t(k)]->setEvents({});      // what it had in flight never reaches it
          nodes[std::size_t(k)].reset();
        });
      });
      connect(n, &Node::noted, this,
              [&run, id](const QString& kind, const QVariantMap& f) { run.notes[id].add(kind, f); });
      connect(n, &Node::finished, this, [&run, id] { run.finishedBy.insert(id); });
      connect(n, &Node::failed, this, [&run](const QString& e) { run.failure = e; });
      connect(n, &Node::message, this, [id](const QString& m) { qInfo("%s: %s", id.c_str(), qPrintable(m)); });
    }
    for (auto& n : nodes) n->start();
    es::test::waitUntil([&] { return run.finishedBy.size() >= 3 || !run.failure.isEmpty(); }, 240000);
    return run;
  }

 private Q_SLOTS:
  void initTestCase() {
    auto data = es::test::bundledRunData(dir_.filePath("run"));
    QVERIFY2(data.ok(), data ? "" : data.error().c_str());
    data_ = std::make_unique<es::train::RunData>(std::move(*data));
  }

  void aKilledReducersShardsAreReducedByTheNextInOrder() {
    const int rounds = 4;
    const Run run = runFour(QStringLiteral("killed"), rounds, 2);
    QVERIFY2(run.failure.isEmpty(), qPrintable(run.failure));
    const std::set<std::string> survivors{"peer-a", "peer-b", "peer-c"};
    QCOMPARE(run.finishedBy, survivors);
    for (const auto& peer : survivors) {
      const auto& mine = run.rounds.at(peer);
      const auto& notes = run.notes.at(peer);
      QCOMPARE(mine.at(2).peers, 4);
      for (qint64 r = 3; r <= rounds; ++r) {
        QVERIFY2(mine.count(r), qPrintable(QString("%1 never closed round %2").arg(peer.c_str()).arg(r)));
        QCOMPARE(mine.at(r).peers, 3);
        QCOMPARE(mine.at(r).fingerprint, run.rounds.at("peer-a").at(r).fingerprint);
        QVERIFY2(notes.has("sharded", {{"round", r}}), qPrintable(notes.trail()));
        QVERIFY2(!notes.has("reducersGivenUp", {{"round", r}}), qPrintable(notes.trail()));
        QVERIFY2(!notes.has("recompute", {{"round", r}}), qPrintable(notes.trail()));
      }
    }
    for (qint64 r = 3; r <= rounds; ++r) {
      int takenOver = 0;
      for (const auto& peer : survivors)
        for (const auto& note : run.notes.at(peer).of("takeOver", {{"round", r}}))
          takenOver += note.fields.value("shards").toInt();
      QVERIFY2(takenOver > 0, qPrintable(QString("nobody reduced peer-d's shards of round %1").arg(r)));
      qInfo("round %lld: %d of peer-d's shards reduced by the next in order", r, takenOver);
    }
  }
};

QTEST_GUILESS_MAIN(NodeChurn)
#include "tst_node_churn.moc"
