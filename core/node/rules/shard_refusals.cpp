#include "core/node/rules/shard_refusals.h"

#include "core/node/rules/merged_set.h"

namespace es::node {

std::string inputDigest(const std::map<std::string, ContentId>& inputs, const std::set<std::string>& refused) {
  std::set<ContentId> kept;
  for (const auto& [sender, content] : inputs)
    if (!refused.count(sender)) kept.insert(content);
  return mergedSetDigest(kept);
}

RoundRefusals gatherRefusals(const std::map<std::string, ContentId>& inputs, const std::set<std::string>& refused,
                             const std::vector<std::string>& shards,
                             const std::map<std::string, AppliedShard>& applied) {
  RoundRefusals r;
  r.refused = refused;
  r.digest = inputDigest(inputs, refused);
  std::set<std::string> newly;
  for (const auto& shard : shards) {
    const auto it = applied.find(shard);
    if (it == applied.end() || it->second.inputDigest != r.digest) {
      r.waiting.push_back(shard);
      continue;
    }
    for (const auto& sender : it->second.refused)
      if (inputs.count(sender) && !refused.count(sender)) newly.insert(sender);
  }
  if (!r.waiting.empty()) return r;  // every shard's refusals first: one more pass at most
  if (newly.empty()) {
    r.pass = RoundPass::Done;
    return r;
  }
  r.pass = RoundPass::Again;
  r.refused.insert(newly.begin(), newly.end());
  r.digest = inputDigest(inputs, r.refused);
  return r;
}

}  // namespace es::node
