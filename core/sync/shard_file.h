// Issue 38: a contribution cut into shard files (shard_plan.h), the form a sharded round sends.
// One folder per contribution is one v2 torrent with one file per shard, so a reducer fetches its
// shard's file alone (node::FetchLimits::folderWanted) and verifies it by that file's own merkle
// root. Each file is a safetensors file of the shard's pieces — each a tensor "<tensor>@<first
// row>" shaped [rows, last dim] — encoded with the contribution's codec piece by piece (a sparse
// sender's top-k runs per piece: the piece, not the tensor, is what a reducer holds), with the
// contribution's header and the shard's id as metadata (format "expertswarm-shard"). Its size is
// fetch_size.h's shardFileBytes to the byte (tst_shard_file), so bench/reduction_scale's byte
// model is the files'.
#pragma once

#include "core/checkpoint/safetensors.h"
#include "core/common/expected.h"
#include "core/sync/contribution_header.h"
#include "core/sync/shard_plan.h"

#include <string>
#include <vector>

namespace es::sync {

inline const std::string kShardFormat = "expertswarm-shard";

struct ShardFile {
  ContributionHeader header;
  std::string shard;          // its id
  ckpt::NamedTensors pieces;  // decoded to float32, "<tensor>@<first row>" → [rows, last dim]
};

std::string shardFileName(const Shard& shard);   // "<id>.safetensors"
std::string pieceName(const ShardPiece& piece);  // "<tensor>@<first row>"

// The shard's pieces cut from whole deltas (views, no copy): empty when `deltas` holds none of the
// shard's tensors (another owner's expert); an error when it holds some but not all of them.
Expected<ckpt::NamedTensors> cutShard(const ckpt::NamedTensors& deltas, const Shard& shard);

// Writes `folder`/shardFileName(s) for every shard the contribution carries (cutShard), each
// atomically, then the figures file (shard_figures_file.h: each shard's figure of what its file
// decodes to); returns the names written, the shards in plan order, kFiguresFileName last. The
// folder is created; a shard it does not carry leaves no file.
Expected<std::vector<std::string>> saveContributionShards(const std::string& folder, const ContributionHeader& header,
                                                          const ckpt::NamedTensors& deltas,
                                                          const std::vector<Shard>& shards);

// Reads one strictly: the header `expected` exactly, the shard `shard`, exactly its pieces with
// their shapes (nothing is allocated from a shape the plan does not give).
Expected<ShardFile> loadContributionShard(const std::string& path, const ContributionHeader& expected,
                                          const Shard& shard);

// A file's pieces as a shard's rows (shard_reduce.h's shardRows: plain tensor names, in plan
// order) — what a reducer merges and places back. A piece of the plan missing from `pieces` is left
// out.
ckpt::NamedTensors piecesAsRows(const Shard& shard, const ckpt::NamedTensors& pieces);

}  // namespace es::sync
