#include "core/sync/merged_shard_file.h"

#include "core/common/hex_bits.h"
#include "core/common/safe_quote.h"
#include "core/sync/fetch_size.h"
#include "core/sync/shard_file.h"

#include <torch/torch.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>

namespace es::sync {
namespace {

const std::vector<std::string> kKeys = {"format", "version", "run",     "round",   "base_hash",
                                        "shard",  "inputs",  "refused", "senders", "credit"};

std::string joined(const std::vector<std::string>& items, char separator) {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : std::string(1, separator)) + item;
  return out;
}

std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> items;
  if (text.empty()) return items;
  std::size_t from = 0;
  for (std::size_t at; (at = text.find(separator, from)) != std::string::npos; from = at + 1)
    items.push_back(text.substr(from, at - from));
  items.push_back(text.substr(from));
  return items;
}

std::string creditText(const ShardAgreement& part) {
  std::vector<std::string> pairs;
  for (std::size_t k = 0; k < part.dot.size(); ++k)
    pairs.push_back(doubleAsHex(part.dot[k]) + "/" + doubleAsHex(part.squares[k]));
  return doubleAsHex(part.updateSquares) + ";" + joined(pairs, ',');
}

Expected<double> squaresOfHex(const std::string& hex) {
  auto value = hexAsDouble(hex);
  if (value && (*value < 0 || std::signbit(*value))) return makeError("a sum of squares below 0");
  return value;
}

// "<uu>;<du>/<dd>,…" with exactly `senders` pairs.
Expected<ShardAgreement> parseCredit(const std::string& text, std::size_t senders, std::int64_t elements) {
  const auto semicolon = text.find(';');
  if (semicolon == std::string::npos) return makeError("credit without the update's sum");
  ShardAgreement part;
  part.elements = elements;
  auto uu = squaresOfHex(text.substr(0, semicolon));
  if (!uu) return makeError("credit: " + uu.error());
  part.updateSquares = *uu;
  const auto pairs = split(text.substr(semicolon + 1), ',');
  if (pairs.size() != senders) return makeError("credit for another number of senders");
  for (const auto& pair : pairs) {
    const auto slash = pair.find('/');
    if (slash == std::string::npos) return makeError("credit: a pair without '/'");
    auto dot = hexAsDouble(pair.substr(0, slash));
    auto squares = squaresOfHex(pair.substr(slash + 1));
    if (!dot || !squares) return makeError("credit: " + (dot ? squares.error() : dot.error()));
    part.dot.push_back(*dot);
    part.squares.push_back(*squares);
  }
  return part;
}

// Sorted, unique, and each a plain id: one spelling per list.
Expected<std::vector<std::string>> idList(const std::string& text, const char* what) {
  auto ids = split(text, ',');
  for (std::size_t k = 0; k < ids.size(); ++k) {
    if (ids[k].empty() || !std::all_of(ids[k].begin(), ids[k].end(),
                                       [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-'; }))
      return makeError(std::string(what) + ": not a list of ids");
    if (k > 0 && !(ids[k - 1] < ids[k])) return makeError(std::string(what) + ": not sorted and unique");
  }
  return ids;
}

// The file's metadata (kKeys): its key, the refused and merged senders, the credit's text.
ckpt::Metadata mergedMetadata(const MergedShardKey& k, const std::vector<std::string>& refused,
                              const std::vector<std::string>& senders, const std::string& credit) {
  return {
      {"format", kMergedShardFormat},    {"version", "1"},   {"run", k.run},       {"round", std::to_string(k.round)},
      {"base_hash", k.baseHash},         {"shard", k.shard}, {"inputs", k.inputs}, {"refused", joined(refused, ',')},
      {"senders", joined(senders, ',')}, {"credit", credit}};
}

Status checkKey(const ckpt::Metadata& meta, const MergedShardKey& key) {
  for (const auto& [name, value] : meta)
    if (std::find(kKeys.begin(), kKeys.end(), name) == kKeys.end())
      return makeError("unknown metadata field " + safeQuote(name));
  for (const auto& name : kKeys)
    if (!meta.count(name)) return makeError("missing metadata field \"" + name + "\"");
  const std::map<std::string, std::string> expected = {
      {"format", kMergedShardFormat}, {"version", "1"},     {"run", key.run},      {"round", std::to_string(key.round)},
      {"base_hash", key.baseHash},    {"shard", key.shard}, {"inputs", key.inputs}};
  for (const auto& [name, value] : expected)
    if (meta.at(name) != value)
      return makeError(name + " " + safeQuote(meta.at(name)) + ", expected " + safeQuote(value));
  return {};
}

// Exactly the shard's pieces, float32, of the plan's shapes.
Status checkPieces(const ckpt::NamedTensors& tensors, const Shard& shard) {
  if (tensors.size() != shard.pieces.size()) return makeError("not exactly the shard's pieces");
  std::map<std::string, const at::Tensor*> byName;
  for (const auto& [name, t] : tensors) byName.emplace(name, &t);
  for (const auto& piece : shard.pieces) {
    const auto it = byName.find(pieceName(piece));
    if (it == byName.end()) return makeError("no piece " + safeQuote(pieceName(piece)));
    const at::Tensor& t = *it->second;
    if (t.scalar_type() != at::kFloat || t.sizes() != at::IntArrayRef{piece.rowEnd - piece.rowBegin, piece.columns})
      return makeError("piece " + safeQuote(pieceName(piece)) + " is not float32 of the plan's shape");
  }
  return {};
}

}  // namespace

std::string mergedShardFileName(std::int64_t round, const std::string& shard) {
  return "merged-" + std::to_string(round) + "-" + shard + ".safetensors";
}

std::vector<std::int64_t> mergedShardSizes(const Shard& shard, const MergedShardKey& key,
                                           const std::set<std::string>& inputSenders) {
  const std::vector<std::string> all(inputSenders.begin(), inputSenders.end());
  std::vector<std::int64_t> sizes;
  for (std::size_t refused = 0; refused <= all.size(); ++refused) {
    const std::vector<std::string> out(all.begin(), all.begin() + std::ptrdiff_t(refused));
    const std::vector<std::string> in(all.begin() + std::ptrdiff_t(refused), all.end());
    const ShardAgreement zeros{0.0, shard.elements(), std::vector<double>(in.size()), std::vector<double>(in.size())};
    sizes.push_back(
        shardFileBytes(shard, "f32", mergedMetadata(key, out, in, shard.expert < 0 ? creditText(zeros) : "")));
  }
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  return sizes;
}

Status saveMergedShard(const std::string& path, const Shard& shard, const MergedShard& merged) {
  std::map<std::string, const at::Tensor*> rows;
  for (const auto& [name, t] : merged.rows) rows.emplace(name, &t);
  ckpt::NamedTensors pieces;
  for (const auto& piece : shard.pieces) {
    const auto it = rows.find(piece.tensor);
    if (it == rows.end()) return makeError("merged shard " + shard.id + " lacks " + piece.tensor);
    pieces.emplace_back(pieceName(piece), *it->second);
  }
  if (auto fits = checkPieces(pieces, shard); !fits) return makeError("merged shard " + shard.id + ": " + fits.error());
  const auto meta = mergedMetadata(merged.key, {merged.refused.begin(), merged.refused.end()}, merged.senders,
                                   merged.credit ? creditText(*merged.credit) : "");
  return ckpt::saveSafetensors(path, pieces, meta);
}

Expected<MergedShard> loadMergedShard(const std::string& path, const MergedShardKey& key, const Shard& shard,
                                      const std::set<std::string>& inputSenders) {
  const std::string where = "merged shard " + safeQuote(path) + ": ";
  auto file = ckpt::loadSafetensors(path);
  if (!file) return file.failure();
  const auto& meta = file->metadata;
  if (auto fits = checkKey(meta, key); !fits) return makeError(where + fits.error());
  if (auto fits = checkPieces(file->tensors, shard); !fits) return makeError(where + fits.error());
  auto refused = idList(meta.at("refused"), "refused");
  auto senders = idList(meta.at("senders"), "senders");
  if (!refused || !senders) return makeError(where + (refused ? senders.error() : refused.error()));
  std::set<std::string> both(refused->begin(), refused->end());
  for (const auto& s : *senders)
    if (!both.insert(s).second) return makeError(where + "a sender both refused and merged");
  if (both != inputSenders) return makeError(where + "not the input set's senders");
  MergedShard out{key, {refused->begin(), refused->end()}, std::move(*senders), std::nullopt, {}};
  if (shard.expert < 0) {
    auto credit = parseCredit(meta.at("credit"), out.senders.size(), shard.elements());
    if (!credit) return makeError(where + credit.error());
    out.credit = std::move(*credit);
  } else if (!meta.at("credit").empty()) {
    return makeError(where + "credit for an expert's shard");
  }
  out.rows = piecesAsRows(shard, file->tensors);
  return out;
}

}  // namespace es::sync
