// Validation of contributions: every rejection case with its reason, the round's median, the
// per-tensor bounds, the update norm, and the base-state fingerprint.
#ifndef Q_MOC_RUN  // moc need not parse LibTorch
#include "core/model/tensor_names.h"
#include "core/sync/validate.h"

#include <torch/torch.h>
#endif

#include <QtTest>

#include <algorithm>
#include <cmath>
#include <limits>

using namespace es::sync;
using es::model::expertTensorName;

namespace {

at::Tensor vec(std::vector<float> values) { return torch::tensor(values, torch::kFloat); }

const std::string kShared = "norm.weight";
std::string expert(int e) { return expertTensorName(0, e, "w1"); }

// A shared [4] tensor and experts 0..2 of layer 0 ([2, 2] each).
NamedTensors base() {
  return {{kShared, torch::ones({4})},
          {expert(0), torch::zeros({2, 2})},
          {expert(1), torch::zeros({2, 2})},
          {expert(2), torch::zeros({2, 2})}};
}

RoundContext context() { return {"run-a", 8, stateFingerprint(base())}; }
ContributionHeader header() { return {"run-a", 8, "peer-a", stateFingerprint(base()), "bf16"}; }

// The honest contribution of a peer claiming expert 0: norm sqrt(4 · 0.01 + 4 · 0.01).
NamedTensors honest(float scale = 1.0f) {
  return {{kShared, torch::full({4}, 0.1f * scale)}, {expert(0), torch::full({2, 2}, 0.1f * scale)}};
}

Verdict check(const NamedTensors& deltas, const ContributionHeader& h = header(), const std::set<int>& claims = {0},
              double median = 0.0, const ValidationPolicy& policy = {}) {
  return validate(h, deltas, base(), claims, context(), median, policy);
}

#define QVERIFY_REJECTED(verdict, text)                                                    \
  do {                                                                                     \
    const Verdict v_ = (verdict);                                                          \
    QVERIFY2(!v_.accepted, "accepted, expected a rejection");                              \
    QVERIFY2(v_.reason.find(text) != std::string::npos, ("reason: " + v_.reason).c_str()); \
  } while (false)

}  // namespace

class ValidateTest : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void initTestCase() { torch::set_num_threads(1); }

  void honestContributionIsAccepted() {
    const Verdict v = check(honest());
    QVERIFY2(v.accepted, v.reason.c_str());
    QVERIFY(v.reason.empty());
  }

  void expertTensorNotClaimedBySenderIsRejected() {
    auto deltas = honest();
    deltas.emplace_back(expert(1), torch::zeros({2, 2}));
    QVERIFY_REJECTED(check(deltas),
                     "tensor \"layers.0.moe.experts.1.w1\" belongs to expert 1, not claimed by the sender");
  }

  void unknownNameIsRejected() {
    auto deltas = honest();
    deltas.emplace_back("layers.0.attn.extra.weight", torch::zeros({4}));
    QVERIFY_REJECTED(check(deltas), "unknown tensor \"layers.0.attn.extra.weight\"");
  }

  void claimedExpertMissingFromTheModelIsRejected() {
    auto deltas = honest();
    deltas.emplace_back(expert(7), torch::zeros({2, 2}));
    QVERIFY_REJECTED(check(deltas, header(), {0, 7}), "unknown tensor \"layers.0.moe.experts.7.w1\"");
  }

  void wrongShapeIsRejected() {
    QVERIFY_REJECTED(check({{kShared, torch::zeros({3})}}), "shape [3] of \"norm.weight\", expected [4]");
    QVERIFY_REJECTED(check({{expert(0), torch::zeros({4, 1})}}),
                     "shape [4, 1] of \"layers.0.moe.experts.0.w1\", expected [2, 2]");
  }

  void wrongDtypeIsRejected() {
    QVERIFY_REJECTED(check({{kShared, torch::zeros({4}, torch::kDouble)}}), "dtype Double of \"norm.weight\"");
    QVERIFY_REJECTED(check({{kShared, torch::zeros({4}, torch::kBFloat16)}}), "dtype BFloat16 of \"norm.weight\"");
  }

  void nanIsRejected() {
    auto deltas = honest();
    deltas[1].second[1][0] = std::numeric_limits<float>::quiet_NaN();
    QVERIFY_REJECTED(check(deltas), "non-finite value in \"layers.0.moe.experts.0.w1\"");
  }

  void infinityIsRejected() {
    auto deltas = honest();
    deltas[0].second[3] = -std::numeric_limits<float>::infinity();
    QVERIFY_REJECTED(check(deltas), "non-finite value in \"norm.weight\"");
  }

  void normAboveTheAbsoluteCapIsRejected() {
    ValidationPolicy policy;
    policy.absoluteNormCap = 1.0;
    // norm of honest(10) = sqrt(8 · 1) ≈ 2.83 > 1; with no median only the cap applies
    QVERIFY_REJECTED(check(honest(10), header(), {0}, 0.0, policy), "norm 2.83 > bound 1 (absolute cap)");
    QVERIFY(check(honest(3), header(), {0}, 0.0, policy).accepted);  // norm ≈ 0.85
  }

  void normAboveTheRelativeBoundIsRejected() {
    // median 0.05, bound 10 × 0.05 = 0.5; honest() has norm ≈ 0.283, honest(2) ≈ 0.566
    QVERIFY(check(honest(), header(), {0}, 0.05).accepted);
    QVERIFY_REJECTED(check(honest(2), header(), {0}, 0.05), "norm 0.566 > bound 0.5");
  }

  void wrongRunIsRejected() {
    auto h = header();
    h.run = "run-b";
    QVERIFY_REJECTED(check(honest(), h), "wrong run: \"run-b\", expected \"run-a\"");
  }

  void wrongRoundIsRejected() {
    auto h = header();
    h.round = 7;
    QVERIFY_REJECTED(check(honest(), h), "wrong round: 7, expected 8");
  }

  void wrongBaseHashIsRejected() {
    auto h = header();
    h.baseHash = "0000000000000000";
    QVERIFY_REJECTED(check(honest(), h), "wrong base hash");
  }

  void headerIsCheckedBeforeTheTensors() {
    auto h = header();
    h.round = 9;
    auto deltas = honest();
    deltas.emplace_back(expert(2), torch::full({2, 2}, std::nanf("")));
    QVERIFY_REJECTED(check(deltas, h), "wrong round: 9, expected 8");
  }

  void outlierTenToTheSixTimesTheOthersIsRejectedInARoundOfFour() {
    const std::vector<ContributionHeader> headers(4, header());
    const std::vector<NamedTensors> deltas = {honest(), honest(1.5f), honest(0.8f), honest(1e6f)};
    const std::vector<std::set<int>> claims(4, {0});
    const auto verdicts = validateRound(headers, deltas, base(), claims, context());
    QCOMPARE(verdicts.size(), std::size_t(4));
    for (int i = 0; i < 3; ++i) QVERIFY2(verdicts[i].accepted, verdicts[i].reason.c_str());
    QVERIFY(!verdicts[3].accepted);
    QVERIFY2(verdicts[3].reason.find("norm") != std::string::npos, verdicts[3].reason.c_str());
  }

  void outlierInARoundOfTwoIsRejected() {
    // The low median of {0.283, 2.83e5} is 0.283, so the outlier cannot raise its own bound.
    const auto verdicts = validateRound({header(), header()}, {honest(), honest(1e6f)}, base(), {{0}, {0}}, context());
    QVERIFY(verdicts[0].accepted);
    QVERIFY(!verdicts[1].accepted);
  }

  void roundMedianIgnoresContributionsRejectedForOtherReasons() {
    // Valid norms {1, 1, 15}·0.283: median 0.283, bound 2.83, so the third is rejected. Counting
    // the two wrong-run contributions (norm 100·0.283 each) would make the median 15·0.283 and
    // accept it.
    auto wrongRun = header();
    wrongRun.run = "run-b";
    const std::vector<ContributionHeader> headers = {header(), header(), header(), wrongRun, wrongRun};
    const std::vector<NamedTensors> deltas = {honest(), honest(), honest(15), honest(100), honest(100)};
    const auto verdicts = validateRound(headers, deltas, base(), std::vector<std::set<int>>(5, {0}), context());
    QVERIFY(verdicts[0].accepted);
    QVERIFY(verdicts[1].accepted);
    QVERIFY_REJECTED(verdicts[2], "norm 4.24 > bound 2.83");
    QVERIFY_REJECTED(verdicts[3], "wrong run");
    QVERIFY_REJECTED(verdicts[4], "wrong run");
  }

  void aBudgetSpentOnOneTensorIsRejectedByItsOwnBound() {
    // Honest norms: 0.2 per tensor, 0.283 in all (bound 2.83). The poisoner's 2.4 in norm.weight
    // alone passes the global bound but is 12 × that tensor's median (bound 2).
    const std::vector<ContributionHeader> headers(4, header());
    const NamedTensors poisoned{{kShared, torch::full({4}, 1.2f)}, {expert(0), torch::zeros({2, 2})}};
    const std::vector<NamedTensors> deltas = {honest(), honest(), honest(), poisoned};
    const auto verdicts = validateRound(headers, deltas, base(), std::vector<std::set<int>>(4, {0}), context());
    for (int i = 0; i < 3; ++i) QVERIFY2(verdicts[i].accepted, verdicts[i].reason.c_str());
    QVERIFY(updateNorm(poisoned) < 10 * updateNorm(honest()));  // inside the global bound
    QVERIFY_REJECTED(verdicts[3], "norm 2.4 of \"norm.weight\" > bound 2 (10 x its median 0.2)");
  }

  void aTensorNobodyChangedHasNoBoundOfItsOwn() {
    // expert 0's median is 0 (two of three leave it at zero): only the global bound and the
    // round's scale at its size (10 × 0.0707 × √4 = 1.41) apply, and 0.02 is far inside both.
    const NamedTensors still{{kShared, torch::full({4}, 0.1f)}, {expert(0), torch::zeros({2, 2})}};
    const NamedTensors moved{{kShared, torch::full({4}, 0.1f)}, {expert(0), torch::full({2, 2}, 0.01f)}};
    const auto verdicts = validateRound(std::vector<ContributionHeader>(3, header()), {still, still, moved}, base(),
                                        std::vector<std::set<int>>(3, {0}), context());
    for (const auto& v : verdicts) QVERIFY2(v.accepted, v.reason.c_str());
  }

  // An expert is carried by its owners only. One whose batches routed (next to) no tokens to it
  // moves it by weight decay alone; its co-owner's ordinary update is not an outlier for that (at
  // afd6a98 such honest updates, 100-500 × the co-owner's, got their senders banned and split the
  // swarm). An expert's bound is at least 10 × the round's update scale at its size; a poisoned
  // expert far above that is still refused, inside the global bound.
  void anExpertIsBoundedByTheRoundsScaleWhenItsCoOwnerBarelyMovedIt() {
    const NamedTensors wide{{"wide.weight", torch::zeros({64})}, {expert(1), torch::zeros({2, 2})}};
    const RoundContext round{"run-a", 8, stateFingerprint(wide)};
    const ContributionHeader h{"run-a", 8, "peer-a", stateFingerprint(wide), "bf16"};
    auto withExpert = [](float perElement) {
      return NamedTensors{{"wide.weight", torch::full({64}, 0.1f)}, {expert(1), torch::full({2, 2}, perElement)}};
    };
    const NamedTensors sharedOnly{{"wide.weight", torch::full({64}, 0.1f)}};
    // Scale: the low median of the contributions' norms per √element (0.097, 0.1, 0.1, and 0.097
    // or 0.49) is 0.1; at expert 1's 4 elements 0.2, so its bound is 2 (its co-owners' low median
    // is 0.002: the ordinary 0.2 was refused by it before).
    auto verdicts = validateRound(std::vector<ContributionHeader>(4, h),
                                  {withExpert(0.001f), withExpert(0.1f), sharedOnly, sharedOnly}, wide,
                                  std::vector<std::set<int>>(4, {1}), round);
    for (const auto& v : verdicts) QVERIFY2(v.accepted, v.reason.c_str());
    verdicts = validateRound(std::vector<ContributionHeader>(4, h),
                             {withExpert(0.001f), withExpert(2.0f), sharedOnly, sharedOnly}, wide,
                             std::vector<std::set<int>>(4, {1}), round);
    QVERIFY(verdicts[0].accepted);
    QVERIFY(updateNorm(withExpert(2.0f)) < 10 * updateNorm(sharedOnly));  // inside the global bound
    QVERIFY_REJECTED(verdicts[1], "norm 4 of \"" + expert(1) + "\" > bound 2 (10 x the round's scale at its size 0.2)");
  }

  // Issue 37 items 1 and 4, with the run's update ceiling (update_ceiling.h) instead of medians.
  // lr sum 0.01 and Adam's bound 5: no weight may move more than 0.05 (+ decay, 0 here: no
  // weight decay), and an RMS under 1e-5 is no work. honest() moves 0.1 per element, so the
  // ceiling here is honest(0.5); its expert weights start at zero.
  static ValidationPolicy withCeiling() {
    ValidationPolicy policy;
    policy.ceiling = {0.01, 5.0, 0.0};
    return policy;
  }
  static std::vector<Verdict> judged(const std::vector<NamedTensors>& deltas, const ValidationPolicy& policy,
                                     std::vector<std::set<int>> claims = {}) {
    if (claims.empty()) claims.assign(deltas.size(), {0});
    std::vector<ContributionCheck> checks;
    for (std::size_t i = 0; i < deltas.size(); ++i)
      checks.push_back(checkContribution(header(), deltas[i], base(), claims[i], context(), policy));
    return judgeRound(checks, policy);
  }

  // Eight fresh keys sending vanishing deltas beside three honest peers: by the round's medians
  // (no ceiling) every honest update is "> 10 x the median" and refused — the honest peers would
  // ban each other. With the ceiling the honest ones pass, whatever the others send, and the
  // vanishing ones are no work (not merged, not banned).
  void vanishingSybilsCannotMakeHonestUpdatesOutliers() {
    std::vector<NamedTensors> deltas = {honest(0.05f), honest(0.05f), honest(0.08f)};
    for (int k = 0; k < 8; ++k) deltas.push_back(honest(1e-10f));
    auto byMedian = judged(deltas, {});
    for (int i = 0; i < 3; ++i) QVERIFY2(!byMedian[i].accepted, "the attack no longer works on the median rule");
    const auto verdicts = judged(deltas, withCeiling());
    for (int i = 0; i < 3; ++i) QVERIFY2(verdicts[i].accepted, verdicts[i].reason.c_str());
    for (int i = 3; i < 11; ++i) {
      QVERIFY(!verdicts[i].accepted && verdicts[i].noWork);
      QVERIFY2(verdicts[i].reason.rfind("no work: RMS", 0) == 0, verdicts[i].reason.c_str());
    }
    // Just over the floor they are accepted (cheap noise cannot be told from work by its size),
    // and still cannot make an honest update an outlier.
    for (int k = 3; k < 11; ++k) deltas[k] = honest(2e-4f);
    for (const auto& v : judged(deltas, withCeiling())) QVERIFY2(v.accepted, v.reason.c_str());
  }

  // All-zero deltas made the median 0 (the relative bound skipped) and were accepted: standing for
  // nothing. Now they are no work.
  void aZeroContributionIsNoWork() {
    const NamedTensors zero{{kShared, torch::zeros({4})}, {expert(0), torch::zeros({2, 2})}};
    QVERIFY(judged({zero, zero, honest()}, {})[0].accepted);  // the old rule took it
    const auto v = judged({zero}, withCeiling())[0];
    QVERIFY(!v.accepted && v.noWork);
    QCOMPARE(v.reason, std::string("no work: RMS 0 < 1e-05 (0.001 x the round's lr sum)"));
  }

  // A sole expert owner was the median of its own expert: 30 x an honest expert update passed.
  // The ceiling does not come from the sender: 30 x is refused; what training could do passes.
  void aSoleOwnerIsHeldToTheCeilingNotToItself() {
    NamedTensors greedy = honest(0.5f);             // 0.05 per shared weight, as the others
    greedy[1].second = torch::full({2, 2}, 0.15f);  // expert 0, its alone: 30 x the others' expert update
    const std::vector<std::set<int>> claims = {{0}, {1}, {1}};
    const NamedTensors other{{kShared, torch::full({4}, 0.05f)}, {expert(1), torch::full({2, 2}, 0.005f)}};
    QVERIFY(judged({greedy, other, other}, {}, claims)[0].accepted);  // the attack, on the median rule
    const auto v = judged({greedy, other, other}, withCeiling(), claims)[0];
    QVERIFY(!v.accepted && !v.noWork);
    QVERIFY2(v.reason.rfind("moves a weight of \"" + expert(0) + "\" by 0.15 > 0.0504", 0) == 0, v.reason.c_str());
    greedy[1].second = torch::full({2, 2}, 0.05f);  // at the ceiling: what AdamW could have done
    QVERIFY(judged({greedy, other, other}, withCeiling(), claims)[0].accepted);
  }

  // Weight decay moves large weights further: the ceiling grows with the tensor's largest |weight|.
  void theCeilingAllowsForWeightDecay() {
    ValidationPolicy policy = withCeiling();
    policy.ceiling.weightDecay = 0.1;  // norm.weight's base is 1: 0.01 x (5 + 0.1 x 1) = 0.051
    const NamedTensors moved{{kShared, torch::full({4}, 0.0508f)}};
    QVERIFY2(judged({moved}, policy, {{}})[0].accepted, "inside 0.051 (+ the bf16 slack)");
    policy.ceiling.weightDecay = 0.0;
    QVERIFY(!judged({moved}, policy, {{}})[0].accepted);  // over 0.05 x (1 + 1/128) = 0.0504
  }

  // Issue 39: a contribution in the sparse run's codec may move a weight its wait rounds' ceiling
  // (its sender's error feedback held that back); the same deltas in any other codec, or in a
  // sparse codec of other wait rounds, stay at one round's.
  void aSparseContributionIsHeldToItsWaitRoundsCeiling() {
    ValidationPolicy policy = withCeiling();
    policy.sparseWaitRounds = 5;              // sparse/128/4096: 128 · 25 <= 4096
    policy.sparseCeiling = {0.05, 5.0, 0.0};  // five rounds' lr sum: 0.25 a weight
    const NamedTensors moved{{kShared, torch::tensor({0.2f, 0.0f, 0.0f, 0.0f})}};
    auto judge = [&](const char* codec) {
      auto h = header();
      h.codec = codec;
      return judgeRound({checkContribution(h, moved, base(), {}, context(), policy)}, policy)[0];
    };
    QVERIFY2(judge("sparse/128/4096").accepted, judge("sparse/128/4096").reason.c_str());
    QVERIFY(!judge("int8").accepted);
    QVERIFY(!judge("sparse/4096/4096").accepted);  // W = 1: a dense file in the sparse format
    policy.sparseWaitRounds = 0;                   // not a sparse run
    QVERIFY(!judge("sparse/128/4096").accepted);
  }

  void updateNormIsTheL2NormOverAllDeltas() {
    QCOMPARE(updateNorm({{"a", vec({3})}, {"b", vec({0, 4})}}), 5.0);
    QCOMPARE(updateNorm({{"a", vec({3, 4})}, {"b", torch::zeros({2, 2})}}), 5.0);
    QCOMPARE(updateNorm({}), 0.0);
  }

  void fingerprintIsStableAndOrderIndependent() {
    const std::string a = stateFingerprint(base());
    QCOMPARE(a.size(), std::size_t(16));
    QCOMPARE(stateFingerprint(base()), a);
    auto reversed = base();
    std::reverse(reversed.begin(), reversed.end());
    QCOMPARE(stateFingerprint(reversed), a);
  }

  void fingerprintChangesWithOneByteNameShapeOrDtype() {
    const std::string original = stateFingerprint(base());
    auto byte = base();
    byte[2].second[1][1] = std::nextafter(0.0f, 1.0f);  // flips one bit of one byte
    QVERIFY(stateFingerprint(byte) != original);
    auto name = base();
    name[0].first = "norm.weighT";
    QVERIFY(stateFingerprint(name) != original);
    auto shape = base();
    shape[1].second = shape[1].second.reshape({4});  // same bytes, other shape
    QVERIFY(stateFingerprint(shape) != original);
    auto dtype = base();
    dtype[1].second = dtype[1].second.view(torch::kInt);  // same bytes, other dtype
    QVERIFY(stateFingerprint(dtype) != original);
  }
};

QTEST_APPLESS_MAIN(ValidateTest)
#include "tst_validate.moc"
