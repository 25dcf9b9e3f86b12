// Centered clipping of the shared deltas (issue 15 item 4): a reversed update, also one scaled to
// pass validation, cannot turn the shared update around; sender order cannot change a bit;
// experts keep the owners' mean; one and two contributions; no NaN. Each attack test also checks
// that the plain mean IS turned around by the same round, so the test could fail.
// (Beside tst_merge, which is near the 300-line limit.)
#ifndef Q_MOC_RUN  // moc need not parse LibTorch
#include "core/model/tensor_names.h"
#include "core/sync/merge.h"
#include "core/sync/validate.h"

#include <torch/torch.h>
#endif

#include <QtTest>

#include <algorithm>
#include <cstring>

using namespace es::sync;
using es::model::expertTensorName;

namespace {

const std::string kNorm = "norm.weight", kEmbed = "tok_embeddings.weight";
std::string expert(int e) { return expertTensorName(0, e, "w1"); }
const AggregatePolicy kClip{SharedRule::CenteredClip, 3, 1.0};

// Two shared tensors (the distance spans both) and two experts.
NamedTensors base() {
  torch::manual_seed(11);
  return {{kNorm, torch::randn({16})},
          {kEmbed, torch::randn({8, 10})},
          {expert(0), torch::randn({4})},
          {expert(1), torch::randn({4})}};
}

const at::Tensor& find(const NamedTensors& tensors, const std::string& name) {
  for (const auto& [n, t] : tensors)
    if (n == name) return t;
  throw std::runtime_error("no tensor " + name);
}

bool sameBits(const at::Tensor& a, const at::Tensor& b) {
  return a.sizes() == b.sizes() && a.scalar_type() == b.scalar_type() &&
         std::memcmp(a.contiguous().data_ptr(), b.contiguous().data_ptr(), a.numel() * a.element_size()) == 0;
}

// The shared part of (merged − base), flattened into one float64 vector.
at::Tensor sharedUpdate(const NamedTensors& merged, const NamedTensors& b) {
  return torch::cat({(find(merged, kNorm).to(at::kDouble) - find(b, kNorm).to(at::kDouble)).reshape({-1}),
                     (find(merged, kEmbed).to(at::kDouble) - find(b, kEmbed).to(at::kDouble)).reshape({-1})});
}

double cosine(const at::Tensor& a, const at::Tensor& b) {
  return (a * b).sum().item<double>() / (a.norm().item<double>() * b.norm().item<double>());
}

// The honest direction h, per shared tensor.
struct Direction {
  at::Tensor norm, embed;
};
Direction direction() {
  torch::manual_seed(5);
  return {torch::randn({16}) * 0.01f, torch::randn({8, 10}) * 0.01f};
}

// Senders a..d: h + 30 % noise each, expert 0 owned by "a"; "e" sends scale × h and owns expert 1.
// The expert deltas are small, so the global norms are the shared deltas' (the bounds test needs it).
std::vector<Contribution> senders(const Direction& h, float attackScale) {
  std::vector<Contribution> out;
  torch::manual_seed(9);
  for (const char* sender : {"a", "b", "c", "d"}) {
    NamedTensors d{{kNorm, h.norm + torch::randn({16}) * 0.003f}, {kEmbed, h.embed + torch::randn({8, 10}) * 0.003f}};
    if (std::string(sender) == "a") d.emplace_back(expert(0), torch::full({4}, 0.001f));
    out.push_back({sender, std::move(d)});
  }
  out.push_back(
      {"e", {{kNorm, h.norm * attackScale}, {kEmbed, h.embed * attackScale}, {expert(1), torch::full({4}, -0.002f)}}});
  return out;
}
const Ownership kOwners{{0, {"a"}}, {1, {"e"}}};

at::Tensor honestMean(const std::vector<Contribution>& contributions) {
  std::vector<Contribution> honest(contributions.begin(), contributions.begin() + 4);
  return sharedUpdate(aggregate(base(), honest, kOwners), base());
}

// The largest k for which every norm of k × h is ≤ 10 × the round's low median (validate.h).
double largestInsideTheBounds(const Direction& h) {
  const auto honest = senders(h, 1.0f);
  auto kFor = [&](const std::vector<double>& honestNorms, double hNorm) {
    std::vector<double> sorted = honestNorms;
    std::sort(sorted.begin(), sorted.end());
    return 10.0 * sorted[2] / hNorm;  // low median of 5 when the attacker's is the largest
  };
  std::vector<double> whole, norm, embed;
  for (int i = 0; i < 4; ++i) {
    whole.push_back(updateNorm({honest[i].deltas[0], honest[i].deltas[1]}));
    norm.push_back(honest[i].deltas[0].second.norm().item<double>());
    embed.push_back(honest[i].deltas[1].second.norm().item<double>());
  }
  const double hNorm = std::sqrt(h.norm.square().sum().item<double>() + h.embed.square().sum().item<double>());
  return std::min(
      {kFor(whole, hNorm), kFor(norm, h.norm.norm().item<double>()), kFor(embed, h.embed.norm().item<double>())});
}

bool allFinite(const NamedTensors& tensors) {
  for (const auto& [name, t] : tensors)
    if (!torch::isfinite(t).all().item<bool>()) return false;
  return true;
}

}  // namespace

class RobustMergeTest : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void aReversedUpdateCannotTurnTheSharedUpdateAround() {
    const auto contributions = senders(direction(), -10.0f);
    const auto honest = honestMean(contributions);
    const double plain = cosine(sharedUpdate(aggregate(base(), contributions, kOwners), base()), honest);
    const double clipped = cosine(sharedUpdate(aggregate(base(), contributions, kOwners, kClip), base()), honest);
    QVERIFY2(plain < 0.0, qPrintable(QString::number(plain)));  // the attack works on the mean
    QVERIFY2(clipped > 0.9, qPrintable(QString::number(clipped)));
  }

  // Issue 37 item 1: τ is a head-count median, so eight keys sending next to nothing made it
  // next to nothing, and clipping cut the four honest updates down to it: the shared weights stood
  // still. τ's floor (AggregatePolicy::clipTauFloor; mergeRound sets it from the run's ceiling)
  // keeps the honest updates moving them.
  void vanishingSybilsCannotClipTheHonestUpdatesAway() {
    const Direction h = direction();
    auto contributions = senders(h, 1.0f);
    contributions.pop_back();  // four honest senders, a..d
    for (int k = 0; k < 8; ++k)
      contributions.push_back({"s" + std::to_string(k), {{kNorm, h.norm * 1e-6f}, {kEmbed, h.embed * 1e-6f}}});
    const at::Tensor honest = honestMean(senders(h, 1.0f));
    const double honestNorm = honest.norm().item<double>();
    const auto moved = [&](const AggregatePolicy& policy) {
      return sharedUpdate(aggregate(base(), contributions, kOwners, policy), base()).norm().item<double>();
    };
    QVERIFY2(moved(kClip) < 1e-3 * honestNorm, qPrintable(QString::number(moved(kClip) / honestNorm)));
    AggregatePolicy floored = kClip;
    floored.clipTauFloor = honestNorm;  // the scale of an honest update
    // The mean over 12 senders, 4 of them honest and unclipped: a third of the honest mean.
    const double share = moved(floored) / honestNorm;
    QVERIFY2(share > 0.3, qPrintable(QString::number(share)));
    QVERIFY(cosine(sharedUpdate(aggregate(base(), contributions, kOwners, floored), base()), honest) > 0.99);
  }

  void aReversedUpdateJustInsideTheNormBoundsPassesValidationButNotTheClip() {
    const Direction h = direction();
    // Every bound (global and per tensor) is 10 × the low median of the round's norms; the
    // attacker's are the largest, so that is the 3rd smallest honest norm. k × h stays 1 % inside.
    const float k = static_cast<float>(0.99 * largestInsideTheBounds(h));
    const auto contributions = senders(h, -k);
    std::vector<ContributionHeader> headers(5);
    std::vector<NamedTensors> deltas;
    for (const auto& c : contributions) deltas.push_back(c.deltas);
    const auto verdicts = validateRound(headers, deltas, base(), {{0}, {}, {}, {}, {1}}, RoundContext{});
    for (const auto& v : verdicts) QVERIFY2(v.accepted, v.reason.c_str());  // inside every bound
    const auto honest = honestMean(contributions);
    const double plain = cosine(sharedUpdate(aggregate(base(), contributions, kOwners), base()), honest);
    const double clipped = cosine(sharedUpdate(aggregate(base(), contributions, kOwners, kClip), base()), honest);
    QVERIFY2(plain < 0.0, qPrintable(QString::number(plain)));
    QVERIFY2(clipped > 0.9, qPrintable(QString::number(clipped)));
  }

  void withHonestPeersOnlyTheClipStaysCloseToTheMean() {
    auto contributions = senders(direction(), 1.0f);  // "e" is honest here
    const auto mean = sharedUpdate(aggregate(base(), contributions, kOwners), base());
    const auto clipped = sharedUpdate(aggregate(base(), contributions, kOwners, kClip), base());
    QVERIFY2(cosine(mean, clipped) > 0.99, qPrintable(QString::number(cosine(mean, clipped))));
  }

  void senderOrderDoesNotChangeASingleBit() {
    const auto contributions = senders(direction(), -10.0f);
    const auto reference = aggregate(base(), contributions, kOwners, kClip);
    std::vector<int> order = {0, 1, 2, 3, 4};
    int permutations = 0;
    do {
      std::vector<Contribution> shuffled;
      for (int i : order) shuffled.push_back(contributions[i]);
      const auto merged = aggregate(base(), shuffled, kOwners, kClip);
      for (std::size_t t = 0; t < merged.size(); ++t) QVERIFY(sameBits(merged[t].second, reference[t].second));
      ++permutations;
    } while (std::next_permutation(order.begin(), order.end()));
    QCOMPARE(permutations, 120);
  }

  void expertsStillTakeTheOwnersMean() {
    const auto contributions = senders(direction(), -10.0f);
    const auto clipped = aggregate(base(), contributions, kOwners, kClip);
    const auto plain = aggregate(base(), contributions, kOwners);
    for (int e : {0, 1}) QVERIFY(sameBits(find(clipped, expert(e)), find(plain, expert(e))));
    QVERIFY(torch::allclose(find(clipped, expert(1)), find(base(), expert(1)) - 0.002f));  // the owner's delta
  }

  void oneContributionIsTakenAsItIs() {
    const auto contributions = senders(direction(), 1.0f);
    const std::vector<Contribution> one(contributions.begin(), contributions.begin() + 1);
    const auto clipped = aggregate(base(), one, kOwners, kClip);
    const auto plain = aggregate(base(), one, kOwners);
    for (std::size_t t = 0; t < plain.size(); ++t) QVERIFY(sameBits(clipped[t].second, plain[t].second));
  }

  void twoDisagreeingContributionsMoveNoFurtherThanTheNearer() {
    const Direction h = direction();
    const std::vector<Contribution> two{{"a", {{kNorm, h.norm}, {kEmbed, h.embed}}},
                                        {"e", {{kNorm, h.norm * -10.0f}, {kEmbed, h.embed * -10.0f}}}};
    const double hNorm = sharedUpdate(aggregate(base(), {two[0]}, {}), base()).norm().item<double>();
    const double plain = sharedUpdate(aggregate(base(), two, {}), base()).norm().item<double>();
    const double clipped = sharedUpdate(aggregate(base(), two, {}, kClip), base()).norm().item<double>();
    QVERIFY2(plain > 4 * hNorm, qPrintable(QString::number(plain / hNorm)));  // the mean: 4.5 ‖h‖
    QVERIFY2(clipped <= 1.01 * hNorm, qPrintable(QString::number(clipped / hNorm)));
  }

  void noNaNFromZeroOrIdenticalOrHugeDeltas() {
    const NamedTensors zero{{kNorm, torch::zeros({16})}, {kEmbed, torch::zeros({8, 10})}};
    const NamedTensors same{{kNorm, torch::ones({16})}, {kEmbed, torch::ones({8, 10})}};
    const NamedTensors huge{{kNorm, torch::full({16}, 1e30f)}, {kEmbed, torch::full({8, 10}, -1e30f)}};
    for (const auto& deltas : {zero, same, huge}) {
      const auto merged = aggregate(base(), {{"a", deltas}, {"b", deltas}, {"c", zero}}, {}, kClip);
      QVERIFY(allFinite(merged));
    }
    QVERIFY(allFinite(aggregate(base(), {}, {}, kClip)));
    QVERIFY(allFinite(aggregate(base(), {{"a", {}}, {"b", {}}}, {}, kClip)));  // no shared tensor at all
    const auto unchanged = aggregate(base(), {}, {}, kClip);
    for (std::size_t t = 0; t < unchanged.size(); ++t) QVERIFY(sameBits(unchanged[t].second, base()[t].second));
  }

  void ruleNamesParse() {
    QVERIFY(parseSharedRule("mean") == SharedRule::Mean);
    QVERIFY(parseSharedRule("centered_clip") == SharedRule::CenteredClip);
    QVERIFY(!parseSharedRule("median").has_value());
    QCOMPARE(sharedRuleName(SharedRule::CenteredClip), std::string("centered_clip"));
  }
};

QTEST_APPLESS_MAIN(RobustMergeTest)
#include "tst_robust_merge.moc"
