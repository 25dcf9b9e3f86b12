// Issue 38: a contribution's shard figures (shard_figures.h), signed. A sharded contribution is one
// folder — one v2 torrent — holding a file per shard it carries and this one figures file, so
// the record that names the torrent signs every figure (a v2 info-hash covers each file's merkle
// root): one copy for every reducer, so a sender cannot state one figure to one shard's reducers
// and another to the next. Every reducer fetches it beside its shard's file (a few hundred bytes),
// checks its own shard's figure against the bytes it fetched (figureMatches) and reads the
// others' into the contribution's norm and each expert's RMS (combineFigures).
//
// The file is a safetensors file with no tensors: the contribution's header as metadata (format
// "expertswarm-figures") and "figures": "<shard>=<the float64's 16 hex digits>,…" in plan order —
// the bits themselves, so no decimal round trip can move the last one. The shard's element count
// is the plan's, not written.
#pragma once

#include "core/checkpoint/safetensors_format.h"
#include "core/common/expected.h"
#include "core/sync/contribution_header.h"
#include "core/sync/shard_figures.h"

#include <set>
#include <string>
#include <vector>

namespace es::sync {

inline const std::string kFiguresFormat = "expertswarm-figures";
inline const std::string kFiguresFileName = "figures.safetensors";

// "<shard>=<hex>,…" in the order given.
std::string figuresText(const std::vector<ShardFigure>& figures);

// The file's metadata: the header's fields (contribution_file.h) and the figures.
Expected<ckpt::Metadata> figuresMetadata(const ContributionHeader& header, const std::vector<ShardFigure>& figures);

Status saveShardFigures(const std::string& path, const ContributionHeader& header,
                        const std::vector<ShardFigure>& figures);

// Reads one strictly: the header `expected` exactly, no tensor, and a figure for exactly the
// shards a sender claiming `claims` carries (every shared shard, every shard of each claimed
// expert; claims empty: every expert), in plan order, each finite and not negative. The figures
// come back with the plan's element counts and experts.
Expected<std::vector<ShardFigure>> loadShardFigures(const std::string& path, const ContributionHeader& expected,
                                                    const std::vector<Shard>& plan, const std::set<int>& claims);

// Whether a sender claiming `claims` carries `shard` (empty claims: every expert).
bool carriesShard(const Shard& shard, const std::set<int>& claims);

}  // namespace es::sync
