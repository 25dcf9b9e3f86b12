#include "core/sync/shard_check.h"

#include <torch/torch.h>

#include <map>

namespace es::sync {

std::string checkShardRows(const Shard& shard, const NamedTensors& rows, const ShardFigure& stated,
                           const NamedTensors& base, const std::string& codec, const ValidationPolicy& policy,
                           BaseMaxAbs& baseMaxAbs) {
  if (!figureMatches(stated, shard, rows)) return "shard " + shard.id + ": its bytes do not give the signed figure";
  if (!policy.ceiling.known()) return {};  // as checkContribution: no ceiling, nothing per weight
  std::map<std::string, const at::Tensor*> byName;
  for (const auto& [name, t] : base) byName.emplace(name, &t);
  for (const auto& [name, row] : rows) {
    const auto it = byName.find(name);
    if (it == byName.end()) return "shard " + shard.id + ": no base tensor " + name;
    if (auto reason = ceilingBreach(name, row, *it->second, codec, policy, baseMaxAbs); !reason.empty()) return reason;
  }
  return {};
}

Verdict judgeFigures(const std::vector<ShardFigure>& figures, const ValidationPolicy& policy) {
  const WholeFigure whole = combineFigures(figures);
  if (auto reason = noWorkReason(whole.norm, whole.elements, policy); !reason.empty())
    return {false, std::move(reason), true};
  auto reason = normCapReason(whole.norm, policy);
  return {reason.empty(), std::move(reason), false};
}

}  // namespace es::sync
