// SpesPeer's side of a sharded round (issue 38; core/spes/spes_peer_sharded.cpp), driven as the node
// will drive it: three tiny peers from one seed train round 1 and write their contributions as
// shard folders with signed figures; the plan's shards are dealt to them as reducers; each peer
// applies every shard's merged file and the three land on one state, bit for bit, that moved. A
// merged file that moves a weight past the ceiling is refused and changes nothing; a second pass without a sender
// (shard_refusals.h) merges the others and says why that one is out.
#include "core/node/rules/shard_refusals.h"
#include "core/spes/spes_peer.h"
#include "core/sync/reduction_bytes.h"
#include "core/sync/shard_plan.h"
#include "support/tiny_node.h"

#include <QTemporaryDir>
#include <QtTest>

#include <memory>

using es::PeerId;
using es::node::ShardedRoundSpec;
using es::node::SpesPeer;

namespace {
const QStringList kNames = {"peer-a", "peer-b", "peer-c"};
const std::vector<std::vector<int>> kExperts = {{0, 1}, {2, 3}, {0, 2}};
}  // namespace

class SpesShardedTest : public QObject {
  Q_OBJECT
  QTemporaryDir dir_;
  std::unique_ptr<es::train::RunData> data_;
  std::vector<std::unique_ptr<SpesPeer>> peers_;
  es::model::ModelConfig model_;
  std::int64_t shardElements_ = 0;

  ShardedRoundSpec spec(const std::set<PeerId>& out) const {
    ShardedRoundSpec s;
    s.round = 1;
    s.shardElements = shardElements_;
    std::map<std::string, es::ContentId> inputs;
    for (int k = 0; k < 3; ++k) {
      const auto name = kNames[k].toStdString();
      s.senders.push_back({PeerId(name), dir_.filePath(kNames[k] + "/contrib").toStdString(),
                           std::set<int>(kExperts[k].begin(), kExperts[k].end())});
      inputs.emplace(name, es::ContentId(std::string(63, '0') + std::to_string(k)));
    }
    s.out = out;
    std::set<std::string> outIds;
    for (const auto& p : out) outIds.insert(p.str());
    s.inputDigest = es::node::inputDigest(inputs, outIds);
    return s;
  }

  // The next round's topology from each peer's agreed state: the three senders now have merged
  // work. Sharding does not pay for the tiny model at three (sync::shardingPays); a run that
  // shards from three, one reducer a shard, gets it, and every peer derives the same plan and
  // orders, the owner first for its expert.
  void checkNextTopology() {
    const std::map<int, std::set<std::string>> owners{{0, {"peer-c"}}};
    QVERIFY(!es::sync::shardingPays(model_, 3, 1, 0));
    QVERIFY(!peers_[0]->nextTopology(owners, {1, 0, 0}).sharded);
    const es::sync::ReductionPolicy policy{1, 0, 3};
    const auto first = peers_[0]->nextTopology(owners, policy);
    QVERIFY2(first.sharded && first.why.find("3 senders with merged work") != std::string::npos, first.why.c_str());
    for (const auto& peer : peers_) {
      const auto t = peer->nextTopology(owners, policy);
      QCOMPARE(t.orders, first.orders);
      QCOMPARE(t.shardElements, first.shardElements);
    }
    for (std::size_t s = 0; s < first.plan.size(); ++s)
      if (first.plan[s].expert == 0) QCOMPARE(first.orders[s].front(), std::string("peer-c"));
    QVERIFY(!peers_[0]->nextTopology(owners, {3, 1, 3}).sharded);  // never with every peer a reducer
  }

  // Every shard reduced by one of the three (shard k by peer k mod 3): the merged files in plan order.
  std::vector<std::string> reduceAll(const ShardedRoundSpec& s, const QString& pass) {
    const auto plan = es::sync::planShards(model_, shardElements_);
    std::vector<std::vector<std::string>> dealt(3);
    for (std::size_t k = 0; k < plan.size(); ++k) dealt[k % 3].push_back(plan[k].id);
    std::map<std::string, std::string> pathOf;
    for (int p = 0; p < 3; ++p) {
      auto reduced = peers_[p]->reduceShards(s, dealt[p], dir_.filePath(kNames[p] + "/" + pass).toStdString());
      if (!reduced) qFatal("reduceShards: %s", reduced.error().c_str());
      for (const auto& r : *reduced) {
        if (!r.refused.empty()) qFatal("shard %s refused a sender", r.shard.c_str());
        pathOf[r.shard] = r.path;
      }
    }
    std::vector<std::string> paths;
    for (const auto& shard : plan) paths.push_back(pathOf.at(shard.id));
    return paths;
  }

 private Q_SLOTS:
  void initTestCase() {
    auto data = es::test::bundledRunData(dir_.filePath("run"));
    QVERIFY2(data.ok(), data ? "" : data.error().c_str());
    data_ = std::make_unique<es::train::RunData>(std::move(*data));
    for (int k = 0; k < 3; ++k) {
      auto config = es::test::tinyNodeConfig(*data_, dir_.path(), kNames[k]).peer;
      config.syncEvery = 2;
      config.trainer.localExperts = kExperts[k];
      config.trainer.dataSeed = 11 + k;
      model_ = config.trainer.model;
      auto peer = SpesPeer::create(config, data_->train, data_->val);
      QVERIFY2(peer.ok(), peer ? "" : peer.error().c_str());
      peers_.push_back(std::move(*peer));
    }
    shardElements_ = es::sync::shardElementsFor(model_, 3);
    QVERIFY(es::sync::planShards(model_, shardElements_).size() > 6);
  }

  void threePeersApplyTheSameMergedShards() {
    const auto initial = peers_[0]->baseFingerprint();
    for (int k = 0; k < 3; ++k) {
      for (int s = 0; s < 2; ++s) peers_[k]->step();
      auto written = peers_[k]->writeShardedContribution(1, spec({}).senders[k].folder, shardElements_);
      QVERIFY2(written.ok(), written ? "" : written.error().c_str());
      QCOMPARE(written->baseHash, initial);
      QVERIFY(written->bytes > 0);
    }
    const auto s = spec({});
    const auto paths = reduceAll(s, "pass-1");

    // A merged file changed on its way (a float's top bytes: a weight moved far past the ceiling;
    // the swarm's merkle check would have caught the bytes first): refused, the state unchanged.
    const QString tampered = dir_.filePath("tampered.safetensors");
    QVERIFY(QFile::copy(QString::fromStdString(paths[0]), tampered));
    {
      QFile f(tampered);
      QVERIFY(f.open(QIODevice::ReadWrite));
      f.seek(f.size() - 3);
      f.write("zzz");
    }
    auto bad = paths;
    bad[0] = tampered.toStdString();
    const auto refused = peers_[0]->applyShards(s, bad);
    QVERIFY(!refused.ok());
    QVERIFY2(refused.error().find("past the ceiling") != std::string::npos, refused.error().c_str());
    QCOMPARE(peers_[0]->baseFingerprint(), initial);

    std::vector<std::string> fingerprints;
    for (auto& peer : peers_) {
      auto merged = peer->applyShards(s, paths);
      QVERIFY2(merged.ok(), merged ? "" : merged.error().c_str());
      QCOMPARE(merged->accepted, 3);
      fingerprints.push_back(merged->fingerprint);
      QCOMPARE(peer->baseFingerprint(), merged->fingerprint);
    }
    QCOMPARE(fingerprints[1], fingerprints[0]);
    QCOMPARE(fingerprints[2], fingerprints[0]);
    QVERIFY(fingerprints[0] != initial);
    checkNextTopology();
  }

  void aPassWithoutARefusedSenderMergesTheOthers() {
    const auto before = peers_[0]->baseFingerprint();
    for (int k = 0; k < 3; ++k) {
      for (int s = 0; s < 2; ++s) peers_[k]->step();
      const QString folder = dir_.filePath(kNames[k] + "/contrib-2");
      auto written = peers_[k]->writeShardedContribution(2, folder.toStdString(), shardElements_);
      QVERIFY2(written.ok(), written ? "" : written.error().c_str());
    }
    ShardedRoundSpec s = spec({PeerId("peer-c")});
    s.round = 2;
    for (int k = 0; k < 3; ++k) s.senders[k].folder = dir_.filePath(kNames[k] + "/contrib-2").toStdString();
    const auto paths = reduceAll(s, "round-2");
    std::vector<std::string> fingerprints;
    for (auto& peer : peers_) {
      auto merged = peer->applyShards(s, paths);
      QVERIFY2(merged.ok(), merged ? "" : merged.error().c_str());
      QCOMPARE(merged->accepted, 2);
      bool named = false;
      for (const auto& v : merged->verdicts)
        named = named || (v.sender.str() == "peer-c" && !v.accepted && v.reason == "refused by a shard's reducers");
      QVERIFY(named);
      fingerprints.push_back(merged->fingerprint);
    }
    QCOMPARE(fingerprints[1], fingerprints[0]);
    QCOMPARE(fingerprints[2], fingerprints[0]);
    QVERIFY(fingerprints[0] != before);
  }
};

QTEST_GUILESS_MAIN(SpesShardedTest)
#include "tst_spes_sharded.moc"
