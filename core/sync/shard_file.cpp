#include "core/sync/shard_file.h"

#include "core/common/safe_quote.h"
#include "core/sync/contribution_codec.h"
#include "core/sync/contribution_file.h"
#include "core/sync/shard_figures_file.h"

#include <torch/torch.h>

#include <filesystem>
#include <map>

namespace es::sync {
namespace {

std::vector<std::int64_t> pieceShape(const ShardPiece& p) { return {p.rowEnd - p.rowBegin, p.columns}; }

}  // namespace

std::string shardFileName(const Shard& shard) { return shard.id + ".safetensors"; }

std::string pieceName(const ShardPiece& piece) { return piece.tensor + "@" + std::to_string(piece.rowBegin); }

Expected<ckpt::NamedTensors> cutShard(const ckpt::NamedTensors& deltas, const Shard& shard) {
  std::map<std::string, const at::Tensor*> byName;
  for (const auto& [name, t] : deltas) byName.emplace(name, &t);
  ckpt::NamedTensors out;
  for (const auto& p : shard.pieces) {
    const auto it = byName.find(p.tensor);
    if (it == byName.end()) continue;
    const at::Tensor& t = *it->second;
    if (t.numel() % p.columns != 0 || t.numel() / p.columns < p.rowEnd)
      return makeError("shard " + shard.id + ": " + p.tensor + " is not of the plan's shape");
    out.emplace_back(pieceName(p), t.reshape({-1, p.columns}).narrow(0, p.rowBegin, p.rowEnd - p.rowBegin));
  }
  if (!out.empty() && out.size() != shard.pieces.size())
    return makeError("shard " + shard.id + ": the contribution carries some of its tensors but not all");
  return out;
}

Expected<std::vector<std::string>> saveContributionShards(const std::string& folder, const ContributionHeader& header,
                                                          const ckpt::NamedTensors& deltas,
                                                          const std::vector<Shard>& shards) {
  auto metadata = contributionMetadata(header, kShardFormat);
  if (!metadata) return makeError(metadata.error());
  const auto codec = parseContributionCodec(header.codec);  // contributionMetadata checked it
  std::error_code ec;
  std::filesystem::create_directories(folder, ec);
  if (ec) return makeError("cannot create " + safeQuote(folder) + ": " + ec.message());
  std::vector<std::string> written;
  std::vector<ShardFigure> figures;
  for (const auto& shard : shards) {
    auto pieces = cutShard(deltas, shard);
    if (!pieces) return makeError(pieces.error());
    if (pieces->empty()) continue;
    auto meta = *metadata;
    meta["shard"] = shard.id;
    const std::string name = shardFileName(shard);
    const auto encoded = encodeContribution(*pieces, *codec);
    if (auto saved = ckpt::saveSafetensors(folder + "/" + name, encoded, meta); !saved) return makeError(saved.error());
    written.push_back(name);
    // The figure of what the file decodes to: the bits its reducers recompute.
    auto decoded = decodeContribution(encoded, *codec);
    if (!decoded) return makeError("shard " + shard.id + ": " + decoded.error());
    figures.push_back(figureOf(shard, piecesAsRows(shard, *decoded)));
  }
  if (auto saved = saveShardFigures(folder + "/" + kFiguresFileName, header, figures); !saved)
    return makeError(saved.error());
  written.push_back(kFiguresFileName);
  return written;
}

Expected<ShardFile> loadContributionShard(const std::string& path, const ContributionHeader& expected,
                                          const Shard& shard) {
  const std::string where = "shard file " + safeQuote(path) + ": ";
  auto file = ckpt::loadSafetensors(path);
  if (!file) return file.failure();
  auto header = contributionHeaderOf(file->metadata, where, kShardFormat, {"shard"});
  if (!header) return makeError(header.error());
  if (!sameHeader(*header, expected)) return makeError(where + "not the contribution it was fetched as");
  if (file->metadata.at("shard") != shard.id)
    return makeError(where + "holds shard " + safeQuote(file->metadata.at("shard")) + ", not " + shard.id);
  TensorShapes shapes;
  for (const auto& p : shard.pieces) shapes[pieceName(p)] = pieceShape(p);
  auto pieces = decodeContribution(file->tensors, *parseContributionCodec(header->codec), &shapes);
  if (!pieces) return makeError(where + pieces.error());
  if (pieces->size() != shapes.size()) return makeError(where + "not exactly the shard's pieces");
  for (const auto& [name, t] : *pieces) {
    const auto it = shapes.find(name);
    if (it == shapes.end() || t.sizes().vec() != it->second)
      return makeError(where + "unexpected piece " + safeQuote(name) + " or shape");
  }
  return ShardFile{std::move(*header), shard.id, std::move(*pieces)};
}

ckpt::NamedTensors piecesAsRows(const Shard& shard, const ckpt::NamedTensors& pieces) {
  std::map<std::string, const at::Tensor*> byName;
  for (const auto& [name, piece] : pieces) byName.emplace(name, &piece);
  ckpt::NamedTensors rows;
  for (const auto& piece : shard.pieces)
    if (const auto it = byName.find(pieceName(piece)); it != byName.end()) rows.emplace_back(piece.tensor, *it->second);
  return rows;
}

}  // namespace es::sync
