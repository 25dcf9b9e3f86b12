// SPES merge math: shared means, owner experts, replicas, missing owners, order independence, and
// the merging warm-up against the formula computed independently here.
#ifndef Q_MOC_RUN  // moc need not parse LibTorch
#include "core/model/tensor_names.h"
#include "core/sync/merge.h"

#include <torch/torch.h>
#endif

#include <QtTest>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

using namespace es::sync;
using es::model::expertTensorName;

namespace {

at::Tensor vec(std::vector<float> values) { return torch::tensor(values, torch::kFloat); }

const at::Tensor& find(const NamedTensors& tensors, const std::string& name) {
  for (const auto& [n, t] : tensors) {
    if (n == name) return t;
  }
  throw std::runtime_error("no tensor " + name);
}

bool sameBits(const at::Tensor& a, const at::Tensor& b) {
  return a.sizes() == b.sizes() && a.scalar_type() == b.scalar_type() &&
         std::memcmp(a.contiguous().data_ptr(), b.contiguous().data_ptr(), a.numel() * a.element_size()) == 0;
}

const std::string kShared = "norm.weight";
std::string expert(int e) { return expertTensorName(0, e, "w1"); }

// One shared tensor and experts 0..2 of layer 0 (w1 only: aggregate treats every part alike).
NamedTensors smallBase() {
  return {{kShared, vec({1, 2})}, {expert(0), vec({10, 20})}, {expert(1), vec({30, 40})}, {expert(2), vec({50, 60})}};
}

es::model::ModelConfig warmupConfig(int layers) {
  es::model::ModelConfig c;
  c.vocabSize = 8;
  c.dModel = 2;
  c.nLayers = layers;
  c.nHeads = 1;
  c.nExperts = 4;
  c.topK = 1;
  c.expertHidden = 2;
  return c;
}

// Experts of layer 0 with the given flattened w1 ([2, 2] each); w2 = e+1 and w3 = 10(e+1) everywhere.
NamedTensors warmupWeights(const std::vector<std::vector<float>>& w1) {
  NamedTensors w{{kShared, vec({7, 8})}};
  for (int e = 0; e < 4; ++e) {
    w.emplace_back(expertTensorName(0, e, "w1"), vec(w1[e]).reshape({2, 2}));
    w.emplace_back(expertTensorName(0, e, "w2"), torch::full({2, 2}, float(e + 1)));
    w.emplace_back(expertTensorName(0, e, "w3"), torch::full({2, 2}, float(10 * (e + 1))));
  }
  return w;
}

// The warm-up written out element by element in double, independently of the library.
NamedTensors referenceWarmup(const NamedTensors& weights, int layers, int experts, double alpha, int k) {
  NamedTensors out;
  for (const auto& [name, t] : weights) out.emplace_back(name, t.clone());
  auto flat = [&](int l, int e, const char* part) {
    const at::Tensor t = find(weights, expertTensorName(l, e, part)).to(torch::kDouble).contiguous();
    return std::vector<double>(t.data_ptr<double>(), t.data_ptr<double>() + t.numel());
  };
  for (int l = 0; l < layers; ++l) {
    std::vector<std::vector<double>> w1;
    for (int e = 0; e < experts; ++e) w1.push_back(flat(l, e, "w1"));
    auto cosine = [&](int a, int b) {
      const double ab = std::inner_product(w1[a].begin(), w1[a].end(), w1[b].begin(), 0.0);
      const double aa = std::inner_product(w1[a].begin(), w1[a].end(), w1[a].begin(), 0.0);
      const double bb = std::inner_product(w1[b].begin(), w1[b].end(), w1[b].begin(), 0.0);
      return ab / std::sqrt(aa * bb);
    };
    for (int e = 0; e < experts; ++e) {
      std::vector<int> others;
      for (int j = 0; j < experts; ++j)
        if (j != e) others.push_back(j);
      std::sort(others.begin(), others.end(),
                [&](int a, int b) { return cosine(e, a) != cosine(e, b) ? cosine(e, a) > cosine(e, b) : a < b; });
      others.resize(k);
      for (const char* part : {"w1", "w2", "w3"}) {
        const std::vector<double> self = flat(l, e, part);
        std::vector<double> merged(self.size());
        for (std::size_t i = 0; i < self.size(); ++i) {
          double sum = 0;
          for (int d : others) sum += flat(l, d, part)[i] - self[i];
          merged[i] = self[i] + alpha * sum / k;
        }
        for (auto& [name, t] : out) {
          if (name == expertTensorName(l, e, part))
            t = torch::tensor(merged, torch::kDouble).reshape(t.sizes()).to(torch::kFloat);
        }
      }
    }
  }
  return out;
}

}  // namespace

class MergeTest : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void initTestCase() { torch::set_num_threads(1); }

  void sharedTensorIsBasePlusMeanOfAllDeltas() {
    const auto merged = aggregate(
        smallBase(),
        {{"a", {{kShared, vec({0.5f, -1})}}}, {"b", {{kShared, vec({1.5f, 3})}}}, {"c", {{kShared, vec({1, 1})}}}}, {});
    // mean delta = ([0.5, -1] + [1.5, 3] + [1, 1]) / 3 = [1, 1]
    QVERIFY(torch::equal(find(merged, kShared), vec({2, 3})));
  }

  void resultKeepsTheBaseNamesInOrder() {
    const auto base = smallBase();
    const auto merged = aggregate(base, {{"a", {{"not.in.base", vec({1})}}}}, {});
    QCOMPARE(merged.size(), base.size());
    for (std::size_t i = 0; i < base.size(); ++i) QCOMPARE(merged[i].first, base[i].first);
  }

  void eachExpertIsTakenFromItsOwner() {
    const auto merged = aggregate(smallBase(), {{"a", {{expert(0), vec({1, 1})}}}, {"b", {{expert(1), vec({2, -2})}}}},
                                  {{0, {"a"}}, {1, {"b"}}});
    QVERIFY(torch::equal(find(merged, expert(0)), vec({11, 21})));
    QVERIFY(torch::equal(find(merged, expert(1)), vec({32, 38})));
  }

  void replicasOfOneExpertAreAveraged() {
    const auto merged = aggregate(smallBase(), {{"a", {{expert(0), vec({1, 2})}}}, {"b", {{expert(0), vec({3, 6})}}}},
                                  {{0, {"a", "b"}}});
    QVERIFY(torch::equal(find(merged, expert(0)), vec({12, 24})));
  }

  void expertWithoutAnArrivingOwnerIsUnchanged() {
    // Expert 2's owner "c" sent nothing; expert 1 has no owner at all this round.
    const auto merged =
        aggregate(smallBase(), {{"a", {{kShared, vec({1, 1})}, {expert(0), vec({1, 1})}}}}, {{0, {"a"}}, {2, {"c"}}});
    QVERIFY(sameBits(find(merged, expert(1)), vec({30, 40})));
    QVERIFY(sameBits(find(merged, expert(2)), vec({50, 60})));
    QVERIFY(torch::equal(find(merged, expert(0)), vec({11, 21})));
  }

  void expertTensorFromANonOwnerIsIgnoredForThatExpert() {
    // "b" owns expert 1 but also sends expert 0: only "a"'s delta counts for expert 0, while
    // both still count for the shared tensor.
    const auto merged =
        aggregate(smallBase(),
                  {{"a", {{kShared, vec({1, 1})}, {expert(0), vec({1, 1})}}},
                   {"b", {{kShared, vec({3, 3})}, {expert(0), vec({100, 100})}, {expert(1), vec({1, 1})}}}},
                  {{0, {"a"}}, {1, {"b"}}});
    QVERIFY(torch::equal(find(merged, expert(0)), vec({11, 21})));
    QVERIFY(torch::equal(find(merged, expert(1)), vec({31, 41})));
    QVERIFY(torch::equal(find(merged, kShared), vec({3, 4})));
  }

  void arrivalOrderDoesNotChangeASingleBit() {
    torch::manual_seed(3);
    std::vector<Contribution> contributions;
    const std::vector<float> big = {1e20f, 1.0f, -1e20f};  // a sum whose value depends on its order
    for (int i = 0; i < 3; ++i) {
      at::Tensor shared = torch::randn({2}) * 1e-3f;
      shared[0] = big[i];
      contributions.push_back({std::string(1, char('a' + i)),
                               {{kShared, shared}, {expert(0), torch::randn({2})}, {expert(1), torch::randn({2})}}});
    }
    const Ownership owners{{0, {"a", "b", "c"}}, {1, {"b", "c"}}};
    std::vector<int> order = {0, 1, 2};
    const auto reference = aggregate(smallBase(), contributions, owners);
    int permutations = 0;
    do {
      std::vector<Contribution> shuffled;
      for (int i : order) shuffled.push_back(contributions[i]);
      const auto merged = aggregate(smallBase(), shuffled, owners);
      for (std::size_t t = 0; t < merged.size(); ++t) QVERIFY(sameBits(merged[t].second, reference[t].second));
      ++permutations;
    } while (std::next_permutation(order.begin(), order.end()));
    QCOMPARE(permutations, 6);
  }

  void twoContributionsFromOneSenderAreACallerError() {
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, aggregate(smallBase(), {{"a", {}}, {"a", {}}}, {}));
  }

  void warmupBlendsEachExpertTowardsItsMostSimilarExpert() {
    // w1: experts 0 and 1 point along x, 2 and 3 along z; the pairs are orthogonal to each other.
    const auto weights = warmupWeights({{1, 0, 0, 0}, {2, 0.1f, 0, 0}, {0, 0, 1, 0}, {0, 0, 1, 0.2f}});
    const auto out = applyMergingWarmup(weights, warmupConfig(1), 0.5, 1);
    // donors: 0 <-> 1, 2 <-> 3; merged = w + 0.5 (donor - w) for w1, w2 and w3 alike
    QVERIFY(torch::allclose(find(out, expertTensorName(0, 0, "w1")), vec({1.5f, 0.05f, 0, 0}).reshape({2, 2})));
    QVERIFY(torch::allclose(find(out, expertTensorName(0, 1, "w1")), vec({1.5f, 0.05f, 0, 0}).reshape({2, 2})));
    QVERIFY(torch::allclose(find(out, expertTensorName(0, 3, "w1")), vec({0, 0, 1, 0.1f}).reshape({2, 2})));
    const float w2[] = {1.5f, 1.5f, 3.5f, 3.5f}, w3[] = {15, 15, 35, 35};
    for (int e = 0; e < 4; ++e) {
      QVERIFY(torch::equal(find(out, expertTensorName(0, e, "w2")), torch::full({2, 2}, w2[e])));
      QVERIFY(torch::equal(find(out, expertTensorName(0, e, "w3")), torch::full({2, 2}, w3[e])));
    }
    QVERIFY(sameBits(find(out, kShared), vec({7, 8})));
  }

  void warmupEqualsTheFormulaOnRandomWeights() {
    torch::manual_seed(7);
    const auto config = warmupConfig(2);
    NamedTensors weights{{kShared, torch::randn({2})}};
    for (int l = 0; l < 2; ++l)
      for (int e = 0; e < 4; ++e)
        for (const char* part : {"w1", "w2", "w3"})
          weights.emplace_back(expertTensorName(l, e, part), torch::randn({2, 2}));
    const auto out = applyMergingWarmup(weights, config, 0.3, 2);
    const auto expected = referenceWarmup(weights, 2, 4, 0.3, 2);
    QCOMPARE(out.size(), expected.size());
    for (std::size_t i = 0; i < out.size(); ++i) {
      QCOMPARE(out[i].first, expected[i].first);
      QVERIFY2(torch::allclose(out[i].second, expected[i].second, 1e-6, 1e-7), out[i].first.c_str());
    }
  }

  void warmupTopkIsCappedAtTheOtherExperts() {
    const auto weights = warmupWeights({{1, 0, 0, 0}, {2, 0.1f, 0, 0}, {0, 0, 1, 0}, {0, 0, 1, 0.2f}});
    const auto capped = applyMergingWarmup(weights, warmupConfig(1), 0.5, 10);
    // every expert's donors are the 3 others: w2 of e0 = 1 + 0.5 ((2+3+4)/3 - 1) = 2, of e3 = 4 + 0.5 (2 - 4) = 3
    QVERIFY(torch::equal(find(capped, expertTensorName(0, 0, "w2")), torch::full({2, 2}, 2.0f)));
    QVERIFY(torch::equal(find(capped, expertTensorName(0, 3, "w2")), torch::full({2, 2}, 3.0f)));
    const auto three = applyMergingWarmup(weights, warmupConfig(1), 0.5, 3);
    for (std::size_t i = 0; i < capped.size(); ++i) QVERIFY(sameBits(capped[i].second, three[i].second));
  }

  void warmupTiesPickTheLowerIndex() {
    // e0 is orthogonal to all others (cosine 0 each); e1, e2, e3 are identical (cosine 1).
    const auto weights = warmupWeights({{1, 0, 0, 0}, {0, 1, 0, 0}, {0, 1, 0, 0}, {0, 1, 0, 0}});
    const auto out = applyMergingWarmup(weights, warmupConfig(1), 0.5, 1);
    // donors: 0 <- 1, 1 <- 2, 2 <- 1, 3 <- 1; w2 = e+1
    const float w2[] = {1.5f, 2.5f, 2.5f, 3.0f};
    for (int e = 0; e < 4; ++e)
      QVERIFY2(torch::equal(find(out, expertTensorName(0, e, "w2")), torch::full({2, 2}, w2[e])),
               qPrintable(QString::number(e)));
  }

  void warmupWithZeroAlphaChangesNothing() {
    const auto weights = warmupWeights({{1, 0, 0, 0}, {2, 0.1f, 0, 0}, {0, 0, 1, 0}, {0, 0, 1, 0.2f}});
    const auto out = applyMergingWarmup(weights, warmupConfig(1), 0.0, 4);
    for (std::size_t i = 0; i < out.size(); ++i) QVERIFY(sameBits(out[i].second, weights[i].second));
  }

  void alphaFollowsTheScheduleAtIntervalMultiplesOnly() {
    WarmupConfig c;
    c.interval = 50;
    c.alpha0 = 0.5;
    c.decaySteps = 1000;
    QCOMPARE(warmupAlpha(c, 0), 0.5);
    QCOMPARE(warmupAlpha(c, 50), 0.5 * (1 - 50.0 / 1000));
    QCOMPARE(warmupAlpha(c, 500), 0.25);
    QCOMPARE(warmupAlpha(c, 950), 0.5 * (1 - 950.0 / 1000));
    QCOMPARE(warmupAlpha(c, 25), 0.0);
    QCOMPARE(warmupAlpha(c, 51), 0.0);
    QCOMPARE(warmupAlpha(c, 999), 0.0);
    QCOMPARE(warmupAlpha(c, 1000), 0.0);  // decayed to exactly 0
    QCOMPARE(warmupAlpha(c, 1050), 0.0);  // would be negative
    QCOMPARE(warmupAlpha(c, 5000), 0.0);
  }
};

QTEST_APPLESS_MAIN(MergeTest)
#include "tst_merge.moc"
