#include "core/sync/expert_bound.h"

#include "core/model/tensor_names.h"
#include "core/sync/weighted_median.h"

#include <cmath>
#include <cstdint>

namespace es::sync {
// A sharded round's: each expert's figures added in plan order (its shards, in order).
std::map<int, double> expertMovesOfFigures(const std::vector<ShardFigure>& figures) {
  std::map<int, std::pair<double, std::int64_t>> byExpert;
  for (const auto& f : figures) {
    if (f.expert < 0) continue;
    auto& [squares, elements] = byExpert[f.expert];
    squares += f.sumOfSquares;
    elements += f.elements;
  }
  std::map<int, double> out;
  for (const auto& [expert, sums] : byExpert)
    if (sums.second > 0) out[expert] = std::sqrt(sums.first / static_cast<double>(sums.second));
  return out;
}

std::map<int, double> expertMoves(const ContributionCheck& check) {
  if (!check.figures.empty()) return expertMovesOfFigures(check.figures);
  // From the norms validation took already (no second pass over the deltas); each expert's squares
  // added in tensor-name order, whatever the file's order.
  std::map<int, std::map<std::string, std::pair<double, std::int64_t>>> byExpert;
  for (std::size_t t = 0; t < check.tensorNorms.size() && t < check.tensorElements.size(); ++t) {
    const auto& [name, norm] = check.tensorNorms[t];
    if (const auto expert = model::expertOf(name))
      byExpert[expert->expert].emplace(name, std::make_pair(norm, check.tensorElements[t]));
  }
  std::map<int, double> out;
  for (const auto& [expert, tensors] : byExpert) {
    double squares = 0.0;
    std::int64_t elements = 0;
    for (const auto& [name, normAndSize] : tensors) {
      squares += normAndSize.first * normAndSize.first;
      elements += normAndSize.second;
    }
    if (elements > 0) out[expert] = std::sqrt(squares / static_cast<double>(elements));
  }
  return out;
}

std::vector<std::map<int, double>> expertScales(const std::vector<SenderExperts>& senders, double factor) {
  std::vector<std::map<int, double>> out(senders.size());
  // (RMS, the sender's weight shared among its experts): a sender weighs its standing in all,
  // however many experts it claims — claiming more does not buy more say over the reference.
  std::vector<std::pair<double, double>> moves;
  for (const auto& s : senders)
    if (s.weight > 0.0)
      for (const auto& [expert, rms] : s.moves) moves.emplace_back(rms, s.weight / double(s.moves.size()));
  if (moves.empty()) return out;  // nobody with merged work moved an expert: no reference
  const double reference = weightedLowMedian(std::move(moves));
  if (!(reference > 0.0)) return out;  // nothing to scale against
  const double bound = factor * reference;
  for (std::size_t i = 0; i < senders.size(); ++i)
    for (const auto& [expert, rms] : senders[i].moves)
      if (rms > bound) out[i][expert] = bound / rms;
  return out;
}

}  // namespace es::sync
