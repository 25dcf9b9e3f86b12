// The work ledger (core/sync/work_ledger.h, swarm_state.h; issue 37): who the swarm merged and how
// often, carried in the merged state, and the merge's means weighted by it — so keys without
// merged work cannot dilute or turn the shared update by their number. The ledger's rules and
// strict reader, its tensor form, and mergeRound with and without it on the attack that
// bench/sybil_cost measured (noise just over the no-work floor, and a reversed update, from more
// keys than honest peers); a round is credited only to work that agrees with the merge.
#ifndef Q_MOC_RUN  // moc need not parse LibTorch
#include "core/model/tensor_names.h"
#include "core/sync/expert_bound.h"
#include "core/sync/fetch_size.h"
#include "core/sync/round_merge.h"
#include "core/sync/swarm_state.h"
#include "core/sync/work_ledger.h"

#include <torch/torch.h>
#endif

#include <QtTest>

#include <cstring>
#include <set>
#include <string>
#include <vector>

using namespace es::sync;

namespace {

const std::string kRun = "run-1";
const std::string kShared = "norm.weight";
constexpr std::int64_t kRound = 12;
constexpr int kWidth = 64;

NamedTensors base() { return {{kShared, torch::zeros({kWidth}, torch::kFloat)}}; }
RoundContext context() { return {kRun, kRound, stateFingerprint(base())}; }

RoundEntry entry(const std::string& sender, const at::Tensor& delta) {
  return {{kRun, kRound, sender, context().baseHash, "f32"}, heldDeltas({{kShared, delta}}), {}};
}

// The ledger after `rounds` rounds in which every one of `senders` was merged.
WorkLedger workedFor(const std::vector<std::string>& senders, std::int64_t rounds) {
  WorkLedger ledger;
  for (std::int64_t r = 1; r <= rounds; ++r) ledger = ledger.after(r, senders);
  return ledger;
}

// H honest senders along one direction (plus their own noise), k keys sending `attack`.
std::vector<RoundEntry> honestAndKeys(int honest, int keys, const at::Tensor& direction, const at::Tensor& attack,
                                      std::vector<std::string>& honestIds) {
  std::vector<RoundEntry> entries;
  torch::manual_seed(7);
  for (int h = 0; h < honest; ++h) {
    honestIds.push_back("honest-" + std::to_string(h));
    entries.push_back(entry(honestIds.back(), direction + 0.3 * torch::randn({kWidth})));
  }
  for (int k = 0; k < keys; ++k)
    entries.push_back(entry("key-" + std::to_string(k), attack + 0.01 * torch::randn({kWidth})));
  return entries;
}

// How far the merged shared update goes along `direction`, as a fraction of the direction.
double along(const RoundMerge& merge, const at::Tensor& direction) {
  const at::Tensor update = merge.merged.front().second.to(torch::kDouble);
  const at::Tensor d = direction.to(torch::kDouble);
  return (update * d).sum().item<double>() / (d * d).sum().item<double>();
}

}  // namespace

class WorkLedgerTest : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void weightGrowsWithMergedRoundsUpToTheCap() {
    const auto ledger = workedFor({"a"}, WorkLedger::kWeightCap + 10);
    QCOMPARE(ledger.mergedRounds("a"), WorkLedger::kWeightCap + 10);
    QCOMPARE(ledger.weightOf("a"), double(WorkLedger::kWeightCap));
    QCOMPARE(ledger.weightOf("fresh"), 0.0);
    QCOMPARE(workedFor({"a"}, 3).weightOf("a"), 3.0);
  }

  void aRoundCountsOnceAndOnlyForTheAccepted() {
    auto ledger = WorkLedger{}.after(5, {"a", "a", "b"});
    QCOMPARE(ledger.mergedRounds("a"), 1);
    ledger = ledger.after(6, {"b"});
    QCOMPARE(ledger.mergedRounds("a"), 1);
    QCOMPARE(ledger.mergedRounds("b"), 2);
    QCOMPARE(ledger.entries().at("b").lastRound, 6);
  }

  void longAbsentSendersAreForgotten() {
    auto ledger = WorkLedger{}.after(1, {"gone", "here"});
    for (std::int64_t r = 2; r <= WorkLedger::kForgetRounds; ++r) ledger = ledger.after(r, {"here"});
    QCOMPARE(ledger.mergedRounds("gone"), 1);  // absent kForgetRounds − 1 rounds: still there
    ledger = ledger.after(WorkLedger::kForgetRounds + 1, {"here"});
    QCOMPARE(ledger.mergedRounds("gone"), 0);
    QCOMPARE(ledger.size(), std::size_t{1});
  }

  void aFullLedgerDropsTheLeastMergedFirst() {
    auto ledger = workedFor({"veteran"}, 3);
    std::vector<std::string> fresh;
    for (std::size_t i = 0; i < WorkLedger::kMaxEntries + 5; ++i) fresh.push_back("key-" + std::to_string(i));
    ledger = ledger.after(4, fresh);
    QCOMPARE(ledger.size(), WorkLedger::kMaxEntries);
    QCOMPARE(ledger.mergedRounds("veteran"), 3);
    // Equal standing: the lower ids stay (a total order, the same on every peer).
    QCOMPARE(ledger.mergedRounds("key-0"), 1);
  }

  void encodesCanonicallyAndReadsBack() {
    const auto ledger = workedFor({"b", "a"}, 3).after(4, {"c"});
    const auto text = ledger.encode();
    QCOMPARE(QString::fromStdString(text), QStringLiteral("expertswarm-work-ledger 1\na 3 3\nb 3 3\nc 1 4\n"));
    auto back = WorkLedger::decode(text, 4);
    QVERIFY2(back.ok(), back.ok() ? "" : back.error().c_str());
    QVERIFY(*back == ledger);
  }

  void theReaderRefusesAnythingButTheCanonicalForm_data() {
    QTest::addColumn<QString>("text");
    const QString h = QStringLiteral("expertswarm-work-ledger 1\n");
    QTest::newRow("no header") << QStringLiteral("a 1 1\n");
    QTest::newRow("no final newline") << h + QStringLiteral("a 1 1");
    QTest::newRow("unsorted") << h + QStringLiteral("b 1 1\na 1 1\n");
    QTest::newRow("repeated") << h + QStringLiteral("a 1 1\na 1 1\n");
    QTest::newRow("more merged than rounds") << h + QStringLiteral("a 3 2\n");
    QTest::newRow("a later round than the state") << h + QStringLiteral("a 1 9\n");
    QTest::newRow("zero merged") << h + QStringLiteral("a 0 1\n");
    QTest::newRow("leading zero") << h + QStringLiteral("a 01 1\n");
    QTest::newRow("negative") << h + QStringLiteral("a -1 1\n");
    QTest::newRow("extra field") << h + QStringLiteral("a 1 1 1\n");
    QTest::newRow("double space") << h + QStringLiteral("a  1 1\n");
    QTest::newRow("bad id") << h + QStringLiteral("a/b 1 1\n");
    QTest::newRow("long id") << h + QString(65, QLatin1Char('a')) + QStringLiteral(" 1 1\n");
    QTest::newRow("empty line") << h + QStringLiteral("\n");
  }
  void theReaderRefusesAnythingButTheCanonicalForm() {
    QFETCH(QString, text);
    QVERIFY(!WorkLedger::decode(text.toStdString(), 5).ok());
  }

  void theLargestLedgerIsWhatTheSnapshotBoundAllows() {
    std::vector<std::string> ids;
    for (std::size_t i = 0; i < WorkLedger::kMaxEntries; ++i) {
      std::string id = std::to_string(i);
      ids.push_back(std::string(WorkLedger::kMaxSenderChars - id.size(), 'f') + id);
    }
    WorkLedger ledger;
    for (std::int64_t r = 1; r <= 100; ++r) ledger = ledger.after(r, ids);  // 3-digit counts at round 100
    QCOMPARE(std::int64_t(ledger.encode().size()), WorkLedger::maxEncodedBytes(100));
  }

  void theLedgerTravelsInTheStateAndItsFingerprint() {
    const auto ledger = workedFor({"a"}, 2);
    const auto state = withState(base(), {}, ledger);
    QCOMPARE(state.size(), base().size() + 1);
    QVERIFY(swarmFingerprint(base(), {}, ledger) != swarmFingerprint(base(), {}, workedFor({"a"}, 1)));
    QCOMPARE(swarmFingerprint(base(), {}, {}), stateFingerprint(base()));  // empty: the plain state
    es::ckpt::SafetensorsFile file{state, {}};
    auto back = ledgerIn(file, 2);
    QVERIFY(back.ok());
    QVERIFY(*back == ledger);
    QVERIFY(!ledgerIn(file, 1).ok());  // it names round 2: not a state of round 1
  }

  void theSnapshotSizeBoundCoversTheLedger() {
    es::model::ModelConfig config;
    const auto bare = snapshotBytes(config, "r", 7);
    const auto most = snapshotBytes(config, "r", 7, {}, WorkLedger::maxEncodedBytes(7));
    QVERIFY(most > bare + WorkLedger::maxEncodedBytes(7) - 1);
  }

  void mergingAddsARoundForTheAcceptedAndFingerprintsIt() {
    const auto start = workedFor({"a"}, 2);
    auto merge = mergeRound(base(), context(),
                            {entry("a", torch::full({kWidth}, 0.1f)), entry("b", torch::full({kWidth}, 0.1f))}, {}, 30,
                            {}, {}, start);
    QVERIFY(merge.ok());
    QCOMPARE(merge->ledger.mergedRounds("a"), 3);
    QCOMPARE(merge->ledger.mergedRounds("b"), 1);
    QCOMPARE(merge->fingerprint, swarmFingerprint(merge->merged, {}, merge->ledger));
  }

  // Weighted means: a sender of r merged rounds counts r times; a fresh key not at all beside it,
  // once where nobody has merged work (the run's first round).
  void theMeanWeighsSendersByMergedRounds() {
    const auto ab = workedFor({"a", "b"}, 3).after(4, {"a"});  // a weighs 4, b 3, c nothing
    auto merge = mergeRound(base(), context(),
                            {entry("a", torch::full({kWidth}, 1.0f)), entry("b", torch::zeros({kWidth})),
                             entry("c", torch::full({kWidth}, 2.0f))},
                            {}, 30, {}, {}, ab);
    QVERIFY(merge.ok());
    QCOMPARE(merge->merged.front().second[0].item<float>(), float(4.0 / 7.0));
    QCOMPARE(merge->ledger.mergedRounds("c"), 1);  // merged (not refused): it weighs 1 next round
    auto first = mergeRound(base(), context(),
                            {entry("a", torch::full({kWidth}, 1.0f)), entry("c", torch::zeros({kWidth}))}, {}, 30, {});
    QVERIFY(first.ok());
    QCOMPARE(first->merged.front().second[0].item<float>(), 0.5f);
  }

  // Peers that all worked every round merge as head count did, to the bit here: the weights' own
  // rounding (3·x is not exact) stays in the float64 sums, far under the float32 result's last bit
  // (it may flip one now and then; what the swarm needs is that every peer computes the same).
  void equalStandingIsHeadCountBitForBit() {
    for (const auto rule : {SharedRule::Mean, SharedRule::CenteredClip}) {
      RoundPolicy policy;
      policy.aggregate.shared = rule;
      auto entries = [] {
        torch::manual_seed(3);
        std::vector<RoundEntry> out;
        for (const char* id : {"a", "b", "c", "d", "e"}) out.push_back(entry(id, torch::randn({kWidth}) * 0.1));
        return out;
      };
      auto plain = mergeRound(base(), context(), entries(), policy, 30, {});
      auto weighted =
          mergeRound(base(), context(), entries(), policy, 30, {}, {}, workedFor({"a", "b", "c", "d", "e"}, 3));
      QVERIFY(plain.ok() && weighted.ok());
      const auto& x = plain->merged.front().second;
      const auto& y = weighted->merged.front().second;
      QVERIFY(std::memcmp(x.data_ptr(), y.data_ptr(), x.numel() * x.element_size()) == 0);
    }
  }

  // An expert only a newcomer owns is its owner's, weight or not; one a veteran owns too is the
  // veteran's until the newcomer has merged work.
  void anExpertIsWeighedAmongItsOwners() {
    const std::string e0 = es::model::expertTensorName(0, 0, "w1"), e1 = es::model::expertTensorName(0, 1, "w1");
    NamedTensors experts{{kShared, torch::zeros({kWidth})}, {e0, torch::zeros({4})}, {e1, torch::zeros({4})}};
    const RoundContext ctx{kRun, kRound, stateFingerprint(experts)};
    auto make = [&](const std::string& sender, std::set<int> claims, float v) {
      NamedTensors d{{kShared, torch::zeros({kWidth})}};
      for (int e : claims) d.emplace_back(e == 0 ? e0 : e1, torch::full({4}, v));
      return RoundEntry{{kRun, kRound, sender, ctx.baseHash, "f32"}, heldDeltas(d), claims};
    };
    auto merge = mergeRound(experts, ctx, {make("veteran", {0}, 1.0f), make("newcomer", {0, 1}, 3.0f)}, {}, 30, {}, {},
                            workedFor({"veteran"}, 5));
    QVERIFY(merge.ok());
    QCOMPARE(merge->merged[1].second[0].item<float>(), 1.0f);  // expert 0: the veteran's
    QCOMPARE(merge->merged[2].second[0].item<float>(), 3.0f);  // expert 1: the newcomer's alone
  }

  // Issue 37 item 4: a sole owner's expert is held to kExpertRmsFactor × the round's expert moves
  // of senders with merged work — not to itself, and not to what fresh keys claim to have moved.
  void aSoleOwnersExpertIsCutToTheRoundsScale() {
    NamedTensors state{{kShared, torch::zeros({kWidth})}};
    for (int e = 0; e < 4; ++e) state.emplace_back(es::model::expertTensorName(0, e, "w1"), torch::zeros({16}));
    const RoundContext ctx{kRun, kRound, stateFingerprint(state)};
    auto make = [&](const std::string& sender, int expert, float move) {
      NamedTensors d{{kShared, torch::full({kWidth}, 0.01f)},
                     {es::model::expertTensorName(0, expert, "w1"), torch::full({16}, move)}};
      return RoundEntry{{kRun, kRound, sender, ctx.baseHash, "f32"}, heldDeltas(d), {expert}};
    };
    RoundPolicy policy;
    policy.validation.ceiling = {0.1, 5.84, 0.0};  // 0.59 a weight
    const auto veterans = workedFor({"honest-0", "honest-1", "owner"}, 4);
    auto merge =
        mergeRound(state, ctx, {make("honest-0", 0, 0.01f), make("honest-1", 1, 0.01f), make("owner", 3, 0.5f)}, policy,
                   30, {}, {}, veterans);
    QVERIFY(merge.ok());
    QCOMPARE(int(merge->accepted.size()), 3);  // cut, not refused
    QCOMPARE(merge->merged[4].second[0].item<float>(), float(kExpertRmsFactor * 0.01));
    QCOMPARE(merge->merged[1].second[0].item<float>(), 0.01f);  // honest experts untouched
    // Eight fresh keys claiming tiny moves of their own experts do not shrink the reference.
    std::vector<RoundEntry> crowded{make("honest-0", 0, 0.01f), make("honest-1", 1, 0.01f)};
    for (int k = 0; k < 8; ++k) crowded.push_back(make("key-" + std::to_string(k), 2, 1e-6f));
    auto withKeys = mergeRound(state, ctx, std::move(crowded), policy, 30, {}, {}, veterans);
    QVERIFY(withKeys.ok());
    QCOMPARE(withKeys->merged[1].second[0].item<float>(), 0.01f);
    // A veteran claiming three experts, all far out, has no more say over the reference than one
    // claiming one: two honest peers of equal standing still set it.
    auto many = [&](const std::string& sender, float move) {
      NamedTensors d{{kShared, torch::full({kWidth}, 0.01f)}};
      for (int e : {1, 2, 3}) d.emplace_back(es::model::expertTensorName(0, e, "w1"), torch::full({16}, move));
      return RoundEntry{{kRun, kRound, sender, ctx.baseHash, "f32"}, heldDeltas(d), {1, 2, 3}};
    };
    auto greedy = mergeRound(state, ctx, {make("honest-0", 0, 0.01f), make("honest-1", 0, 0.01f), many("owner", 0.5f)},
                             policy, 30, {}, {}, veterans);
    QVERIFY(greedy.ok());
    QCOMPARE(greedy->expertCuts.size(), std::size_t{3});
    // Nobody with merged work: no reference; the ceiling alone holds (the run's first round).
    auto first = mergeRound(state, ctx, {make("honest-0", 0, 0.01f), make("owner", 3, 0.5f)}, policy, 30, {});
    QVERIFY(first.ok());
    QCOMPARE(first->merged[4].second[0].item<float>(), 0.5f);
  }

  // bench/sybil_cost's attacks, at the unit: 11 keys sending noise, 5 sending the honest update
  // reversed, against 3 honest peers. Under head count (no ledger) they freeze and turn the round;
  // when the honest peers have merged work for 8 rounds, the same keys do neither.
  void keysWithoutMergedWorkNeitherFreezeNorTurnTheRound_data() {
    QTest::addColumn<int>("keys");
    QTest::addColumn<double>("attackScale");  // the keys' update, × the honest direction (noise: 0)
    QTest::newRow("11 noise keys") << 11 << 0.0;
    QTest::newRow("5 reversed keys") << 5 << -1.0;
  }
  void keysWithoutMergedWorkNeitherFreezeNorTurnTheRound() {
    QFETCH(int, keys);
    QFETCH(double, attackScale);
    const at::Tensor direction = torch::full({kWidth}, 1.0f);
    const at::Tensor attack = attackScale == 0.0 ? torch::randn({kWidth}) * 0.3 : direction * attackScale;
    RoundPolicy policy;
    policy.aggregate.shared = SharedRule::CenteredClip;
    std::vector<std::string> honestIds;
    auto headCount =
        mergeRound(base(), context(), honestAndKeys(3, keys, direction, attack, honestIds), policy, 30, {});
    QVERIFY(headCount.ok());
    QVERIFY2(along(*headCount, direction) < 0.5,
             "the attack should work under head count: the test would prove nothing");
    honestIds.clear();
    auto entries = honestAndKeys(3, keys, direction, attack, honestIds);
    auto weighted = mergeRound(base(), context(), std::move(entries), policy, 30, {}, {}, workedFor(honestIds, 8));
    QVERIFY(weighted.ok());
    QCOMPARE(int(weighted->accepted.size()), 3 + keys);  // nobody refused: they are outweighed
    QVERIFY2(along(*weighted, direction) > 0.7, std::to_string(along(*weighted, direction)).c_str());
  }

  // Merged is not credited (work_credit.h): of contributions all merged, the round goes in the
  // ledger only to those that agree with the merged update — the honest peers and an honest
  // newcomer, not noise over the floor nor a reversed update. 4096 shared weights: the bar is
  // 8 / 64 = 0.125, a noise key's cosine ~N(0, 1/64).
  void workThatDoesNotAgreeWithTheMergeEarnsNothing() {
    const std::string wide = "wide.weight";
    const NamedTensors start{{wide, torch::zeros({4096})}};
    const RoundContext round{kRun, kRound, stateFingerprint(start)};
    auto make = [&](const std::string& sender, const at::Tensor& delta) {
      return RoundEntry{{kRun, kRound, sender, round.baseHash, "f32"}, heldDeltas({{wide, delta}}), {}};
    };
    torch::manual_seed(11);
    const at::Tensor direction = torch::randn({4096});
    std::vector<RoundEntry> entries;
    std::vector<std::string> honest;
    for (int h = 0; h < 3; ++h) {
      honest.push_back("honest-" + std::to_string(h));
      entries.push_back(make(honest.back(), direction + torch::randn({4096})));
    }
    entries.push_back(make("newcomer", direction + torch::randn({4096})));
    entries.push_back(make("noise", torch::randn({4096}) * 1.4));
    entries.push_back(make("reversed", -direction));
    RoundPolicy policy;
    policy.aggregate.shared = SharedRule::CenteredClip;
    auto merge = mergeRound(start, round, std::move(entries), policy, 30, {}, {}, workedFor(honest, 8));
    QVERIFY(merge.ok());
    QCOMPARE(int(merge->accepted.size()), 6);  // all merged
    const std::vector<std::string> credited{"honest-0", "honest-1", "honest-2", "newcomer"};
    QCOMPARE(merge->credited, credited);
    QCOMPARE(merge->ledger.mergedRounds("honest-0"), 9);
    QCOMPARE(merge->ledger.mergedRounds("newcomer"), 1);
    QCOMPARE(merge->ledger.mergedRounds("noise"), 0);
    QCOMPARE(merge->ledger.mergedRounds("reversed"), 0);
    for (const auto& v : merge->verdicts) {
      const std::string why = v.sender + ": " + std::to_string(v.agreement);
      if (v.sender == "noise") QVERIFY2(std::abs(v.agreement) < 0.06, why.c_str());
      if (v.sender == "reversed") QVERIFY2(v.agreement < -0.5, why.c_str());
      if (v.credited) QVERIFY2(v.agreement > 0.5, why.c_str());
    }
  }
};

QTEST_GUILESS_MAIN(WorkLedgerTest)
#include "tst_work_ledger.moc"
