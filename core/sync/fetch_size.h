// The exact size of what a peer fetches, predicted before its first byte arrives: a fetched
// torrent whose one file is not one of these sizes is refused when its metadata arrives (issue
// 14). Pure functions of the run's model config, the sender's claims, the header strings and the
// codec; they lay the file out with the same buildHeader() the writer uses, so a prediction is
// byte-exact (tst_fetch_limits checks them against real files). No Torch: the node uses them.
#pragma once

#include "core/checkpoint/safetensors_format.h"
#include "core/model/model_config.h"
#include "core/sync/contribution_header.h"
#include "core/sync/outer_rule.h"
#include "core/sync/shard_plan.h"

#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace es::sync {

// Every parameter of the model (core/model/tensor_names.h), float32, sorted by name.
std::vector<ckpt::TensorInfo> modelTensors(const model::ModelConfig& config);

// A contribution of a sender claiming `claims` (empty: every expert, as the trainer does): the
// shared tensors and the claimed experts' tensors, encoded with header.codec.
std::int64_t contributionBytes(const model::ModelConfig& config, const std::set<int>& claims,
                               const ContributionHeader& header);

// Every size an honest contribution of that sender may have: one per dense codec (the codec is
// the sender's choice, validated after decoding) and, when header.codec is a sparse one (the
// run's), its size too — a sparse codec of another keep or chunk is never predicted. Ascending,
// duplicates removed.
std::vector<std::int64_t> contributionSizes(const model::ModelConfig& config, const std::set<int>& claims,
                                            const ContributionHeader& header);

// A merged-state snapshot of `round` (SpesPeer::writeSnapshot: every tensor, float32, and the
// outer rule's momentum of each tensor it steps) with a work ledger of `ledgerBytes` bytes (0: none;
// swarm_state.h). Its size before download is bounded by ledgerBytes = maxEncodedBytes(round): the
// ledger's length is the one part a fetcher cannot know, and its reader is strict.
std::int64_t snapshotBytes(const model::ModelConfig& config, const std::string& run, std::int64_t round,
                           const OuterRule& outer = {}, std::int64_t ledgerBytes = 0);

// Issue 38: the bytes of one shard of a contribution as its own file (shard_file.h writes them:
// each piece a tensor "<tensor>@<first row>", shaped [rows, last dim]), encoded with `codec`
// ("f32" for a merged shard), with `metadata` — what a reducer fetches from each contributor and
// every peer from the reducers. bench/reduction_scale sums these.
std::int64_t shardFileBytes(const Shard& shard, const std::string& codec, const ckpt::Metadata& metadata);

// Issue 38: the files of a sender's sharded contribution (shard_file.h) — each shard a sender
// claiming `claims` carries (empty: every expert) and the figures file (shard_figures_file.h),
// with their exact sizes, sorted by name: what a fetched folder must list, no more, no less.
// Empty when the header is not one a sender can write.
std::vector<std::pair<std::string, std::int64_t>> contributionFolderFiles(const std::vector<Shard>& plan,
                                                                          const std::set<int>& claims,
                                                                          const ContributionHeader& header);

// The run folder's default disk quota:
//   3 rounds × 32 peers × the largest contribution (every expert, f32)   others' contributions
//   + 16 × the model's float32 size                                      state, snapshots, ours
// incoming/ holds at most three rounds (others' contributions are deleted two rounds after their
// round); 32 peers is more than a run of this model size has had.
std::int64_t defaultDiskQuotaBytes(const model::ModelConfig& config);

}  // namespace es::sync
