// Issue 38: what a sharded round's verdicts need of a whole contribution that no reducer holds —
// its sum of squares per shard. The no-work floor, the absolute norm cap and the expert bound
// (validate.h, expert_bound.h) read a contribution's RMS over all its deltas, or over all of one
// expert's shards; a reducer holds one shard. So the sender states one figure per shard it sends
// (in the contribution's figures file, signed by the record that names the torrent:
// shard_figures_file.h), each reducer recomputes its shard's figure from the
// pieces it fetched and refuses the contribution when they differ (figureMatches: exact, both
// sides add the same decoded floats in the same order), and every peer combines the stated figures
// into the same norm and RMS (combineFigures: plan order). Float64 sums of squares of the decoded
// float32 values, each piece a sequential loop, pieces in plan order.
#pragma once

#include "core/checkpoint/safetensors.h"
#include "core/sync/shard_plan.h"

#include <cstdint>
#include <string>
#include <vector>

namespace es::sync {

struct ShardFigure {
  std::string shard;  // its id
  double sumOfSquares = 0;
  std::int64_t elements = 0;
  int expert = -1;  // the shard's (Shard::expert): −1 shared
};

// The figure of one shard from its rows (shard_reduce.h's shardRows, or a fetched file's pieces
// through shard_file.h's piecesAsRows), added in the plan's piece order; a piece missing from
// `rows` adds nothing (and its elements are not counted).
ShardFigure figureOf(const Shard& shard, const ckpt::NamedTensors& rows);

// The figure of every shard `deltas` carries (whole tensors by name), in plan order.
std::vector<ShardFigure> contributionFigures(const ckpt::NamedTensors& deltas, const std::vector<Shard>& shards);

// Whether a reducer's rows give exactly the stated figure (bits, and the element count).
bool figureMatches(const ShardFigure& stated, const Shard& shard, const ckpt::NamedTensors& rows);

struct WholeFigure {
  double norm = 0;
  double rms = 0;
  std::int64_t elements = 0;
};
// The contribution's norm and RMS from its figures, summed in the order given (plan order).
WholeFigure combineFigures(const std::vector<ShardFigure>& figures);

}  // namespace es::sync
