// Specification of a sharded round's one verdict (core/node/rules/shard_refusals.h, issue 38): no
// refusal → one pass, done once every shard has an output for the set; a sender refused by any
// shard is out of the round and every shard is reduced again without it — but only once every
// shard's first output is in, so all refusals land in one second pass; outputs for another set
// and names outside the set change nothing.
#include "core/node/rules/merged_set.h"
#include "core/node/rules/shard_refusals.h"

#include <QTest>

using namespace es;
using namespace es::node;

namespace {
const std::map<std::string, ContentId> kInputs = {{"a", ContentId(std::string(64, 'a'))},
                                                  {"b", ContentId(std::string(64, 'b'))},
                                                  {"c", ContentId(std::string(64, 'c'))},
                                                  {"d", ContentId(std::string(64, 'd'))}};
const std::vector<std::string> kShards = {"shared-0", "shared-1", "expert-0-0"};
}  // namespace

class ShardRefusalsTest : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void withoutRefusalsOnePassIsTheRound() {
    const std::string all = inputDigest(kInputs, {});
    QCOMPARE(all, mergedSetDigest({kInputs.at("a"), kInputs.at("b"), kInputs.at("c"), kInputs.at("d")}));
    std::map<std::string, AppliedShard> applied = {{"shared-0", {all, {}}}, {"expert-0-0", {all, {}}}};
    auto r = gatherRefusals(kInputs, {}, kShards, applied);
    QCOMPARE(int(r.pass), int(RoundPass::Reducing));
    QCOMPARE(r.waiting, std::vector<std::string>{"shared-1"});
    applied["shared-1"] = {all, {}};
    r = gatherRefusals(kInputs, {}, kShards, applied);
    QCOMPARE(int(r.pass), int(RoundPass::Done));
    QCOMPARE(r.digest, all);
    QVERIFY(r.refused.empty());
  }

  void aSenderRefusedByOneShardIsOutOfEveryShard() {
    const std::string all = inputDigest(kInputs, {});
    std::map<std::string, AppliedShard> applied = {{"shared-0", {all, {"c"}}}, {"shared-1", {all, {}}}};
    // One shard still reducing: wait for its refusals too (one second pass, not one per finding).
    auto r = gatherRefusals(kInputs, {}, kShards, applied);
    QCOMPARE(int(r.pass), int(RoundPass::Reducing));
    applied["expert-0-0"] = {all, {"a"}};
    r = gatherRefusals(kInputs, {}, kShards, applied);
    QCOMPARE(int(r.pass), int(RoundPass::Again));
    QCOMPARE(r.refused, (std::set<std::string>{"a", "c"}));
    const std::string without = inputDigest(kInputs, {"a", "c"});
    QCOMPARE(r.digest, without);
    QCOMPARE(without, mergedSetDigest({kInputs.at("b"), kInputs.at("d")}));
    // The second pass: the first outputs no longer count; its own outputs refuse nobody new.
    r = gatherRefusals(kInputs, r.refused, kShards, applied);
    QCOMPARE(int(r.pass), int(RoundPass::Reducing));
    QCOMPARE(r.waiting, kShards);
    for (const auto& shard : kShards) applied[shard] = {without, {}};
    applied["shared-0"].refused = {"c"};  // named again: already out, nothing new
    r = gatherRefusals(kInputs, {"a", "c"}, kShards, applied);
    QCOMPARE(int(r.pass), int(RoundPass::Done));
    QCOMPARE(r.digest, without);
  }

  void outputsForAnotherSetAndNamesOutsideItChangeNothing() {
    const std::string all = inputDigest(kInputs, {});
    std::map<std::string, AppliedShard> applied;
    for (const auto& shard : kShards) applied[shard] = {all, {}};
    applied["shared-1"] = {"another-set", {"b"}};
    auto r = gatherRefusals(kInputs, {}, kShards, applied);
    QCOMPARE(int(r.pass), int(RoundPass::Reducing));
    QCOMPARE(r.waiting, std::vector<std::string>{"shared-1"});
    applied["shared-1"] = {all, {"stranger"}};
    r = gatherRefusals(kInputs, {}, kShards, applied);
    QCOMPARE(int(r.pass), int(RoundPass::Done));
    QVERIFY(r.refused.empty());
  }
};

QTEST_APPLESS_MAIN(ShardRefusalsTest)
#include "tst_shard_refusals.moc"
