#include "core/sync/contribution_file.h"

#include "core/common/safe_quote.h"

#include <torch/torch.h>

#include <algorithm>
#include <iterator>
#include <limits>

namespace es::sync {
namespace {

const std::string kVersion = "1";
constexpr std::size_t kMaxNameBytes = 128;  // ids are 64 hex digits

bool isName(const std::string& text) {
  return text.size() <= kMaxNameBytes && std::all_of(text.begin(), text.end(), [](char c) {
           return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
                  c == '-';
         });
}
const std::vector<std::string> kKeys = {"format", "version", "run", "round", "sender", "base_hash", "codec"};

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

Expected<ckpt::Metadata> contributionMetadata(const ContributionHeader& header, const std::string& format) {
  if (auto codec = parseContributionCodec(header.codec); !codec)
    return makeError("cannot save contribution: " + codec.error());
  if (header.round < 0) return makeError("cannot save contribution: negative round " + std::to_string(header.round));
  if (header.run.empty() || header.sender.empty() || header.baseHash.empty())
    return makeError("cannot save contribution: run, sender and base hash must be non-empty");
  return ckpt::Metadata{
      {"format", format},        {"version", kVersion},
      {"run", header.run},       {"round", std::to_string(header.round)},
      {"sender", header.sender}, {"base_hash", header.baseHash},
      {"codec", header.codec},
  };
}

Status saveContribution(const std::string& path, const ContributionHeader& header, const ckpt::NamedTensors& deltas) {
  auto metadata = contributionMetadata(header);
  if (!metadata) return makeError(metadata.error());
  return ckpt::saveSafetensors(path, encodeContribution(deltas, *parseContributionCodec(header.codec)), *metadata);
}

Status saveEncodedContribution(const std::string& path, const ContributionHeader& header,
                               const ckpt::NamedTensors& encoded) {
  auto metadata = contributionMetadata(header);
  if (!metadata) return makeError(metadata.error());
  return ckpt::saveSafetensors(path, encoded, *metadata);
}

Expected<ContributionHeader> contributionHeaderOf(const ckpt::Metadata& meta, const std::string& where,
                                                  const std::string& format,
                                                  const std::vector<std::string>& extraKeys) {
  // Strict: exactly the known keys (a new field means a new version).
  auto known = kKeys;
  known.insert(known.end(), extraKeys.begin(), extraKeys.end());
  for (const auto& [key, value] : meta) {
    if (std::find(known.begin(), known.end(), key) == known.end())
      return makeError(where + "unknown metadata field " + safeQuote(key));
  }
  for (const auto& key : known) {
    if (meta.count(key) == 0) return makeError(where + "missing metadata field \"" + key + "\"");
  }
  if (meta.at("format") != format)
    return makeError(where + "format " + safeQuote(meta.at("format")) + ", expected " + safeQuote(format));
  if (meta.at("version") != kVersion)
    return makeError(where + "unsupported version " + safeQuote(meta.at("version")) + ", expected " +
                     safeQuote(kVersion));
  // Names, not text: they reach logs, verdicts and ledger rows.
  for (const char* key : {"run", "sender", "base_hash"}) {
    if (meta.at(key).empty()) return makeError(where + "empty metadata field \"" + std::string(key) + "\"");
    if (!isName(meta.at(key)))
      return makeError(where + "metadata field \"" + key + "\" must be at most " + std::to_string(kMaxNameBytes) +
                       " characters of A-Z a-z 0-9 . _ -, not " + safeQuote(meta.at(key)));
  }
  ContributionHeader header;
  if (!parseRound(meta.at("round"), header.round))
    return makeError(where + "malformed round " + safeQuote(meta.at("round")));
  if (const auto codec = parseContributionCodec(meta.at("codec")); !codec) return makeError(where + codec.error());
  header.run = meta.at("run");
  header.sender = meta.at("sender");
  header.baseHash = meta.at("base_hash");
  header.codec = meta.at("codec");
  return header;
}

namespace {

// The metadata and deltas of a parsed safetensors file; `where` prefixes every error.
Expected<ContributionFile> fromSafetensors(const ckpt::SafetensorsFile& file, const std::string& where,
                                           const TensorShapes* expected) {
  auto header = contributionHeaderOf(file.metadata, where);
  if (!header) return makeError(header.error());
  auto deltas = decodeContribution(file.tensors, *parseContributionCodec(header->codec), expected);
  if (!deltas) return makeError(where + deltas.error());
  return ContributionFile{std::move(*header), std::move(*deltas)};
}

}  // namespace

Expected<ContributionFile> loadContribution(const std::string& path, const TensorShapes* expected) {
  auto file = ckpt::loadSafetensors(path);
  if (!file) return file.failure();
  return fromSafetensors(*file, "contribution \"" + path + "\": ", expected);
}

Expected<ContributionHeader> readContributionHeader(const std::string& path) {
  auto header = ckpt::readHeader(path);
  if (!header) return header.failure();
  return contributionHeaderOf(header->metadata, "contribution \"" + path + "\": ");
}

DeltaSource contributionDeltas(const std::string& path, const ContributionHeader& expected,
                               std::shared_ptr<const TensorShapes> shapes) {
  return [path, expected, shapes]() -> Expected<ckpt::NamedTensors> {
    auto file = loadContribution(path, shapes.get());
    if (!file) return file.failure();
    // The bytes were verified and their header read before: another header now is our disk's doing.
    if (!sameHeader(file->header, expected)) return localError("contribution \"" + path + "\" changed on disk");
    return std::move(file->deltas);
  };
}

Expected<ContributionFile> parseContribution(std::string_view bytes) {
  auto file = ckpt::parseSafetensors(bytes);
  if (!file) return makeError(file.error());
  return fromSafetensors(*file, "contribution: ", nullptr);
}

}  // namespace es::sync
