#include "core/sync/shard_figures_file.h"

#include "core/checkpoint/safetensors.h"
#include "core/common/hex_bits.h"
#include "core/common/safe_quote.h"
#include "core/sync/contribution_file.h"

#include <cmath>

namespace es::sync {
namespace {

constexpr std::size_t kHexDigits = 16;  // hex_bits.h

// A sum of squares: finite (hexAsDouble), not negative, not −0 (one spelling per value).
Expected<double> figureOfHex(const std::string& hex) {
  auto value = hexAsDouble(hex);
  if (value && (*value < 0 || std::signbit(*value))) return makeError("not a sum of squares");
  return value;
}

// The figures of `text` for exactly the shards in `expected` (plan order).
Expected<std::vector<ShardFigure>> parseFigures(const std::string& text, const std::vector<const Shard*>& expected,
                                                const std::string& where) {
  std::vector<ShardFigure> figures;
  std::size_t at = 0;
  for (std::size_t k = 0; k < expected.size(); ++k) {
    const Shard& shard = *expected[k];
    const std::string prefix = shard.id + "=";
    if (text.compare(at, prefix.size(), prefix) != 0)
      return makeError(where + "figure " + std::to_string(k) + " is not shard " + shard.id + "'s");
    at += prefix.size();
    auto value = figureOfHex(text.substr(at, kHexDigits));
    if (!value) return makeError(where + "shard " + shard.id + "'s figure: " + value.error());
    at += kHexDigits;
    const bool last = k + 1 == expected.size();
    if (!last && (at >= text.size() || text[at] != ',')) return makeError(where + "figures end early");
    at += last ? 0 : 1;
    figures.push_back({shard.id, *value, shard.elements(), shard.expert});
  }
  if (at != text.size()) return makeError(where + "more figures than the shards it carries");
  return figures;
}

}  // namespace

bool carriesShard(const Shard& shard, const std::set<int>& claims) {
  return shard.expert < 0 || claims.empty() || claims.count(shard.expert) > 0;
}

std::string figuresText(const std::vector<ShardFigure>& figures) {
  std::string text;
  for (const auto& f : figures) text += (text.empty() ? "" : ",") + f.shard + "=" + doubleAsHex(f.sumOfSquares);
  return text;
}

Expected<ckpt::Metadata> figuresMetadata(const ContributionHeader& header, const std::vector<ShardFigure>& figures) {
  auto metadata = contributionMetadata(header, kFiguresFormat);
  if (!metadata) return metadata;
  (*metadata)["figures"] = figuresText(figures);
  return metadata;
}

Status saveShardFigures(const std::string& path, const ContributionHeader& header,
                        const std::vector<ShardFigure>& figures) {
  auto metadata = figuresMetadata(header, figures);
  if (!metadata) return makeError(metadata.error());
  return ckpt::saveSafetensors(path, {}, *metadata);
}

Expected<std::vector<ShardFigure>> loadShardFigures(const std::string& path, const ContributionHeader& expected,
                                                    const std::vector<Shard>& plan, const std::set<int>& claims) {
  const std::string where = "figures file " + safeQuote(path) + ": ";
  auto file = ckpt::loadSafetensors(path);
  if (!file) return file.failure();
  if (!file->tensors.empty()) return makeError(where + "holds tensors");
  auto header = contributionHeaderOf(file->metadata, where, kFiguresFormat, {"figures"});
  if (!header) return makeError(header.error());
  if (!sameHeader(*header, expected)) return makeError(where + "not the contribution it was fetched as");
  std::vector<const Shard*> carried;
  for (const auto& shard : plan)
    if (carriesShard(shard, claims)) carried.push_back(&shard);
  return parseFigures(file->metadata.at("figures"), carried, where);
}

}  // namespace es::sync
