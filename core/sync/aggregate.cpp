// aggregate() and aggregateStream() (merge.h). The arithmetic policy of merge.cpp holds here:
// float64 element-wise ops, contributions added in sender order, one cast back at the end.
#include "core/model/tensor_names.h"
#include "core/sync/merge.h"
#include "core/sync/robust_aggregate.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>
#include <unordered_map>

namespace es::sync {
namespace {

// Sender order, never arrival order. Two contributions of one sender could only be ordered by
// arrival, so they are a caller error (the round keeps one contribution per sender), as is a
// negative or non-finite weight.
std::vector<SenderDeltas> senderOrder(std::vector<SenderDeltas> senders) {
  std::sort(senders.begin(), senders.end(), [](const auto& a, const auto& b) { return a.sender < b.sender; });
  for (std::size_t i = 0; i < senders.size(); ++i) {
    if (!(senders[i].weight >= 0.0) || !std::isfinite(senders[i].weight))
      throw std::invalid_argument("aggregate: sender \"" + senders[i].sender +
                                  "\" has a negative or non-finite weight");
    if (i > 0 && senders[i].sender == senders[i - 1].sender)
      throw std::invalid_argument("aggregate: two contributions from sender \"" + senders[i].sender + "\"");
  }
  return senders;
}

// Whether a group of senders is averaged by head count: when none of them has merged work (a run's
// first round; an expert only newcomers own), there is no work to weigh them by.
bool unitWeights(const std::vector<SenderDeltas>& senders) {
  double total = 0.0;
  for (const auto& s : senders) total += s.weight;
  return total == 0.0;
}

// The shared tensors' senders as centered clipping weighs them: the weighted ones, or every one
// at weight 1 when none has merged work.
std::vector<SenderDeltas> clipSenders(const std::vector<SenderDeltas>& sorted) {
  std::vector<SenderDeltas> out;
  const bool unit = unitWeights(sorted);
  for (const auto& s : sorted)
    if (unit || s.weight > 0.0) out.push_back({s.sender, s.deltas, unit ? 1.0 : s.weight});
  return out;
}

// The float64 sums of the weighted means (SenderDeltas::weight), one per base tensor, folded one
// contribution at a time: a shared tensor takes every contribution (unless centered clipping
// aggregates it), an expert's tensor its owners' only. In each, a sender weighs its weight, or 1
// when no sender that counts there has any.
class MeanSums {
 public:
  MeanSums(const NamedTensors& base, const Ownership& owners, const std::vector<SenderDeltas>& senders, bool clipShared)
      : base_(base),
        sums_(base.size()),
        weights_(base.size(), 0.0),
        owners_(base.size(), nullptr),
        unit_(base.size(), false),
        expert_(base.size(), -1) {
    static const std::set<std::string> kNoOwners;
    std::map<std::string, double> weightOf;
    for (const auto& s : senders) weightOf[s.sender] = s.weight;
    for (std::size_t b = 0; b < base.size(); ++b) {
      index_.emplace(base[b].first, b);
      if (const auto expert = model::expertOf(base[b].first)) {
        expert_[b] = expert->expert;
        const auto it = owners.find(expert->expert);
        owners_[b] = it != owners.end() ? &it->second : &kNoOwners;
        double ownersWeight = 0.0;
        for (const auto& owner : *owners_[b])
          if (const auto w = weightOf.find(owner); w != weightOf.end()) ownersWeight += w->second;
        unit_[b] = ownersWeight == 0.0;
      } else {
        unit_[b] = unitWeights(senders);
        clipped_.push_back(clipShared);
        if (clipShared) shared_.push_back({base[b].first, &base[b].second});
        continue;
      }
      clipped_.push_back(false);
    }
  }

  // The shared tensors centered clipping aggregates instead, in base order.
  const std::vector<SharedTensor>& clippedTensors() const { return shared_; }
  bool isClipped(std::size_t b) const { return clipped_[b]; }

  void add(const SenderDeltas& from, const NamedTensors& deltas) {
    const std::string& sender = from.sender;
    std::vector<bool> seen(base_.size(), false);
    for (const auto& [name, delta] : deltas) {
      const auto it = index_.find(name);
      if (it == index_.end() || seen[it->second]) continue;  // not in base, or a repeat: the first counts
      const std::size_t b = it->second;
      seen[b] = true;
      if (clipped_[b] || (owners_[b] && owners_[b]->count(sender) == 0)) continue;
      const double w = unit_[b] ? 1.0 : from.weight;
      if (w == 0.0) continue;  // no merged work, beside senders that have some
      const auto scaled = expert_[b] >= 0 ? from.expertScale.find(expert_[b]) : from.expertScale.end();
      const at::Tensor tensor = base_[b].second.detach();
      if (delta.sizes() != tensor.sizes())  // never let broadcasting hide a misshapen delta
        throw std::invalid_argument("aggregate: delta shape differs from its base tensor");
      at::Tensor d = delta.to(tensor.options().dtype(at::kDouble));
      if (scaled != from.expertScale.end()) d = d * scaled->second;  // cut to the round's bound (expert_bound.h)
      if (w != 1.0) d = d * w;                                       // ×1 is exact: skipped, it only costs a pass
      sums_[b] = sums_[b].defined() ? sums_[b] + d : d;
      weights_[b] += w;
    }
  }

  // base + the weighted mean of what was added, cast to the base dtype; frees that tensor's sum.
  at::Tensor take(std::size_t b) {
    const at::Tensor tensor = base_[b].second.detach();
    if (weights_[b] == 0.0) return tensor.clone();
    const at::Tensor mean = sums_[b] / weights_[b];
    sums_[b] = at::Tensor();
    return (tensor.to(at::kDouble) + mean).to(tensor.scalar_type());
  }

 private:
  const NamedTensors& base_;
  std::unordered_map<std::string, std::size_t> index_;
  std::vector<at::Tensor> sums_;
  std::vector<double> weights_;                       // the sum of the weights added to each tensor
  std::vector<const std::set<std::string>*> owners_;  // null: shared, everyone counts
  std::vector<bool> unit_;   // every sender weighs 1 here: none of those that count has merged work
  std::vector<int> expert_;  // the expert of each base tensor (−1: shared)
  std::vector<bool> clipped_;
  std::vector<SharedTensor> shared_;
};

// Centered clipping's groups (AggregatePolicy::clipShardElements): the clipped tensors packed, in
// name order as planShards packs the shared ones, into shards of at most that many elements; none
// (one group) when 0.
std::vector<Shard> clipShards(const std::vector<SharedTensor>& tensors, std::int64_t maxElements) {
  if (maxElements <= 0) return {};
  std::vector<ckpt::TensorInfo> infos;
  for (const auto& t : tensors) infos.push_back({t.name, ckpt::DType::F32, t.base->sizes().vec(), 0, 0});
  std::sort(infos.begin(), infos.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  return packShards(infos, maxElements);
}

}  // namespace

Expected<NamedTensors> aggregateStream(const NamedTensors& base, const std::vector<SenderDeltas>& senders,
                                       const Ownership& owners, const AggregatePolicy& policy) {
  const auto sorted = senderOrder(senders);
  MeanSums sums(base, owners, sorted, policy.shared == SharedRule::CenteredClip);
  auto pass = forEachSender(sorted, [&](std::size_t i, const NamedTensors& deltas) { sums.add(sorted[i], deltas); });
  if (!pass) return makeError(pass.error());
  std::vector<at::Tensor> clipped;
  if (!sums.clippedTensors().empty()) {
    auto centre = centeredClip(sums.clippedTensors(), clipSenders(sorted), policy.clipIterations, policy.clipTauFactor,
                               policy.clipTauFloor, clipShards(sums.clippedTensors(), policy.clipShardElements));
    if (!centre) return makeError(centre.error());
    clipped = std::move(*centre);
  }
  NamedTensors merged;
  merged.reserve(base.size());
  std::size_t slot = 0;
  for (std::size_t b = 0; b < base.size(); ++b) {
    if (!sums.isClipped(b)) {
      merged.emplace_back(base[b].first, sums.take(b));
      continue;
    }
    const at::Tensor tensor = base[b].second.detach();
    const at::Tensor& delta = clipped[slot++];
    merged.emplace_back(base[b].first, (tensor.to(at::kDouble) + delta.to(tensor.device())).to(tensor.scalar_type()));
  }
  return merged;
}

NamedTensors aggregate(const NamedTensors& base, const std::vector<Contribution>& contributions,
                       const Ownership& owners, const AggregatePolicy& policy) {
  std::vector<SenderDeltas> senders;
  for (const auto& c : contributions) senders.push_back({c.sender, heldDeltas(c.deltas)});
  auto merged = aggregateStream(base, senders, owners, policy);
  if (!merged) throw std::logic_error("aggregate: " + merged.error());  // held deltas cannot fail to read
  return std::move(*merged);
}

}  // namespace es::sync
