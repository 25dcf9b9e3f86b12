// What a peer accepts of a sharded round's content before anything moves (core/node/sharded_fetch.h,
// issue 38 steps 3, 5, 6): a contribution folder listing exactly the files its sender's claims
// predict, of which only the figures and the wanted shards' files are fetched; a merged shard of
// its name and one of its input set's sizes; a reducer index of its name within the plan's bound.
// The folder rule runs on a real folder written by saveContributionShards, published and fetched
// through MemorySwarm as the node's tests will (tst_swarm_shard_fetch: the same over libtorrent).
#ifndef Q_MOC_RUN  // moc need not parse LibTorch
#include "core/node/reducer_index.h"
#include "core/node/sharded_fetch.h"
#include "core/sync/fetch_size.h"
#include "core/sync/merged_shard_file.h"
#include "core/sync/shard_figures_file.h"
#include "core/sync/shard_file.h"

#include "support/memory_swarm.h"
#include "support/shard_model.h"
#include "support/wait_until.h"
#endif

#include <QDir>
#include <QTemporaryDir>
#include <QtTest>

using namespace es;
using namespace es::node;

namespace {

const sync::ContributionHeader kHeader{std::string(64, 'a'), 7, "peer-1", "base-9", "int8"};

const sync::Shard& expertShard(const std::vector<sync::Shard>& plan, int expert) {
  for (const auto& s : plan)
    if (s.expert == expert) return s;
  qFatal("no shard of expert %d", expert);
}

}  // namespace

class ShardedFetchTest : public QObject {
  Q_OBJECT
  QTemporaryDir dir_;

 private Q_SLOTS:
  void aFolderMustListExactlyWhatItsClaimsPredict() {
    const auto plan = sync::planShards(test::shardTestModel(), 3000);
    const auto expected = sync::contributionFolderFiles(plan, {1}, kHeader);
    QVERIFY(expected.size() > 2);
    const auto limits = shardedContributionLimits(plan, {1}, kHeader, {});
    auto files = expected;
    QCOMPARE(limits.folder("round-7", files), std::string());
    std::reverse(files.begin(), files.end());  // any listing order
    QCOMPARE(limits.folder("round-7", files), std::string());
    files = expected;
    files.pop_back();
    QVERIFY(!limits.folder("round-7", files).empty());  // one missing
    files = expected;
    files.emplace_back("zz.safetensors", 8);
    QVERIFY(!limits.folder("round-7", files).empty());  // one more
    files = expected;
    files[0].second += 1;
    QVERIFY(!limits.folder("round-7", files).empty());  // a size off by one byte
    // Another sender's claims predict other files: the expert it does not claim is not there.
    QVERIFY(!shardedContributionLimits(plan, {2}, kHeader, {}).folder("round-7", expected).empty());
  }

  void onlyTheFiguresAndTheWantedCarriedShardsAreFetched() {
    const auto plan = sync::planShards(test::shardTestModel(), 3000);
    const auto& shared = plan.front();
    QVERIFY(shared.expert < 0);
    const auto wanted =
        shardedContributionLimits(plan, {1}, kHeader, {shared.id, expertShard(plan, 1).id, expertShard(plan, 2).id})
            .folderWanted({});
    QCOMPARE(wanted, (std::set<std::string>{sync::kFiguresFileName, sync::shardFileName(shared),
                                            sync::shardFileName(expertShard(plan, 1))}));
    QCOMPARE(shardedContributionLimits(plan, {1}, kHeader, {}).folderWanted({}),
             std::set<std::string>{sync::kFiguresFileName});  // not a reducer: its figures alone
  }

  // A real folder, published and fetched: the reducer of one shard gets that file and the figures
  // (byte for byte the sender's), nothing else; a folder with a stray file is refused unfetched.
  void aRealFolderIsFetchedAsTheLimitsSay() {
    const auto config = test::shardTestModel();
    const auto plan = sync::planShards(config, 3000);
    const std::string folder = dir_.filePath("sender/round-7").toStdString();
    QVERIFY(QDir().mkpath(QString::fromStdString(folder)));
    const auto written = sync::saveContributionShards(folder, kHeader, test::senderDeltas(config, {1}, 3), plan);
    QVERIFY2(written.ok(), written.ok() ? "" : written.error().c_str());
    MemorySwarmHub hub("run");
    MemorySwarm sender(hub, "sender"), reducer(hub, "reducer");
    const auto id = sender.publish(folder);
    QVERIFY(id.ok());
    std::string path, failure;
    SwarmEvents events;
    events.fetched = [&](const ContentId&, const std::string& p) { path = p; };
    events.fetchFailed = [&](const ContentId&, const std::string& why, bool) { failure = why; };
    reducer.setEvents(events);
    const auto& shard = expertShard(plan, 1);
    QVERIFY(reducer
                .fetch(*id, dir_.filePath("reducer").toStdString(),
                       shardedContributionLimits(plan, {1}, kHeader, {shard.id}))
                .ok());
    QVERIFY(test::waitUntil([&] { return !path.empty() || !failure.empty(); }, 5000));
    QVERIFY2(failure.empty(), failure.c_str());
    QStringList expected{QString::fromStdString(sync::kFiguresFileName),
                         QString::fromStdString(sync::shardFileName(shard))};
    expected.sort();
    QCOMPARE(QDir(QString::fromStdString(path)).entryList(QDir::Files), expected);
    QVERIFY(sync::loadContributionShard(path + "/" + sync::shardFileName(shard), kHeader, shard).ok());

    QFile stray(QString::fromStdString(folder + "/notes.txt"));
    QVERIFY(stray.open(QIODevice::WriteOnly) && stray.write("x") == 1);
    stray.close();
    const auto strayId = sender.publish(folder);
    QVERIFY(strayId.ok() && *strayId != *id);
    path.clear();
    QVERIFY(reducer
                .fetch(*strayId, dir_.filePath("reducer2").toStdString(),
                       shardedContributionLimits(plan, {1}, kHeader, {shard.id}))
                .ok());
    QVERIFY(test::waitUntil([&] { return !path.empty() || !failure.empty(); }, 5000));
    QVERIFY2(failure.find("predict") != std::string::npos, failure.c_str());
    QVERIFY(!QDir(dir_.filePath("reducer2")).exists() || QDir(dir_.filePath("reducer2")).isEmpty());
  }

  void outputsAndIndexesHaveTheirNamesAndSizes() {
    const auto plan = sync::planShards(test::shardTestModel(), 3000);
    const sync::MergedShardKey key{std::string(64, 'a'), 7, "base-9", plan[1].id, "0123456789abcdef"};
    const std::set<std::string> senders{"peer-1", "peer-2"};
    const auto merged = mergedShardLimits(plan[1], key, senders);
    QCOMPARE(merged.sizes, sync::mergedShardSizes(plan[1], key, senders));
    QCOMPARE(merged.name, sync::mergedShardFileName(7, plan[1].id));
    const auto index = reducerIndexLimits(7, plan.size());
    QCOMPARE(index.maxBytes, reducerIndexMaxBytes(plan.size()));
    QCOMPARE(index.name, reducerIndexFileName(7));
  }
};

QTEST_GUILESS_MAIN(ShardedFetchTest)
#include "tst_sharded_fetch.moc"
