// BPE training (bpe_tokenizer.h): incremental pair counts over the unique chunks of the corpus.
#include "core/train/bpe_pretokenize.h"
#include "core/train/bpe_tokenizer.h"

#include <algorithm>
#include <queue>
#include <unordered_map>
#include <vector>

namespace es::train {
namespace {

using bpe_detail::PairKey;
using bpe_detail::pairKey;

constexpr TokenId kDeadSymbol = ~TokenId{0};

// Incremental pair counts. Each merge only revisits the words that contain the
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

}  // namespace

Expected<BpeTokenizer> BpeTokenizer::train(std::string_view text, int vocabSize) {
  if (vocabSize < 256 || vocabSize > 65536)
    return makeError("BPE vocab size must be in [256, 65536], got " + std::to_string(vocabSize));
  std::unordered_map<std::string_view, std::int64_t> chunkCounts;
  bpe_detail::forEachChunk(text, [&](std::string_view chunk) {
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

}  // namespace es::train
