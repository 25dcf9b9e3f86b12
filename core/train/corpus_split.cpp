#include "core/train/corpus_split.h"

#include "core/train/corpus_text.h"
#include "core/train/prepared_run.h"
#include "core/train/run_manifest.h"
#include "core/train/token_shard.h"

#include <algorithm>
#include <filesystem>

namespace es::train {
namespace {

constexpr std::size_t kSlice = std::size_t(4) << 20;      // text encoded at once
constexpr std::size_t kLookahead = std::size_t(1) << 20;  // how far past kSlice a blank line is looked for
constexpr std::int64_t kSamplePieces = 1024;

// Where the slice of `text` that begins at `begin` ends: at the first blank line within
// kLookahead after kSlice bytes, else after kSlice bytes. `text` reaches at least that far or to
// the text's end.
std::size_t sliceEnd(std::string_view text, std::size_t begin) {
  const std::size_t end = std::min(text.size(), begin + kSlice);
  if (end == text.size()) return end;
  const auto blank = text.substr(0, std::min(text.size(), end + kLookahead)).find("\n\n", end);
  return blank == std::string_view::npos ? end : blank + 2;
}

void appendTokens(std::vector<std::uint16_t>& out, const std::vector<TokenId>& ids) {
  out.insert(out.end(), ids.begin(), ids.end());  // ids < vocab <= 65536 (the tokenizer's own bound)
}

std::vector<std::uint16_t> encodeText(const BpeTokenizer& tokenizer, std::string_view text) {
  std::vector<std::uint16_t> out;
  for (std::size_t begin = 0; begin < text.size();) {
    const std::size_t end = sliceEnd(text, begin);
    appendTokens(out, tokenizer.encode(text.substr(begin, end - begin)));
    begin = end;
  }
  return out;
}

// The byte ranges the tokenizer's sample takes from the training text [0, end).
std::vector<std::pair<std::int64_t, std::int64_t>> samplePieces(std::int64_t end, std::int64_t sampleBytes) {
  if (end <= sampleBytes) return {{0, end}};
  std::vector<std::pair<std::int64_t, std::int64_t>> pieces;
  for (std::int64_t i = 0; i < kSamplePieces; ++i) {
    const std::int64_t begin = end / kSamplePieces * i;
    pieces.emplace_back(begin, begin + sampleBytes / kSamplePieces);
  }
  return pieces;
}

// A piece cut out of UTF-8 text, trimmed to whole characters.
std::string_view wholeCharacters(std::string_view piece) {
  while (!piece.empty() && (static_cast<unsigned char>(piece.front()) & 0xc0) == 0x80) piece.remove_prefix(1);
  piece.remove_suffix(incompleteUtf8Tail(piece));
  return piece;
}

// Writes full shards out of `pending` (all of it with `last`).
Status flushShards(std::vector<std::uint16_t>& pending, std::int64_t shardTokens, bool last,
                   const std::filesystem::path& dir, EncodedCorpus& out) {
  std::size_t taken = 0;
  while (pending.size() - taken >= std::size_t(shardTokens) || (last && taken < pending.size())) {
    if (out.shards.size() >= std::size_t(kMaxPreparedShards))
      return makeError("more than " + std::to_string(kMaxPreparedShards) + " shards: raise --shard-tokens");
    const std::size_t n = std::min(pending.size() - taken, std::size_t(shardTokens));
    const std::vector<std::uint16_t> shard(pending.begin() + std::ptrdiff_t(taken),
                                           pending.begin() + std::ptrdiff_t(taken + n));
    if (auto s = writeTokenShard((dir / trainShardName(int(out.shards.size()))).string(), shard); !s) return s;
    out.shards.push_back(std::int64_t(n));
    out.trainTokens += std::int64_t(n);
    taken += n;
  }
  pending.erase(pending.begin(), pending.begin() + std::ptrdiff_t(taken));
  return {};
}

// The passes read the files again: one edited meanwhile would split the text where it no longer
// is (or loop on text that is not there).
std::string changedUnderUs() {
  return "the corpus changed while create-run read it (its size differs from the first read): run it again";
}

}  // namespace

Expected<std::int64_t> measureCorpus(const std::vector<std::string>& files, std::int64_t maxBytes,
                                     const FractionFn& progress) {
  CorpusStream stream(files);
  std::string chunk;
  for (;;) {
    chunk.clear();
    auto more = stream.next(chunk);
    if (!more) return makeError(more.error());
    if (!*more) break;
    if (stream.position() > maxBytes)
      return makeError("the corpus' text exceeds " + std::to_string(maxBytes >> 20) + " MiB (after decompression)");
    progress(stream.filesDone());
  }
  if (stream.position() == 0) return makeError("the corpus is empty: its files hold no text");
  return stream.position();
}

Expected<CorpusSplit> splitCorpus(const std::vector<std::string>& files, std::int64_t total, double valFraction,
                                  bool wholeIsTraining, const FractionFn& progress, std::int64_t sampleBytes) {
  const std::int64_t tail =
      std::min(kMaxValidationTextBytes, std::max<std::int64_t>(1, std::int64_t(double(total) * valFraction)));
  const std::int64_t cut = wholeIsTraining ? total : total - tail;
  const std::int64_t lineFloor = cut > 2 * std::int64_t(kLookahead) ? cut - std::int64_t(kLookahead) : cut / 2;
  const auto pieces = samplePieces(cut, sampleBytes);
  std::vector<std::string> taken(pieces.size());
  std::int64_t lastBreak = -1;  // the last '\n' at or before cut
  std::string atCut;            // bytes [cut - 3, cut]: where a cut without a line break may move
  CorpusStream stream(files);
  std::string chunk;
  std::size_t piece = 0;
  for (;;) {
    chunk.clear();
    const std::int64_t at = stream.position();
    auto more = stream.next(chunk);
    if (!more) return makeError(more.error());
    if (!*more) break;
    const std::int64_t end = at + std::int64_t(chunk.size());
    for (std::int64_t i = std::min(end, cut + 1) - 1; i >= std::max(at, lastBreak + 1); --i)
      if (chunk[std::size_t(i - at)] == '\n') {
        lastBreak = i;
        break;
      }
    for (std::int64_t i = std::max(at, cut - 3); i <= std::min(end - 1, cut); ++i) atCut += chunk[std::size_t(i - at)];
    while (piece < pieces.size() && pieces[piece].first < end) {
      const auto [from, to] = pieces[piece];
      const std::int64_t a = std::max(from, at), b = std::min({to, end, cut});
      if (a < b) taken[piece].append(chunk, std::size_t(a - at), std::size_t(b - a));
      if (to > end && cut > end) break;  // the piece goes on in the next chunk
      ++piece;
    }
    progress(double(end) / double(total));
  }
  CorpusSplit split;
  split.total = total;
  if (wholeIsTraining) {
    split.trainEnd = total;
  } else if (lastBreak > lineFloor) {
    split.trainEnd = lastBreak + 1;
  } else {  // back from cut to a character's first byte (atCut holds bytes cut-3 .. cut)
    split.trainEnd = cut;
    for (std::size_t k = atCut.size(); k-- > 1 && (static_cast<unsigned char>(atCut[k]) & 0xc0) == 0x80;)
      --split.trainEnd;
  }
  for (std::size_t i = 0; i < pieces.size(); ++i) {
    auto text = std::string_view(taken[i]).substr(
        0, std::size_t(std::clamp<std::int64_t>(split.trainEnd - pieces[i].first, 0, std::int64_t(taken[i].size()))));
    if (pieces.size() > 1) text = wholeCharacters(text);
    if (text.empty()) continue;
    if (!split.sample.empty()) split.sample += "\n\n";
    split.sample.append(text);
  }
  return split;
}

Expected<EncodedCorpus> encodeCorpus(const std::vector<std::string>& files, const CorpusSplit& split,
                                     const BpeTokenizer& tokenizer, const std::string& dir, std::int64_t shardTokens,
                                     const FractionFn& progress) {
  EncodedCorpus out;
  CorpusStream stream(files);
  std::string pending;                // the text from `begin` on, as read so far
  std::int64_t begin = 0;             // where `pending` begins in the text
  std::vector<std::uint16_t> tokens;  // encoded, not yet in a shard
  bool over = false;
  const auto readTo = [&](std::int64_t want) -> Status {
    while (!over && begin + std::int64_t(pending.size()) < want) {
      auto more = stream.next(pending);
      if (!more) return makeError(more.error());
      over = !*more;
    }
    return {};
  };
  while (begin < split.trainEnd) {
    if (auto s = readTo(std::min(split.trainEnd, begin + std::int64_t(kSlice + kLookahead))); !s)
      return makeError(s.error());
    if (over && begin + std::int64_t(pending.size()) < split.trainEnd) return makeError(changedUnderUs());
    const auto view = std::string_view(pending).substr(0, std::size_t(split.trainEnd - begin));
    const std::size_t end = sliceEnd(view, 0);
    appendTokens(tokens, tokenizer.encode(view.substr(0, end)));
    pending.erase(0, end);
    begin += std::int64_t(end);
    if (out.trainTokens + std::int64_t(tokens.size()) > kMaxPreparedTrainTokens)
      return makeError("the corpus gives more than " + std::to_string(kMaxPreparedTrainTokens) + " training tokens");
    if (auto s = flushShards(tokens, shardTokens, begin == split.trainEnd, dir, out); !s) return makeError(s.error());
    progress(double(begin) / double(split.trainEnd));
  }
  if (auto s = readTo(split.total + 1); !s) return makeError(s.error());
  if (begin + std::int64_t(pending.size()) != split.total) return makeError(changedUnderUs());
  out.validation = encodeText(tokenizer, pending);
  return out;
}

Expected<std::vector<std::uint16_t>> encodeValidation(const std::vector<std::string>& files,
                                                      const BpeTokenizer& tokenizer) {
  CorpusStream stream(files);
  std::string text;
  for (;;) {
    auto more = stream.next(text);
    if (!more) return makeError(more.error());
    if (!*more) break;
    if (stream.position() > kMaxValidationTextBytes)
      return makeError("the validation text exceeds " + std::to_string(kMaxValidationTextBytes >> 20) + " MiB");
  }
  return encodeText(tokenizer, text);
}

}  // namespace es::train
