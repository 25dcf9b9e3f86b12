// SpesPeer's side of a sharded round (issue 38; docs/ARCHITECTURE.md, "Sharded reduction"): the
// contribution as shard files, a reducer's merged shards, and the new state from every shard's
// merged file — sync/sharded_merge.h's functions on the trainer thread's state. The node does not
// call them yet (it runs all-to-all rounds): tst_spes_sharded drives them as the node will.
#include "core/spes/spes_peer.h"
#include "core/spes/spes_peer_impl.h"
#include "core/sync/merged_shard_file.h"
#include "core/sync/shard_figures_file.h"
#include "core/sync/shard_file.h"
#include "core/sync/sharded_merge.h"

#include <torch/torch.h>

#include <algorithm>

namespace es::node {

using namespace peer_detail;

namespace {

namespace fs = std::filesystem;

// What reduceShards and applyShards both derive from a spec on this peer's base.
struct ShardedRound {
  std::vector<sync::Shard> plan;
  sync::RoundPolicy policy;
  sync::RoundContext context;
  std::vector<sync::ShardedSender> known;     // the senders whose figures file read
  std::map<std::string, std::string> folder;  // sender → its folder
  std::set<std::string> unreadable;           // senders whose figures file did not read here
  sync::ShardedScale scale;
};

// `baseHash`, `ledger`: the state the round merges onto (SpesPeer::Impl's, private to the class).
Expected<ShardedRound> prepare(const SpesPeerConfig& config, const std::string& baseHash,
                               const sync::WorkLedger& ledger, const ShardedRoundSpec& spec) {
  if (spec.shardElements < 1) return makeError("a sharded round needs a shard size");
  ShardedRound r;
  r.plan = sync::planShards(config.trainer.model, spec.shardElements);
  r.policy = mergePolicy(config, spec.round);
  r.policy.aggregate.clipShardElements = spec.shardElements;  // the clip's shards are the round's
  r.context = {config.runId, spec.round, baseHash};
  for (const auto& s : spec.senders) {
    if (spec.out.count(s.sender)) continue;
    // The run's codec: a sender's figures name it, so another codec's are not this round's.
    const sync::ContributionHeader header{config.runId, spec.round, s.sender.str(), r.context.baseHash, config.codec};
    auto figures = sync::loadShardFigures(s.folder + "/" + sync::kFiguresFileName, header, r.plan, s.claims);
    if (!figures) {
      r.unreadable.insert(s.sender.str());
      continue;
    }
    r.known.push_back({header, s.claims, std::move(*figures)});
    r.folder[s.sender.str()] = s.folder;
  }
  r.scale = sync::shardedScale(r.known, {}, ledger, r.policy.validation);
  return r;
}

// The accepted senders that carry `shard`: what its merged file must name.
std::set<std::string> carriers(const ShardedRound& r, const sync::Shard& shard) {
  std::set<std::string> ids;
  for (const auto& s : r.known)
    if (sync::carriesShard(shard, s.claims) &&
        std::binary_search(r.scale.accepted.begin(), r.scale.accepted.end(), s.header.sender))
      ids.insert(s.header.sender);
  return ids;
}

}  // namespace

Expected<ContributionWritten> SpesPeer::writeShardedContribution(std::int64_t round, const std::string& folder,
                                                                 std::int64_t shardElements) {
  auto& d = *impl_;
  if (d.feedback) return makeError("a sharded round sends a dense codec; the run's is " + d.config.codec);
  if (shardElements < 1) return makeError("a sharded round needs a shard size");
  d.snapshot = train::trainerWeights(*d.trainer);
  ContributionWritten out{round, folder, d.fingerprint(), 0};
  const sync::ContributionHeader header{d.config.runId, round, d.config.selfId, out.baseHash, d.config.codec};
  auto written = sync::saveContributionShards(folder, header, d.pendingDeltas(),
                                              sync::planShards(d.config.trainer.model, shardElements));
  if (!written) return makeError(written.error());
  for (const auto& name : *written) {
    std::error_code ec;
    out.bytes += static_cast<std::int64_t>(fs::file_size(folder + "/" + name, ec));
  }
  return out;
}

Expected<std::vector<ReducedShard>> SpesPeer::reduceShards(const ShardedRoundSpec& spec,
                                                           const std::vector<std::string>& shards,
                                                           const std::string& outputDir) {
  const auto& d = *impl_;
  auto r = prepare(d.config, d.fingerprint(), d.ledger, spec);
  if (!r) return r.failure();
  std::error_code ec;
  fs::create_directories(outputDir, ec);
  const sync::ShardRowsReader read = [&](const sync::ShardedSender& s,
                                         const sync::Shard& shard) -> Expected<NamedTensors> {
    auto file =
        sync::loadContributionShard(r->folder.at(s.header.sender) + "/" + sync::shardFileName(shard), s.header, shard);
    if (!file) return file.failure();
    return sync::piecesAsRows(shard, file->pieces);
  };
  sync::BaseMaxAbs maxAbs;
  std::vector<ReducedShard> out;
  for (const auto& id : shards) {
    const auto shard = std::find_if(r->plan.begin(), r->plan.end(), [&](const auto& s) { return s.id == id; });
    if (shard == r->plan.end()) return makeError("no shard " + id + " in the round's plan");
    const sync::MergedShardKey key{d.config.runId, spec.round, r->context.baseHash, id, spec.inputDigest};
    auto merged = sync::reduceRoundShard(*shard, d.base, r->known, r->scale, d.ledger, r->policy, key, read, maxAbs);
    if (!merged) return merged.failure();
    for (const auto& s : spec.senders)  // a figures file that did not read: refused wherever it sends
      if (r->unreadable.count(s.sender.str()) && sync::carriesShard(*shard, s.claims))
        merged->refused.insert(s.sender.str());
    const std::string path = outputDir + "/" + sync::mergedShardFileName(spec.round, id);
    if (auto saved = sync::saveMergedShard(path, *shard, *merged); !saved) return saved.failure();
    ReducedShard reduced{id, path, {}};
    for (const auto& who : merged->refused) reduced.refused.insert(PeerId(who));
    out.push_back(std::move(reduced));
  }
  return out;
}

Expected<MergeResult> SpesPeer::applyShards(const ShardedRoundSpec& spec, const std::vector<std::string>& mergedPaths,
                                            bool evaluate, ShardRefusals* refusals) {
  auto& d = *impl_;
  if (d.snapshot.empty())
    return makeError("merge of round " + std::to_string(spec.round) + " without a contribution of ours");
  auto r = prepare(d.config, d.fingerprint(), d.ledger, spec);
  if (!r) return r.failure();
  if (!r->unreadable.empty()) {
    // Refused wherever they send (reduceShards names them so): a second pass without them, as for
    // any refusal — an error alone left every peer's round stalled on one key's bad figures file.
    if (refusals)
      for (const auto& shard : r->plan) (*refusals)[shard.id] = r->unreadable;
    return makeError("the figures of " + *r->unreadable.begin() + " did not read here");
  }
  if (mergedPaths.size() != r->plan.size()) return makeError("not one merged shard per shard of the plan");
  std::vector<sync::MergedShard> merged;
  for (std::size_t k = 0; k < r->plan.size(); ++k) {
    const sync::MergedShardKey key{d.config.runId, spec.round, r->context.baseHash, r->plan[k].id, spec.inputDigest};
    auto loaded = sync::loadMergedShard(mergedPaths[k], key, r->plan[k], carriers(*r, r->plan[k]));
    if (!loaded) return loaded.failure();
    merged.push_back(std::move(*loaded));
  }
  const bool final = std::all_of(merged.begin(), merged.end(), [](const auto& m) { return m.refused.empty(); });
  if (!final && refusals) {
    for (const auto& m : merged) (*refusals)[m.key.shard] = m.refused;
    return makeError("the merged shards of round " + std::to_string(spec.round) + " refused senders: another pass");
  }
  auto outcome = sync::applyMergedShards(d.base, r->context, r->plan, merged, r->scale, r->policy,
                                         spec.round * d.config.syncEvery, d.config.trainer.model, d.momentum, d.ledger);
  if (!outcome) return outcome.failure();
  // The senders out of the round: refused whole by their figures, or by a shard (an earlier pass).
  for (const auto& [sender, verdict] : r->scale.refused)
    outcome->verdicts.push_back({sender, false, false, {}, verdict.reason, verdict.noWork});
  for (const auto& sender : spec.out) {
    outcome->verdicts.push_back({sender.str(), false, false, {}, "refused by a shard's reducers", false});
    outcome->verdicts.back().outByShards = true;
  }
  MergeResult result;
  result.round = spec.round;
  return d.adoptMerge(std::move(*outcome), std::move(result), {}, evaluate);
}

sync::RoundTopology SpesPeer::nextTopology(const std::map<int, std::set<std::string>>& owners,
                                           const sync::ReductionPolicy& policy) const {
  return sync::roundTopology(impl_->config.trainer.model, impl_->ledger, owners, impl_->fingerprint(), policy,
                             !impl_->sparse.has_value());
}

}  // namespace es::node
