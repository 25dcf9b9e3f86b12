// A sharded round's outputs as reducers publish them (core/node/output_publisher.h) and a peer
// gathers them (core/node/output_gather.h, issue 38 steps 5–6) over the in-memory swarm: reducers
// write real merged-shard files (merged_shard_file.h), publish them and their index
// (reducer_index.h) and name the index in their record; the peer fetches the
// waited-for reducers' indexes, decides each shard by shard_outputs.h's rule and fetches what it
// applies — byte for byte the reducers' files. A reducer that disagrees puts its shard up for a
// recomputation; a silent one is replaced once given up; one whose index breaks its format is
// refused and replaced; a key outside the orders is never fetched from.
#ifndef Q_MOC_RUN  // moc need not parse LibTorch
#include "core/node/output_gather.h"
#include "core/node/output_publisher.h"
#include "core/sync/merged_shard_file.h"
#include "core/sync/shard_figures_file.h"
#include "core/sync/shard_reduce.h"

#include "support/memory_swarm.h"
#include "support/shard_model.h"
#include "support/wait_until.h"
#endif

#include <QCryptographicHash>
#include <QDir>
#include <QFile>
#include <QTemporaryDir>
#include <QtTest>

#include <memory>
#include <optional>

using namespace es;
using namespace es::node;

namespace {

const std::string kRun = "run";
const std::string kDigest = "0123456789abcdef";
const std::map<std::string, std::set<int>> kInputs = {{"sender-1", {}}, {"sender-2", {1}}};

std::string readAll(const std::string& path) {
  QFile f(QString::fromStdString(path));
  return f.open(QIODevice::ReadOnly) ? f.readAll().toStdString() : std::string();
}

}  // namespace

class OutputGatherTest : public QObject {
  Q_OBJECT
  QTemporaryDir dir_;
  model::ModelConfig config_ = test::shardTestModel();
  std::vector<sync::Shard> plan_ = sync::planShards(config_, 3000);
  std::unique_ptr<MemorySwarmHub> hub_;
  std::map<std::string, std::unique_ptr<MemorySwarm>> swarms_;

  MemorySwarm& swarm(const std::string& id) {
    auto& s = swarms_[id];
    if (!s) s = std::make_unique<MemorySwarm>(*hub_, id);
    return *s;
  }

  ReducerIndexKey key(const std::string& reducer) const { return {kRun, 5, "base-4", PeerId(reducer)}; }

  // `reducer` writes every shard's merged file (rows from `seed`; `odd` shards from `oddSeed`),
  // publishes them and its index, and names the index in its record.
  // `reducer` writes every shard's merged file (rows from `seed`; `odd` shards from another seed;
  // `misnamed`: a shard whose file names a sender outside the set, a size no fetch accepts),
  // publishes them and its index as a reducer does (publishOutputs) and names the index in its
  // record.
  ContentId reduce(const std::string& reducer, std::uint64_t seed, std::set<std::string> odd = {},
                   const std::string& misnamed = {}) {
    const std::string dir = dir_.filePath(QString::fromStdString(reducer)).toStdString();
    QDir().mkpath(QString::fromStdString(dir));
    std::vector<std::pair<std::string, std::string>> reduced;
    for (const auto& shard : plan_) {
      std::vector<std::string> senders;
      for (const auto& [sender, claims] : kInputs)
        if (sync::carriesShard(shard, claims)) senders.push_back(sender);
      if (shard.id == misnamed) senders.push_back("sender-3");
      const auto rows =
          sync::shardRows(test::senderDeltas(config_, {0, 1, 2, 3}, odd.count(shard.id) ? 99 : seed), shard);
      sync::MergedShard merged;
      merged.key = sync::MergedShardKey{kRun, 5, "base-4", shard.id, kDigest};
      merged.senders = senders;
      if (shard.expert < 0 && shard.id != misnamed)
        merged.credit = sync::ShardAgreement{1.0, shard.elements(), std::vector<double>(senders.size(), 0.5),
                                             std::vector<double>(senders.size(), 2.0)};
      merged.rows = rows;
      const std::string path = dir + "/" + sync::mergedShardFileName(5, shard.id);
      if (!sync::saveMergedShard(path, shard, merged).ok()) qFatal("cannot write %s", path.c_str());
      reduced.emplace_back(shard.id, path);
    }
    const auto published = publish(reducer, reduced);
    if (!published.ok()) qFatal("publishOutputs: %s", published.error().c_str());
    Announcement a;
    a.round = 5;
    a.outputs[5] = published->indexContent;
    if (!swarm(reducer).announce(a).ok()) qFatal("cannot announce");
    return published->indexContent;
  }

  Expected<PublishedOutputs> publish(const std::string& reducer,
                                     const std::vector<std::pair<std::string, std::string>>& reduced) {
    std::optional<Expected<PublishedOutputs>> got;
    publishOutputs(swarm(reducer), key(reducer), kDigest, reduced, planIds(),
                   dir_.filePath(QString::fromStdString(reducer)).toStdString(),
                   [&got](Expected<PublishedOutputs> out) { got.emplace(std::move(out)); });
    if (!test::waitUntil([&] { return got.has_value(); }, 5000)) return makeError("publishOutputs never finished");
    return std::move(*got);
  }

  std::vector<std::string> planIds() const {
    std::vector<std::string> ids;
    for (const auto& s : plan_) ids.push_back(s.id);
    return ids;
  }

  ContentId announceIndex(const std::string& reducer, const std::string& indexPath) {
    const auto indexId = swarm(reducer).publish(indexPath).value();
    Announcement a;
    a.round = 5;
    a.outputs[5] = indexId;
    if (!swarm(reducer).announce(a).ok()) qFatal("cannot announce");
    return indexId;
  }

  // The peer's gather over every shard's order r1, r2, r3, r4 (3 reducers a shard).
  std::unique_ptr<OutputGather> gatherOf(const std::string& peer) {
    OutputGather::Spec spec{key(""), kDigest, kInputs, plan_, {}, 3};
    spec.orders.assign(plan_.size(), {"r1", "r2", "r3", "r4"});
    auto gather = std::make_unique<OutputGather>(swarm(peer), dir_.filePath(QString::fromStdString(peer)).toStdString(),
                                                 std::move(spec));
    SwarmEvents events;
    events.fetched = [g = gather.get()](const ContentId& c, const std::string& path) { g->fetched(c, path); };
    events.fetchFailed = [g = gather.get()](const ContentId& c, const std::string& why, bool refused) {
      g->failed(c, why, refused);
    };
    swarm(peer).setEvents(events);
    return gather;
  }

  // Passes until `done` (each pass as the node's on a record change), or 5 s.
  bool passUntil(OutputGather& gather, const std::string& peer, const std::function<bool()>& done) {
    return test::waitUntil(
        [&] {
          gather.pass(swarm(peer).peers());
          return done();
        },
        5000);
  }

 private Q_SLOTS:
  void init() {
    swarms_.clear();
    hub_ = std::make_unique<MemorySwarmHub>(kRun);
  }

  void agreeingReducersOutputsAreFetchedAndApplied() {
    for (const auto& r : {"r1", "r2", "r3"}) reduce(r, 7);
    const auto strangers = reduce("stranger", 8);  // outside every order: never fetched from
    auto gather = gatherOf("peer");
    QVERIFY(passUntil(*gather, "peer", [&] { return gather->complete(); }));
    const auto paths = gather->appliedPaths();
    QCOMPARE(paths.size(), plan_.size());
    for (std::size_t s = 0; s < plan_.size(); ++s)
      QCOMPARE(readAll(paths[s]),
               readAll(dir_.filePath("r1").toStdString() + "/" + sync::mergedShardFileName(5, plan_[s].id)));
    QVERIFY(gather->toRecompute().empty() && gather->refusedReducers().empty());
    QVERIFY2(!swarm("peer").fetchLimits().count(strangers), "fetched the stranger's index");
  }

  void aDisagreeingReducerPutsItsShardUpForRecomputation() {
    reduce("r1", 7);
    reduce("r2", 7, {plan_[1].id});
    reduce("r3", 7);
    auto gather = gatherOf("peer");
    QVERIFY(passUntil(*gather, "peer", [&] { return !gather->toRecompute().empty(); }));
    QCOMPARE(gather->toRecompute(), std::vector<std::string>{plan_[1].id});
    QVERIFY(!gather->complete());
  }

  void aSilentReducerIsReplacedOnceGivenUp() {
    reduce("r1", 7);
    reduce("r2", 7);
    reduce("r4", 7);  // the replacement, ready early
    auto gather = gatherOf("peer");
    QVERIFY(passUntil(*gather, "peer", [&] { return gather->waitingOn() == std::set<std::string>{"r3"}; }));
    QVERIFY(!gather->complete());
    gather->giveUp("r3");
    QVERIFY(passUntil(*gather, "peer", [&] { return gather->complete(); }));
  }

  // The outputs' deadlines: a reducer that named no index is given up at the first, one whose
  // named index is on its way (withheld here) only at the last — and then a chosen output that
  // never comes is abandoned and its shard recomputed.
  void aNamedIndexOnItsWayGetsTheSecondDeadline() {
    const auto r3 = reduce("r3", 7);
    auto gather = gatherOf("peer");
    swarm("peer").withhold([r3](const ContentId& id) { return id == r3; });
    QVERIFY(passUntil(*gather, "peer", [&] { return gather->waitingOn().count("r1"); }));
    QCOMPARE(gather->giveUpOnUndelivered(false), (std::set<std::string>{"r1", "r2", "r4"}));  // named nothing
    QCOMPARE(gather->waitingOn(), std::set<std::string>{"r3"});
    QVERIFY(gather->toRecompute().empty());
    QCOMPARE(gather->giveUpOnUndelivered(true), std::set<std::string>{"r3"});
    QCOMPARE(gather->toRecompute().size(), plan_.size());
  }
  void aChosenOutputThatNeverComesIsAbandonedAtTheLastDeadline() {
    for (const auto& r : {"r1", "r2", "r3"}) reduce(r, 7);
    const std::string shard = plan_[1].id;
    QFile file(dir_.filePath("r1/") + QString::fromStdString(sync::mergedShardFileName(5, shard)));
    QVERIFY(file.open(QIODevice::ReadOnly));
    const ContentId output(QCryptographicHash::hash(file.readAll(), QCryptographicHash::Sha256).toHex().toStdString());
    auto gather = gatherOf("peer");
    swarm("peer").withhold([output](const ContentId& id) { return id == output; });  // MemorySwarm's ids: sha-256
    QVERIFY(passUntil(*gather, "peer", [&] { return !gather->appliedPath(0).empty() && gather->decided(shard); }));
    QVERIFY(gather->appliedPath(1).empty() && gather->toRecompute().empty());
    QCOMPARE(gather->abandonUnarrived(), 1);
    QCOMPARE(gather->toRecompute(), std::vector<std::string>{shard});
  }

  void aMalformedIndexIsRefusedAndItsReducerReplaced() {
    reduce("r1", 7);
    reduce("r2", 7);
    reduce("r4", 7);
    const std::string bad = dir_.filePath("r3-index.json").toStdString();
    QFile f(QString::fromStdString(bad));
    QVERIFY(f.open(QIODevice::WriteOnly) && f.write("{\"format\":\"nonsense\"}") > 0);
    f.close();
    announceIndex("r3", bad);
    auto gather = gatherOf("peer");
    QVERIFY(passUntil(*gather, "peer", [&] { return gather->complete(); }));
    QCOMPARE(gather->refusedReducers().size(), std::size_t(1));
    QVERIFY(gather->refusedReducers().count("r3"));
  }

  // Outputs whose metadata breaks the sizes the input set allows: every reducer that named them
  // is refused and replaced; the shard is decided again on the replacements' outputs.
  void anOutputOfAnotherSizeRefusesItsReducers() {
    for (const auto& r : {"r1", "r2", "r3"}) reduce(r, 7, {}, plan_[0].id);
    auto gather = gatherOf("peer");
    QVERIFY(passUntil(*gather, "peer", [&] { return gather->refusedReducers().size() == 3; }));
    QVERIFY(!gather->complete());
    QCOMPARE(gather->waitingOn(), std::set<std::string>{"r4"});
    QVERIFY(gather->toRecompute().empty());
    reduce("r4", 7);  // the order is used up with it: one reducer of 3 left, so the peer recomputes
    QVERIFY(passUntil(*gather, "peer", [&] { return !gather->toRecompute().empty(); }));
    QCOMPARE(gather->toRecompute(), std::vector<std::string>{plan_[0].id});
    QVERIFY(!gather->complete());
  }

  // What a reducer publishes: every merged file, then the index naming their content ids (each
  // the swarm's id of that file), the index last; a file that cannot be published fails it all.
  void aReducersPublishedOutputsAreItsIndex() {
    const auto indexId = reduce("r1", 7);
    const std::string dir = dir_.filePath("r1").toStdString();
    const auto index = loadReducerIndex(dir + "/" + reducerIndexFileName(5), key("r1"), planIds());
    QVERIFY2(index.ok(), index.ok() ? "" : index.error().c_str());
    QCOMPARE(index->outputs.size(), plan_.size());
    for (std::size_t s = 0; s < plan_.size(); ++s) {
      QCOMPARE(index->outputs[s].shard, plan_[s].id);
      QCOMPARE(index->outputs[s].inputs, kDigest);
      QCOMPARE(index->outputs[s].output,
               swarm("r1").publish(dir + "/" + sync::mergedShardFileName(5, plan_[s].id)).value());
    }
    QCOMPARE(swarm("r1").publish(dir + "/" + reducerIndexFileName(5)).value(), indexId);
    const auto failed = publish("r2", {{plan_[0].id, dir + "/no-such-file"}});
    QVERIFY(!failed.ok() && failed.error().find("publishing our merged shards") != std::string::npos);
  }
};

QTEST_GUILESS_MAIN(OutputGatherTest)
#include "tst_output_gather.moc"
