#include "core/sync/shard_plan.h"

#include "core/model/tensor_names.h"
#include "core/sync/fetch_size.h"

#include <algorithm>
#include <map>

namespace es::sync {
namespace {

struct Rows {
  std::int64_t rows = 1, columns = 1;
};

Rows rowsOf(const ckpt::TensorInfo& t) {
  Rows r;
  if (t.shape.empty()) return r;
  r.columns = t.shape.back();
  for (std::size_t d = 0; d + 1 < t.shape.size(); ++d) r.rows *= t.shape[d];
  return r;
}

// Packs `tensors` (in order) into shards of at most maxElements: whole tensors while they fit, a
// tensor larger than a shard cut by rows (a row larger than a shard is a shard of its own).
void pack(const std::vector<ckpt::TensorInfo>& tensors, std::int64_t maxElements, const std::string& prefix, int expert,
          std::vector<Shard>& out) {
  Shard current;
  auto flush = [&] {
    if (current.pieces.empty()) return;
    current.id = prefix + std::to_string(static_cast<int>(out.size()));
    current.expert = expert;
    out.push_back(std::move(current));
    current = {};
  };
  std::size_t first = out.size();
  for (const auto& t : tensors) {
    const Rows r = rowsOf(t);
    std::int64_t row = 0;
    while (row < r.rows) {
      const std::int64_t room = maxElements - current.elements();
      std::int64_t take = std::min(r.rows - row, room / r.columns);
      if (take == 0 && current.pieces.empty()) take = 1;  // a row wider than a shard
      if (take == 0) {
        flush();
        continue;
      }
      current.pieces.push_back({t.name, row, row + take, r.columns});
      row += take;
      if (current.elements() >= maxElements) flush();
    }
  }
  flush();
  // Ids count within the group: "shared-0", "expert-3-0".
  for (std::size_t i = first; i < out.size(); ++i) out[i].id = prefix + std::to_string(static_cast<int>(i - first));
}

}  // namespace

std::vector<Shard> packShards(const std::vector<ckpt::TensorInfo>& tensors, std::int64_t maxElements,
                              const std::string& prefix, int expert) {
  std::vector<Shard> out;
  pack(tensors, std::max<std::int64_t>(1, maxElements), prefix, expert, out);
  return out;
}

std::int64_t Shard::elements() const {
  std::int64_t n = 0;
  for (const auto& p : pieces) n += p.elements();
  return n;
}

std::vector<Shard> planShards(const model::ModelConfig& config, std::int64_t maxElements) {
  maxElements = std::max<std::int64_t>(1, maxElements);
  std::vector<ckpt::TensorInfo> shared;
  std::map<int, std::vector<ckpt::TensorInfo>> experts;
  for (auto& t : modelTensors(config)) {  // sorted by name
    if (const auto e = model::expertOf(t.name))
      experts[e->expert].push_back(std::move(t));
    else
      shared.push_back(std::move(t));
  }
  std::vector<Shard> out;
  pack(shared, maxElements, "shared-", -1, out);
  for (const auto& [expert, tensors] : experts)
    pack(tensors, maxElements, "expert-" + std::to_string(expert) + "-", expert, out);
  return out;
}

std::int64_t shardElementsFor(const model::ModelConfig& config, int peers, std::int64_t floorElements) {
  std::int64_t shared = 0;
  for (const auto& t : modelTensors(config))
    if (!model::expertOf(t.name)) {
      const Rows r = rowsOf(t);
      shared += r.rows * r.columns;
    }
  return std::max(floorElements, shared / std::max(1, peers));
}

}  // namespace es::sync
