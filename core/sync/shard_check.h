// Issue 38: a sharded round's verdicts on a contribution, split between who can reach them.
// A reducer holds one shard of each sender: it checks that the shard's bytes give the figure the
// sender signed (shard_figures_file.h) — which also refuses any non-finite value, as a stated
// figure is finite — and that every weight in its rows is within the update ceiling
// (validate.h's ceilingBreach: the same bound per weight a whole check applies, so a sender is
// refused by some shard exactly when the whole check refuses it for a weight). What reads the
// whole contribution — the no-work floor and the absolute cap — every peer reaches alike from the
// signed figures (judgeFigures). Together they are checkContribution's verdict with a known
// ceiling and figureShards set (tst_sharded_round); the reducers' findings become the round's one
// verdict through node/rules/shard_refusals.h.
#pragma once

#include "core/sync/shard_figures.h"
#include "core/sync/validate.h"

#include <string>
#include <vector>

namespace es::sync {

// One sender's shard as its reducer sees it: `rows` its file's pieces as rows (piecesAsRows),
// `stated` its signed figure for the shard, `base` the whole round base (every peer holds it: a
// weight's ceiling grows with its tensor's largest |weight|, not the shard's). The reason it is
// refused, or empty. The ceiling only when the policy knows it (as checkContribution).
std::string checkShardRows(const Shard& shard, const NamedTensors& rows, const ShardFigure& stated,
                           const NamedTensors& base, const std::string& codec, const ValidationPolicy& policy,
                           BaseMaxAbs& baseMaxAbs);

// The verdict that reads the whole contribution, from its figures in plan order: the no-work
// floor (Verdict::noWork), then the absolute cap.
Verdict judgeFigures(const std::vector<ShardFigure>& figures, const ValidationPolicy& policy);

}  // namespace es::sync
