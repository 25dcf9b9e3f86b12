#include "core/sync/shard_figures.h"

#include "core/sync/shard_reduce.h"
#include "core/sync/sum_of_squares.h"

#include <torch/torch.h>

#include <cmath>
#include <map>

namespace es::sync {

// In the plan's piece order whatever order `rows` come in.
ShardFigure figureOf(const Shard& shard, const ckpt::NamedTensors& rows) {
  std::map<std::string, const at::Tensor*> byName;
  for (const auto& [name, piece] : rows) byName.emplace(name, &piece);
  ShardFigure f{shard.id, 0.0, 0, shard.expert};
  for (const auto& piece : shard.pieces) {
    const auto it = byName.find(piece.tensor);
    if (it == byName.end()) continue;
    f.sumOfSquares += sumOfSquares(*it->second);
    f.elements += it->second->numel();
  }
  return f;
}

std::vector<ShardFigure> contributionFigures(const ckpt::NamedTensors& deltas, const std::vector<Shard>& shards) {
  std::vector<ShardFigure> out;
  for (const auto& shard : shards) {
    const auto rows = shardRows(deltas, shard);
    if (!rows.empty()) out.push_back(figureOf(shard, rows));
  }
  return out;
}

bool figureMatches(const ShardFigure& stated, const Shard& shard, const ckpt::NamedTensors& rows) {
  const ShardFigure mine = figureOf(shard, rows);
  return stated.shard == shard.id && stated.expert == shard.expert && stated.elements == mine.elements &&
         stated.sumOfSquares == mine.sumOfSquares;
}

WholeFigure combineFigures(const std::vector<ShardFigure>& figures) {
  WholeFigure w;
  double squares = 0.0;
  for (const auto& f : figures) {
    squares += f.sumOfSquares;
    w.elements += f.elements;
  }
  w.norm = std::sqrt(squares);
  w.rms = w.elements > 0 ? w.norm / std::sqrt(double(w.elements)) : 0.0;
  return w;
}

}  // namespace es::sync
