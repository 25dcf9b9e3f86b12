#include "core/sync/work_credit.h"

#include "core/model/tensor_names.h"
#include "core/sync/shard_reduce.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <string>

namespace es::sync {
namespace {

using ckpt::NamedTensors;

// A contiguous float32 CPU view (no copy for the merge's own tensors, already that).
at::Tensor cpuFloat(const at::Tensor& t) { return t.detach().to(at::kCPU, at::kFloat).contiguous(); }

// A piece of the merged update, read as merged − base element by element in float64: no copy of
// the whole update (a float64 one was ~400 MB for the gpu-1b preset's shared weights).
struct Update {
  at::Tensor base, merged;  // float32, contiguous
};

// Sequential float64 Σ d·(m − b) and Σ d·d (a torch reduction's rounding depends on kernel and
// threads); with d = m − b itself, Σ u·u.
void accumulate(const float* d, const Update& u, bool self, double& dot, double& squares) {
  const float* pb = u.base.data_ptr<float>();
  const float* pm = u.merged.data_ptr<float>();
  for (std::int64_t i = 0, n = u.base.numel(); i < n; ++i) {
    const double step = double(pm[i]) - double(pb[i]);
    const double x = self ? step : double(d[i]);
    dot += x * step;
    squares += x * x;
  }
}

// A shard's update, piece by piece in the shard's order, from its rows of the base and the merge.
std::vector<std::pair<std::string, Update>> updateOf(const NamedTensors& baseRows, const NamedTensors& mergedRows) {
  std::vector<std::pair<std::string, Update>> pieces;
  for (std::size_t i = 0; i < baseRows.size() && i < mergedRows.size(); ++i)
    if (baseRows[i].first == mergedRows[i].first && baseRows[i].second.sizes() == mergedRows[i].second.sizes())
      pieces.emplace_back(baseRows[i].first, Update{cpuFloat(baseRows[i].second), cpuFloat(mergedRows[i].second)});
  return pieces;
}

// The update's own sums over a shard, and its elements.
void updateSums(const std::vector<std::pair<std::string, Update>>& update, ShardAgreement& part) {
  double unused = 0.0;
  for (const auto& [name, u] : update) {
    part.elements += u.base.numel();
    accumulate(nullptr, u, true, part.updateSquares, unused);
  }
}

// Sender k's Σ d·u and Σ d·d over a shard from its rows of it (a piece it lacks adds nothing).
void senderSums(const std::vector<std::pair<std::string, Update>>& update, const NamedTensors& deltaRows, std::size_t k,
                ShardAgreement& part) {
  std::map<std::string, const at::Tensor*> byName;
  for (const auto& [name, d] : deltaRows) byName.emplace(name, &d);
  for (const auto& [name, u] : update) {
    const auto it = byName.find(name);
    if (it == byName.end() || it->second->sizes() != u.base.sizes()) continue;
    const at::Tensor d = cpuFloat(*it->second);  // the decoded delta itself when float32 already
    accumulate(d.data_ptr<float>(), u, false, part.dot[k], part.squares[k]);
  }
}

// The shared tensors of the merge, in name order, packed as a sharded round packs them (one
// shard of everything when `shardElements` is 0).
std::vector<Shard> sharedGroups(const NamedTensors& base, const NamedTensors& merged, std::int64_t shardElements) {
  std::vector<ckpt::TensorInfo> infos;
  for (std::size_t i = 0; i < base.size() && i < merged.size(); ++i)
    if (!model::expertOf(base[i].first) && base[i].first == merged[i].first)
      infos.push_back({base[i].first, ckpt::DType::F32, base[i].second.sizes().vec(), 0, 0});
  std::sort(infos.begin(), infos.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  if (infos.empty()) return {};
  return packShards(infos, shardElements > 0 ? shardElements : std::numeric_limits<std::int64_t>::max());
}

}  // namespace

bool Agreement::credited() const {
  return sharedElements > 0 && cosine > std::min(kAgreementCap, kAgreementSigmas / std::sqrt(double(sharedElements)));
}

Expected<ShardAgreement> shardAgreement(const NamedTensors& baseRows, const NamedTensors& mergedRows,
                                        const std::vector<SenderDeltas>& senderRows) {
  const auto update = updateOf(baseRows, mergedRows);
  ShardAgreement part;
  part.dot.assign(senderRows.size(), 0.0);
  part.squares.assign(senderRows.size(), 0.0);
  updateSums(update, part);
  auto pass =
      forEachSender(senderRows, [&](std::size_t k, const NamedTensors& rows) { senderSums(update, rows, k, part); });
  if (!pass) return makeError(pass.error());
  return part;
}

std::vector<Agreement> combineAgreements(const std::vector<ShardAgreement>& parts, std::size_t senders) {
  double updateSquares = 0.0;
  std::int64_t elements = 0;
  std::vector<double> dot(senders, 0.0), squares(senders, 0.0);
  for (const auto& part : parts) {
    updateSquares += part.updateSquares;
    elements += part.elements;
    for (std::size_t k = 0; k < senders && k < part.dot.size(); ++k) {
      dot[k] += part.dot[k];
      squares[k] += part.squares[k];
    }
  }
  std::vector<Agreement> out(senders);
  for (std::size_t k = 0; k < senders; ++k) {
    out[k].sharedElements = elements;
    if (squares[k] > 0.0 && updateSquares > 0.0) out[k].cosine = dot[k] / std::sqrt(squares[k] * updateSquares);
  }
  return out;
}

Expected<std::vector<Agreement>> agreementWithMerge(const NamedTensors& base, const NamedTensors& merged,
                                                    const std::vector<SenderDeltas>& senders,
                                                    std::int64_t shardElements) {
  const auto groups = sharedGroups(base, merged, shardElements);
  std::vector<std::vector<std::pair<std::string, Update>>> updates;
  std::vector<ShardAgreement> parts(groups.size());
  for (std::size_t s = 0; s < groups.size(); ++s) {
    updates.push_back(updateOf(shardRows(base, groups[s]), shardRows(merged, groups[s])));
    parts[s].dot.assign(senders.size(), 0.0);
    parts[s].squares.assign(senders.size(), 0.0);
    updateSums(updates.back(), parts[s]);
  }
  auto pass = forEachSender(senders, [&](std::size_t k, const NamedTensors& deltas) {
    for (std::size_t s = 0; s < groups.size(); ++s) senderSums(updates[s], shardRows(deltas, groups[s]), k, parts[s]);
  });
  if (!pass) return makeError(pass.error());
  return combineAgreements(parts, senders.size());
}

}  // namespace es::sync
