#include "core/train/bpe_tokenizer.h"

#include "core/common/atomic_file.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <functional>
#include <queue>
#include <stdexcept>

namespace es::train {
namespace {

constexpr TokenId kDeadSymbol = ~TokenId{0};

using PairKey = std::uint64_t;
PairKey pairKey(TokenId left, TokenId right) { return (PairKey{left} << 32) | right; }

// ---- Pre-tokenization: GPT-2's split, on bytes. Bytes >= 0x80 count as letters so a UTF-8
// character (valid or not) never splits a word. Every byte lands in exactly one chunk, which is
// what makes decode(encode(x)) == x hold for arbitrary bytes.

enum class ByteClass : std::uint8_t { Other, Letter, Digit, Space };

ByteClass classOf(char ch) {
  const auto c = static_cast<unsigned char>(ch);
  if (c >= 0x80 || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) return ByteClass::Letter;
  if (c >= '0' && c <= '9') return ByteClass::Digit;
  if (c == ' ' || (c >= '\t' && c <= '\r')) return ByteClass::Space;  // \t \n \v \f \r
  return ByteClass::Other;
}

// Length of an English contraction ('s 't 're 've 'm 'll 'd) at `i`, or 0. Unlike GPT-2 the
// suffix must end the word, so "'tis" or a quoted "'sam" do not lose their first letter.
std::size_t contractionLength(std::string_view s, std::size_t i) {
  for (const std::string_view suffix : {"s", "t", "m", "d", "re", "ve", "ll"}) {
    const std::size_t end = i + 1 + suffix.size();
    if (s.compare(i + 1, suffix.size(), suffix) == 0 &&
        (end >= s.size() || classOf(s[end]) != ByteClass::Letter))
      return 1 + suffix.size();
  }
  return 0;
}

// End of the chunk that starts at `i` (< s.size()).
std::size_t chunkEnd(std::string_view s, std::size_t i) {
  const std::size_t n = s.size();
  if (s[i] == '\'') {
    if (const std::size_t len = contractionLength(s, i)) return i + len;
  }
  std::size_t j = i;
  if (s[j] == ' ' && j + 1 < n && classOf(s[j + 1]) != ByteClass::Space) ++j;  // " word"
  const ByteClass cls = classOf(s[j]);
  if (cls != ByteClass::Space) {
    while (j < n && classOf(s[j]) == cls) ++j;
    return j;
  }
  while (j < n && classOf(s[j]) == ByteClass::Space) ++j;
  // GPT-2's \s+(?!\S): before a word the run gives up its last byte, so a space there becomes
  // the word's prefix (another whitespace byte becomes a chunk of its own).
  return (j == n || j - i == 1) ? j : j - 1;
}

template <typename Fn>
void forEachChunk(std::string_view text, Fn&& fn) {
  for (std::size_t i = 0; i < text.size();) {
    const std::size_t end = chunkEnd(text, i);
    fn(text.substr(i, end - i));
    i = end;
  }
}

// ---- Training: incremental pair counts. Each merge only revisits the words that contain the
// merged pair, so the cost is proportional to the change, not to the corpus.

struct Word {
  std::vector<TokenId> symbols;
  std::int64_t freq;
};

struct HeapEntry {
  std::int64_t count;
  PairKey pair;
  // Max-heap on count; among equal counts the smallest (left, right) comes out first.
  bool operator<(const HeapEntry& o) const { return count < o.count || (count == o.count && pair > o.pair); }
};

class PairTrainer {
 public:
  explicit PairTrainer(std::vector<Word> words) : words_(std::move(words)) {
    for (std::uint32_t w = 0; w < words_.size(); ++w) {
      const auto& s = words_[w].symbols;
      for (std::size_t i = 0; i + 1 < s.size(); ++i) add(pairKey(s[i], s[i + 1]), words_[w].freq, w);
    }
    pushGrown();
  }

  // Heap entries go stale as counts change (lazy invalidation). Invariant: every live pair has an
  // entry whose count is >= its current count, so a popped entry that matches its pair's current
  // count is the true maximum, and ties come out in (left, right) order.
  std::vector<std::pair<TokenId, TokenId>> run(std::size_t maxMerges) {
    std::vector<std::pair<TokenId, TokenId>> merges;
    while (merges.size() < maxMerges && !heap_.empty()) {
      const HeapEntry top = heap_.top();
      heap_.pop();
      const auto it = counts_.find(top.pair);
      const std::int64_t current = it == counts_.end() ? 0 : it->second;
      if (current != top.count) {
        // Lower now: requeue at the true count. Higher: a fresher entry was pushed on growth.
        if (current > 0 && current < top.count) heap_.push({current, top.pair});
        continue;
      }
      if (current < 2) break;  // no pair occurs twice: more merges would only memorise
      const auto left = static_cast<TokenId>(top.pair >> 32);
      const auto right = static_cast<TokenId>(top.pair & 0xffffffffu);
      merge(top.pair, left, right, static_cast<TokenId>(256 + merges.size()));
      merges.emplace_back(left, right);
    }
    return merges;
  }

 private:
  void add(PairKey p, std::int64_t freq, std::uint32_t word) {
    counts_[p] += freq;
    auto& list = where_[p];
    if (list.empty() || list.back() != word) list.push_back(word);
    grown_.push_back(p);
  }

  // The word index of `p` is left as is: a word listed there that no longer has `p` is harmless.
  void sub(PairKey p, std::int64_t freq) {
    const auto it = counts_.find(p);
    if ((it->second -= freq) == 0) {
      counts_.erase(it);
      where_.erase(p);
    }
  }

  void pushGrown() {
    std::sort(grown_.begin(), grown_.end());
    grown_.erase(std::unique(grown_.begin(), grown_.end()), grown_.end());
    for (const PairKey p : grown_) {
      const auto it = counts_.find(p);
      if (it != counts_.end()) heap_.push({it->second, p});
    }
    grown_.clear();
  }

  // Replaces every (left, right) in the affected words, left to right without overlap (the order
  // encode() uses), and moves the counts of the neighbouring pairs to pairs with `id`.
  void merge(PairKey merged, TokenId left, TokenId right, TokenId id) {
    std::vector<std::uint32_t> affected = std::move(where_[merged]);
    where_.erase(merged);
    counts_.erase(merged);  // every occurrence goes, so its count becomes exactly 0
    std::sort(affected.begin(), affected.end());
    affected.erase(std::unique(affected.begin(), affected.end()), affected.end());
    const auto subUnlessMerged = [&](PairKey p, std::int64_t f) {
      if (p != merged) sub(p, f);
    };
    for (const std::uint32_t w : affected) {
      auto& s = words_[w].symbols;
      const std::int64_t f = words_[w].freq;
      std::size_t out = 0;  // compaction in place: s[out - 1] is new, s[i + 2] still old
      for (std::size_t i = 0; i < s.size();) {
        if (i + 1 < s.size() && s[i] == left && s[i + 1] == right) {
          if (out > 0) {
            subUnlessMerged(pairKey(s[out - 1], left), f);
            add(pairKey(s[out - 1], id), f, w);
          }
          if (i + 2 < s.size()) {
            subUnlessMerged(pairKey(right, s[i + 2]), f);
            add(pairKey(id, s[i + 2]), f, w);
          }
          s[out++] = id;
          i += 2;
        } else {
          s[out++] = s[i++];
        }
      }
      s.resize(out);
    }
    pushGrown();
  }

  std::vector<Word> words_;
  std::unordered_map<PairKey, std::int64_t> counts_;
  std::unordered_map<PairKey, std::vector<std::uint32_t>> where_;  // pair -> words (may be stale)
  std::priority_queue<HeapEntry> heap_;
  std::vector<PairKey> grown_;  // pairs whose count rose during the current step
};

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

Expected<BpeTokenizer> BpeTokenizer::train(std::string_view text, int vocabSize) {
  if (vocabSize < 256 || vocabSize > 65536)
    return makeError("BPE vocab size must be in [256, 65536], got " + std::to_string(vocabSize));
  std::unordered_map<std::string_view, std::int64_t> chunkCounts;
  forEachChunk(text, [&](std::string_view chunk) {
    if (chunk.size() > 1) ++chunkCounts[chunk];  // a single byte has no pair to count
  });
  // Sorted so the word order (and with it every container's content) is independent of hashing.
  std::vector<std::pair<std::string_view, std::int64_t>> unique(chunkCounts.begin(), chunkCounts.end());
  chunkCounts = {};
  std::sort(unique.begin(), unique.end());
  std::vector<Word> words;
  words.reserve(unique.size());
  for (const auto& [chunk, freq] : unique) {
    Word& word = words.emplace_back(Word{{}, freq});
    word.symbols.reserve(chunk.size());
    for (const char c : chunk) word.symbols.push_back(static_cast<unsigned char>(c));
  }
  PairTrainer trainer(std::move(words));
  return BpeTokenizer(trainer.run(static_cast<std::size_t>(vocabSize - 256)));
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
  forEachChunk(text, [&](std::string_view chunk) {
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
