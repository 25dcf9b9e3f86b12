#include "core/sync/contribution_file.h"

#include <torch/torch.h>

#include <algorithm>
#include <iterator>
#include <limits>

namespace es::sync {
namespace {

const std::string kFormat = "expertswarm-contribution";
const std::string kVersion = "1";
const char* const kKeys[] = {"format", "version", "run", "round", "sender", "base_hash", "codec"};

// A round is a canonical non-negative decimal: digits only, no sign, no leading zeros.
bool parseRound(const std::string& text, std::int64_t& out) {
  if (text.empty() || (text.size() > 1 && text[0] == '0')) return false;
  std::int64_t value = 0;
  for (const char c : text) {
    if (c < '0' || c > '9') return false;
    if (value > (std::numeric_limits<std::int64_t>::max() - (c - '0')) / 10) return false;
    value = value * 10 + (c - '0');
  }
  out = value;
  return true;
}

}  // namespace

Status saveContribution(const std::string& path, const ContributionHeader& header, const ckpt::NamedTensors& deltas) {
  const auto codec = parseCodec(header.codec);
  if (!codec) return makeError("cannot save contribution: " + codec.error());
  if (header.round < 0) return makeError("cannot save contribution: negative round " + std::to_string(header.round));
  // Never write what loadContribution() would refuse.
  if (header.run.empty() || header.sender.empty() || header.baseHash.empty())
    return makeError("cannot save contribution: run, sender and base hash must be non-empty");
  const ckpt::Metadata metadata = {
      {"format", kFormat},       {"version", kVersion},         {"run", header.run},
      {"round", std::to_string(header.round)}, {"sender", header.sender}, {"base_hash", header.baseHash},
      {"codec", header.codec},
  };
  return ckpt::saveSafetensors(path, encodeDeltas(deltas, *codec), metadata);
}

Expected<ContributionFile> loadContribution(const std::string& path) {
  auto file = ckpt::loadSafetensors(path);
  if (!file) return makeError(file.error());
  const ckpt::Metadata& meta = file->metadata;
  const std::string where = "contribution \"" + path + "\": ";

  // Strict: exactly the known keys (a new field means a new version).
  for (const auto& [key, value] : meta) {
    if (std::find(std::begin(kKeys), std::end(kKeys), key) == std::end(kKeys))
      return makeError(where + "unknown metadata field \"" + key + "\"");
  }
  for (const char* key : kKeys) {
    if (meta.count(key) == 0) return makeError(where + "missing metadata field \"" + key + "\"");
  }
  if (meta.at("format") != kFormat)
    return makeError(where + "format \"" + meta.at("format") + "\", expected \"" + kFormat + "\"");
  if (meta.at("version") != kVersion)
    return makeError(where + "unsupported version \"" + meta.at("version") + "\", expected \"" + kVersion + "\"");
  for (const char* key : {"run", "sender", "base_hash"}) {
    if (meta.at(key).empty()) return makeError(where + "empty metadata field \"" + std::string(key) + "\"");
  }

  ContributionFile out;
  if (!parseRound(meta.at("round"), out.header.round))
    return makeError(where + "malformed round \"" + meta.at("round") + "\"");
  const auto codec = parseCodec(meta.at("codec"));
  if (!codec) return makeError(where + codec.error());
  out.header.run = meta.at("run");
  out.header.sender = meta.at("sender");
  out.header.baseHash = meta.at("base_hash");
  out.header.codec = meta.at("codec");

  auto deltas = decodeDeltas(file->tensors, *codec);
  if (!deltas) return makeError(where + deltas.error());
  out.deltas = std::move(*deltas);
  return out;
}

}  // namespace es::sync
