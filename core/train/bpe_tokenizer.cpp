// Byte-level BPE (bpe_tokenizer.h): construction, encoding, decoding and the JSON form.
// Training lives in bpe_training.cpp, the chunk splitter in bpe_pretokenize.cpp.
#include "core/train/bpe_tokenizer.h"

#include "core/common/atomic_file.h"
#include "core/train/bpe_pretokenize.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <functional>
#include <queue>
#include <stdexcept>

namespace es::train {
namespace {

constexpr TokenId kDeadSymbol = ~TokenId{0};

using bpe_detail::PairKey;
using bpe_detail::pairKey;

std::string jsonError(const std::string& what) { return "tokenizer JSON: " + what; }

}  // namespace

BpeTokenizer::BpeTokenizer() : BpeTokenizer(std::vector<std::pair<TokenId, TokenId>>{}) {}

BpeTokenizer::BpeTokenizer(std::vector<std::pair<TokenId, TokenId>> merges) : merges_(std::move(merges)) {
  tokenBytes_.reserve(256 + merges_.size());
  for (int b = 0; b < 256; ++b) tokenBytes_.emplace_back(1, static_cast<char>(b));
  ranks_.reserve(merges_.size());
  for (std::size_t i = 0; i < merges_.size(); ++i) {
    const auto [left, right] = merges_[i];
    ranks_.emplace(pairKey(left, right), static_cast<TokenId>(i));
    tokenBytes_.push_back(tokenBytes_.at(left) + tokenBytes_.at(right));
  }
}

// Merges by rank with a min-heap over (rank, position) on a linked list: O(n log n) even for a
// megabyte-long chunk. Equal ranks pop left to right, which matches training's merge order;
// a merge only creates pairs of higher rank, so the lowest rank is always applied first.
void BpeTokenizer::encodeChunk(std::string_view chunk, std::vector<TokenId>& out) const {
  const std::size_t n = chunk.size();
  if (n == 1 || merges_.empty()) {
    for (const char c : chunk) out.push_back(static_cast<unsigned char>(c));
    return;
  }
  std::vector<TokenId> sym(n);
  std::vector<std::size_t> prev(n), next(n);
  for (std::size_t i = 0; i < n; ++i) {
    sym[i] = static_cast<unsigned char>(chunk[i]);
    prev[i] = i - 1;  // wraps to SIZE_MAX for the first symbol: "none"
    next[i] = i + 1;  // n: "none"
  }
  using Candidate = std::pair<TokenId, std::size_t>;  // (rank, position)
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> heap;
  const auto consider = [&](std::size_t i) {
    if (next[i] >= n) return;
    const auto it = ranks_.find(pairKey(sym[i], sym[next[i]]));
    if (it != ranks_.end()) heap.push({it->second, i});
  };
  for (std::size_t i = 0; i + 1 < n; ++i) consider(i);
  while (!heap.empty()) {
    const auto [rank, i] = heap.top();
    heap.pop();
    const std::size_t j = next[i];
    // Stale entry: a neighbour was merged away since it was pushed.
    if (sym[i] == kDeadSymbol || j >= n || merges_[rank] != std::make_pair(sym[i], sym[j])) continue;
    sym[i] = 256 + rank;
    sym[j] = kDeadSymbol;
    next[i] = next[j];
    if (next[i] < n) prev[next[i]] = i;
    if (prev[i] < n) consider(prev[i]);
    consider(i);
  }
  for (std::size_t i = 0; i < n; i = next[i]) out.push_back(sym[i]);
}

std::vector<TokenId> BpeTokenizer::encode(std::string_view text) const {
  std::vector<TokenId> ids;
  ids.reserve(text.size() / 3);
  // Natural text repeats a few thousand words endlessly; caching per call (keys view `text`, the
  // tokens sit in one pool) keeps encode() const and thread-safe.
  std::unordered_map<std::string_view, std::pair<std::size_t, std::size_t>> cache;  // -> pool range
  std::vector<TokenId> pool;
  bpe_detail::forEachChunk(text, [&](std::string_view chunk) {
    if (chunk.size() == 1) {
      ids.push_back(static_cast<unsigned char>(chunk[0]));
      return;
    }
    auto [it, inserted] = cache.try_emplace(chunk);
    if (inserted) {
      const std::size_t begin = pool.size();
      encodeChunk(chunk, pool);
      it->second = {begin, pool.size()};
    }
    ids.insert(ids.end(), pool.begin() + it->second.first, pool.begin() + it->second.second);
  });
  return ids;
}

std::string BpeTokenizer::decode(const std::vector<TokenId>& ids) const {
  std::string text;
  for (const TokenId id : ids) {
    if (id >= tokenBytes_.size())
      throw std::out_of_range("token id " + std::to_string(id) + " is outside the vocabulary of " +
                              std::to_string(tokenBytes_.size()));
    text += tokenBytes_[id];
  }
  return text;
}

std::string BpeTokenizer::toJson() const {
  nlohmann::ordered_json j;
  j["type"] = "byte-bpe";
  j["version"] = 1;
  j["vocab_size"] = vocabSize();
  auto& merges = j["merges"] = nlohmann::ordered_json::array();
  for (const auto& [left, right] : merges_) merges.push_back({left, right});
  return j.dump();
}

Expected<BpeTokenizer> BpeTokenizer::fromJson(std::string_view json) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(json.begin(), json.end());
  } catch (const nlohmann::json::parse_error& e) {
    return makeError(jsonError(std::string("not valid JSON: ") + e.what()));
  }
  if (!j.is_object()) return makeError(jsonError("expected an object"));
  const auto type = j.find("type");
  if (type == j.end() || !type->is_string() || type->get<std::string>() != "byte-bpe")
    return makeError(jsonError("\"type\" must be \"byte-bpe\""));
  const auto version = j.find("version");
  if (version == j.end() || !version->is_number_unsigned() || version->get<std::uint64_t>() != 1)
    return makeError(jsonError("unsupported \"version\" (expected 1)"));
  const auto vocab = j.find("vocab_size");
  if (vocab == j.end() || !vocab->is_number_unsigned() || vocab->get<std::uint64_t>() < 256 ||
      vocab->get<std::uint64_t>() > 65536)
    return makeError(jsonError("\"vocab_size\" must be an integer in [256, 65536]"));
  const auto list = j.find("merges");
  if (list == j.end() || !list->is_array()) return makeError(jsonError("\"merges\" must be an array"));
  if (list->size() + 256 != vocab->get<std::uint64_t>())
    return makeError(jsonError("\"vocab_size\" is " + std::to_string(vocab->get<std::uint64_t>()) + " but " +
                               std::to_string(list->size()) + " merges give " + std::to_string(list->size() + 256)));
  std::vector<std::pair<TokenId, TokenId>> merges;
  merges.reserve(list->size());
  std::unordered_map<PairKey, std::size_t> seen;
  for (std::size_t i = 0; i < list->size(); ++i) {
    const auto& m = (*list)[i];
    const std::string where = "merge " + std::to_string(i);
    if (!m.is_array() || m.size() != 2 || !m[0].is_number_unsigned() || !m[1].is_number_unsigned())
      return makeError(jsonError(where + " must be a pair of token ids [left, right]"));
    const auto left = m[0].get<std::uint64_t>(), right = m[1].get<std::uint64_t>();
    // Merge i creates token 256 + i, so it may only combine tokens that already exist.
    if (left >= 256 + i || right >= 256 + i)
      return makeError(jsonError(where + " (creating token " + std::to_string(256 + i) + ") uses token " +
                                 std::to_string(std::max(left, right)) + ", which does not exist yet"));
    const auto [it, fresh] = seen.emplace(pairKey(TokenId(left), TokenId(right)), i);
    if (!fresh) return makeError(jsonError(where + " repeats merge " + std::to_string(it->second)));
    merges.emplace_back(TokenId(left), TokenId(right));
  }
  return BpeTokenizer(std::move(merges));
}

Status BpeTokenizer::save(const std::string& path) const { return writeFileAtomically(path, toJson()); }

Expected<BpeTokenizer> BpeTokenizer::load(const std::string& path) {
  auto bytes = readWholeFile(path);
  if (!bytes) return makeError(bytes.error());
  auto tokenizer = fromJson(*bytes);
  if (!tokenizer) return makeError(path + ": " + tokenizer.error());
  return tokenizer;
}

}  // namespace es::train
