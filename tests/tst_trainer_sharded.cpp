// The trainer thread's commands for a sharded round (core/node/trainer_worker.h, issue 38), driven
// as the node will drive them: three TrainerWorkers of tiny peers train round 1 and merge it
// all-to-all; with sharded rounds allowed (the run shards from 3 senders, 1 reducer a shard) each
// merge derives round 2's topology, the same on the three, and each writes round 2 as a folder of
// shard files; each reduces its shards, and every worker applies all merged files onto one
// state, bit for bit. Without allowShardedRounds the same workers write files and derive nothing.
#include "core/node/rules/shard_refusals.h"
#include "core/node/trainer_worker.h"
#include "support/tiny_node.h"
#include "support/wait_until.h"

#include <QFileInfo>
#include <QTemporaryDir>
#include <QtTest>

#include <memory>

using namespace es;
using namespace es::node;

namespace {
const QStringList kNames = {"peer-a", "peer-b", "peer-c"};
const std::vector<std::vector<int>> kExperts = {{0, 1}, {2, 3}, {0, 2}};
}  // namespace

class TrainerShardedTest : public QObject {
  Q_OBJECT
  QTemporaryDir dir_;
  std::unique_ptr<train::RunData> data_;

  struct Worker {
    std::unique_ptr<TrainerWorker> w;
    std::map<qint64, RoundTrained> trained;
    std::map<qint64, RoundMerged> merged;
    std::vector<ReducedShard> reduced;
    QString failure;
  };
  std::vector<std::unique_ptr<Worker>> workers_;

  void startWorkers(bool sharded) {
    workers_.clear();
    for (int k = 0; k < 3; ++k) {
      const QString root = dir_.filePath(sharded ? "sharded" : "plain");
      auto config = test::tinyNodeConfig(*data_, root, kNames[k]);
      config.peer.syncEvery = 2;
      config.peer.trainer.localExperts = kExperts[k];
      config.peer.trainer.dataSeed = 11 + k;
      config.peer.reduction = {1, 0, 3};
      auto worker = std::make_unique<Worker>();
      worker->w = std::make_unique<TrainerWorker>(config.peer, data_->train, data_->val, config.contribDir,
                                                  config.snapshotDir, 0);
      auto* raw = worker.get();
      connect(raw->w.get(), &TrainerWorker::roundTrained, this,
              [raw](const RoundTrained& t) { raw->trained[t.round] = t; });
      connect(raw->w.get(), &TrainerWorker::merged, this,
              [raw](const RoundMerged& m) { raw->merged[m.result.round] = m; });
      connect(raw->w.get(), &TrainerWorker::shardsReduced, this,
              [raw](qint64, const std::vector<ReducedShard>& r, const QString& error) {
                raw->reduced = r;
                if (!error.isEmpty()) raw->failure = error;
              });
      connect(raw->w.get(), &TrainerWorker::failed, this, [raw](const QString& e) { raw->failure = e; });
      connect(raw->w.get(), &TrainerWorker::shardsRefused, this, [raw](qint64, const QString& e) { raw->failure = e; });
      raw->w->allowShardedRounds(sharded);
      raw->w->start();
      workers_.push_back(std::move(worker));
    }
  }

  bool allTrained(qint64 round) {
    return test::waitUntil(
        [&] {
          for (auto& w : workers_)
            if (!w->trained.count(round) || !w->failure.isEmpty()) return false;
          return true;
        },
        60000);
  }

  // Round 1 merged all-to-all on every worker.
  void mergeRoundOne() {
    QVERIFY(allTrained(1));
    std::vector<IncomingContribution> all;
    for (int k = 0; k < 3; ++k)
      all.push_back({PeerId(kNames[k].toStdString()), workers_[k]->trained.at(1).contribution.path,
                     std::set<int>(kExperts[k].begin(), kExperts[k].end())});
    for (int k = 0; k < 3; ++k) workers_[k]->w->merge(1, all, kExperts[k]);
    for (auto& w : workers_) QVERIFY2(w->merged.count(1), qPrintable(w->failure));
  }

  void stopWorkers() {
    for (auto& w : workers_) w->w->stop();
    workers_.clear();
  }

 private Q_SLOTS:
  void initTestCase() {
    auto data = test::bundledRunData(dir_.filePath("run"));
    QVERIFY2(data.ok(), data ? "" : data.error().c_str());
    data_ = std::make_unique<train::RunData>(std::move(*data));
  }

  void aShardedRoundThroughTheTrainerThreads() {
    startWorkers(true);
    mergeRoundOne();
    const auto topology = workers_[0]->merged.at(1).nextTopology;
    QVERIFY(topology);
    QVERIFY2(topology->sharded, topology->why.c_str());
    for (auto& w : workers_) QCOMPARE(w->merged.at(1).nextTopology->orders, topology->orders);

    QVERIFY(allTrained(2));
    ShardedRoundSpec spec;
    spec.round = 2;
    spec.shardElements = topology->shardElements;
    std::map<std::string, ContentId> inputs;
    for (int k = 0; k < 3; ++k) {
      const auto& path = workers_[k]->trained.at(2).contribution.path;
      QVERIFY2(QFileInfo(QString::fromStdString(path)).isDir(), path.c_str());  // a folder of shard files
      spec.senders.push_back(
          {PeerId(kNames[k].toStdString()), path, std::set<int>(kExperts[k].begin(), kExperts[k].end())});
      inputs.emplace(kNames[k].toStdString(), ContentId(std::string(63, '0') + std::to_string(k)));
    }
    spec.inputDigest = inputDigest(inputs, {});
    std::map<std::string, std::string> pathOf;
    for (int k = 0; k < 3; ++k) {
      const auto shards = topology->shardsReducedBy(kNames[k].toStdString(), 1);
      workers_[k]->w->reduceShards(2, spec, shards, dir_.filePath("reduced-" + kNames[k]));
      QVERIFY2(workers_[k]->failure.isEmpty(), qPrintable(workers_[k]->failure));
      QCOMPARE(workers_[k]->reduced.size(), shards.size());
      for (const auto& r : workers_[k]->reduced) pathOf[r.shard] = r.path;
    }
    std::vector<std::string> paths;
    for (const auto& shard : topology->plan) paths.push_back(pathOf.at(shard.id));
    for (int k = 0; k < 3; ++k) workers_[k]->w->applyShards(2, spec, paths, kExperts[k]);
    for (auto& w : workers_) QVERIFY2(w->merged.count(2), qPrintable(w->failure));
    const auto fingerprint = workers_[0]->merged.at(2).result.fingerprint;
    QVERIFY(fingerprint != workers_[0]->merged.at(1).result.fingerprint);
    for (auto& w : workers_) {
      QCOMPARE(w->merged.at(2).result.fingerprint, fingerprint);
      QCOMPARE(w->merged.at(2).result.accepted, 3);
    }
    stopWorkers();
  }

  void withoutShardedRoundsNothingChanges() {
    startWorkers(false);
    mergeRoundOne();
    QVERIFY(!workers_[0]->merged.at(1).nextTopology);
    QVERIFY(allTrained(2));
    for (auto& w : workers_) QVERIFY(QFileInfo(QString::fromStdString(w->trained.at(2).contribution.path)).isFile());
    stopWorkers();
  }
};

QTEST_GUILESS_MAIN(TrainerShardedTest)
#include "tst_trainer_sharded.moc"
