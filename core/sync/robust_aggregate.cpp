#include "core/sync/robust_aggregate.h"

#include "core/sync/sum_of_squares.h"
#include "core/sync/weighted_median.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <unordered_map>

namespace es::sync {
namespace {

using ckpt::NamedTensors;

// x − v in float64, on the CPU (v lives there).
at::Tensor diff(const at::Tensor& x, const at::Tensor& v) { return x.detach().to(at::kCPU, at::kDouble) - v; }

// Which shared tensors a contribution carries, as (slot, delta) in name order: the order the
// distance adds their sums of squares in, so it does not depend on the file's tensor order.
class Carried {
 public:
  explicit Carried(const std::vector<SharedTensor>& tensors) : tensors_(tensors) {
    std::vector<std::size_t> byName(tensors.size());
    std::iota(byName.begin(), byName.end(), std::size_t{0});
    std::stable_sort(byName.begin(), byName.end(),
                     [&](std::size_t a, std::size_t b) { return tensors[a].name < tensors[b].name; });
    rank_.resize(tensors.size());
    for (std::size_t r = 0; r < byName.size(); ++r) rank_[byName[r]] = r;
    for (std::size_t t = 0; t < tensors.size(); ++t) slot_.emplace(tensors[t].name, t);
  }

  std::vector<std::pair<std::size_t, const at::Tensor*>> of(const NamedTensors& deltas) const {
    std::vector<std::pair<std::size_t, const at::Tensor*>> out;
    std::vector<bool> seen(tensors_.size(), false);
    for (const auto& [name, delta] : deltas) {
      const auto it = slot_.find(name);
      if (it == slot_.end() || seen[it->second]) continue;  // not shared, or a repeat: the first counts
      seen[it->second] = true;
      if (delta.sizes() != tensors_[it->second].base->sizes())
        throw std::invalid_argument("aggregate: delta shape differs from its base tensor");
      out.emplace_back(it->second, &delta);
    }
    std::sort(out.begin(), out.end(), [&](const auto& a, const auto& b) { return rank_[a.first] < rank_[b.first]; });
    return out;
  }

 private:
  const std::vector<SharedTensor>& tensors_;
  std::unordered_map<std::string, std::size_t> slot_;
  std::vector<std::size_t> rank_;
};

// Where each clipped tensor's elements go: one group (today's rule: one distance over all shared
// tensors), or the shards of AggregatePolicy::clipShardElements, each clipped on its own. A piece
// is a range of rows, so of elements in the tensor's row-major order.
struct Piece {
  std::int64_t begin = 0, end = 0;  // elements
  std::size_t group = 0;
};

class ClipGroups {
 public:
  // One group of every tensor whole.
  explicit ClipGroups(const std::vector<SharedTensor>& tensors) : bySlot_(tensors.size()), elements_(1, 0.0) {
    for (std::size_t t = 0; t < tensors.size(); ++t) {
      bySlot_[t].push_back({0, tensors[t].base->numel(), 0});
      elements_[0] += double(tensors[t].base->numel());
    }
  }
  // One group per shard; every element of every tensor in exactly one (else invalid_argument).
  ClipGroups(const std::vector<SharedTensor>& tensors, const std::vector<Shard>& shards)
      : bySlot_(tensors.size()), elements_(shards.size(), 0.0) {
    std::unordered_map<std::string, std::size_t> slot;
    for (std::size_t t = 0; t < tensors.size(); ++t) slot.emplace(tensors[t].name, t);
    for (std::size_t g = 0; g < shards.size(); ++g)
      for (const auto& p : shards[g].pieces) {
        const auto it = slot.find(p.tensor);
        if (it == slot.end()) throw std::invalid_argument("centered clipping: a shard names an unknown tensor");
        bySlot_[it->second].push_back({p.rowBegin * p.columns, p.rowEnd * p.columns, g});
        elements_[g] += double(p.elements());
      }
    for (std::size_t t = 0; t < tensors.size(); ++t) {
      auto& pieces = bySlot_[t];
      std::sort(pieces.begin(), pieces.end(), [](const Piece& a, const Piece& b) { return a.begin < b.begin; });
      std::int64_t next = 0;
      for (const auto& p : pieces) next = p.begin == next && p.end > p.begin ? p.end : -1;
      if (next != tensors[t].base->numel())
        throw std::invalid_argument("centered clipping: the shards do not cover " + tensors[t].name + " once");
    }
  }
  std::size_t count() const { return elements_.size(); }
  const std::vector<Piece>& of(std::size_t slot) const { return bySlot_[slot]; }
  // τ's floor scales with the root of a group's size, as the update ceiling's norm does.
  double floorShare(std::size_t g, double total) const { return std::sqrt(elements_[g] / total); }
  double total() const { return std::accumulate(elements_.begin(), elements_.end(), 0.0); }

 private:
  std::vector<std::vector<Piece>> bySlot_;  // each tensor's pieces, in element order
  std::vector<double> elements_;            // per group
};

at::Tensor elementsOf(const at::Tensor& t, const Piece& p) { return t.view(-1).narrow(0, p.begin, p.end - p.begin); }

// ‖x_i − v‖ per group over the shared tensors of each contribution (−1: it carries none of the
// group). Within a group the squares add in name order, then element order: a group's sum is the
// same whether the other groups are computed beside it or not (a reducer of one shard).
using GroupDistances = std::vector<std::vector<double>>;  // [sender][group]
Expected<GroupDistances> distances(const Carried& carried, const ClipGroups& groups,
                                   const std::vector<SenderDeltas>& senders, const std::vector<at::Tensor>& v) {
  GroupDistances out(senders.size(), std::vector<double>(groups.count(), -1.0));
  auto pass = forEachSender(senders, [&](std::size_t i, const NamedTensors& deltas) {
    std::vector<double> squares(groups.count(), -1.0);
    for (const auto& [t, delta] : carried.of(deltas)) {
      const at::Tensor d = diff(*delta, v[t]).contiguous();
      for (const auto& piece : groups.of(t))
        squares[piece.group] = std::max(squares[piece.group], 0.0) + sumOfSquares(elementsOf(d, piece));
    }
    for (std::size_t g = 0; g < squares.size(); ++g)
      if (squares[g] >= 0.0) out[i][g] = std::sqrt(squares[g]);
  });
  if (!pass) return makeError(pass.error());
  return out;
}

// v_t ← v_t + (1/W_t) Σ_i w_i · scale_{i,g} · (x_{i,t} − v_t), the sum in sender order, W_t the
// weight of the contributions carrying t (with every w_i = 1: n_t and the unweighted sum), g the
// group of each element.
Status moveCenter(const Carried& carried, const ClipGroups& groups, const std::vector<SenderDeltas>& senders,
                  const GroupDistances& scale, std::vector<at::Tensor>& v) {
  std::vector<at::Tensor> sum(v.size());
  std::vector<double> weight(v.size(), 0.0);
  auto pass = forEachSender(senders, [&](std::size_t i, const NamedTensors& deltas) {
    const double w = senders[i].weight;
    for (const auto& [t, delta] : carried.of(deltas)) {
      const auto& pieces = groups.of(t);
      at::Tensor term = diff(*delta, v[t]);
      if (pieces.size() == 1) {
        term = term * scale[i][pieces[0].group];
      } else {  // element for element the same product as above
        term = term.contiguous();
        for (const auto& piece : pieces) elementsOf(term, piece).mul_(scale[i][piece.group]);
      }
      if (w != 1.0) term = term * w;  // ×1 is exact: skipped
      sum[t] = sum[t].defined() ? sum[t] + term : term;
      weight[t] += w;
    }
  });
  if (!pass) return pass;
  for (std::size_t t = 0; t < v.size(); ++t)
    if (weight[t] > 0.0) v[t] = v[t] + sum[t] / weight[t];
  return {};
}

// Each sender's factor per group: min(1, τ_g / d), τ_g from the group's weighted low median.
GroupDistances clipScales(const GroupDistances& d, const std::vector<SenderDeltas>& senders, const ClipGroups& groups,
                          double tauFactor, double tauFloor) {
  GroupDistances scale(senders.size(), std::vector<double>(groups.count(), 1.0));
  const double total = groups.total();
  for (std::size_t g = 0; g < groups.count(); ++g) {
    std::vector<std::pair<double, double>> present;  // (distance, weight)
    for (std::size_t i = 0; i < senders.size(); ++i)
      if (d[i][g] >= 0.0) present.emplace_back(d[i][g], senders[i].weight);
    if (present.empty()) continue;  // no contribution carries this group: its v stays
    const double floor = groups.count() == 1 ? tauFloor : tauFloor * groups.floorShare(g, total);
    const double tau = std::max(tauFactor * weightedLowMedian(std::move(present)), floor);
    for (std::size_t i = 0; i < senders.size(); ++i)
      if (d[i][g] > tau) scale[i][g] = tau / d[i][g];  // d > tau >= 0, so d > 0
  }
  return scale;
}

}  // namespace

Expected<std::vector<at::Tensor>> centeredClip(const std::vector<SharedTensor>& tensors,
                                               const std::vector<SenderDeltas>& senders, int iterations,
                                               double tauFactor, double tauFloor, const std::vector<Shard>& shards) {
  if (iterations < 1 || !(tauFactor > 0.0) || !std::isfinite(tauFactor) || !(tauFloor >= 0.0) ||
      !std::isfinite(tauFloor))
    throw std::invalid_argument("centered clipping: iterations must be >= 1, the tau factor > 0, its floor >= 0");
  std::vector<at::Tensor> v;
  for (const auto& t : tensors) v.push_back(torch::zeros(t.base->sizes(), torch::dtype(torch::kDouble)));
  const Carried carried(tensors);
  const ClipGroups groups = shards.empty() ? ClipGroups(tensors) : ClipGroups(tensors, shards);
  for (int round = 0; round < iterations; ++round) {
    auto d = distances(carried, groups, senders, v);
    if (!d) return makeError(d.error());
    const auto scale = clipScales(*d, senders, groups, tauFactor, tauFloor);
    if (auto moved = moveCenter(carried, groups, senders, scale, v); !moved) return makeError(moved.error());
  }
  return v;
}

}  // namespace es::sync
