// Byte-level BPE tokenizer: 256 byte tokens plus learned merges. Encodes any byte string (invalid
// UTF-8 included) and decodes it back exactly. Training is deterministic: the same text and vocab
// size always give the same merges (ties broken by the pair's token ids, never by hash order).
//
// Text is first split into chunks (GPT-2 style: a word with its leading space, a number, a run
// of punctuation, a run of whitespace, an English contraction such as 's) so merges never cross
// word boundaries. Bytes >= 0x80 count as letters, so UTF-8 characters stay inside words. This is not
// SentencePiece (see docs: its protobuf crashes beside Debian's LibTorch).
#pragma once

#include "core/common/expected.h"

#include <cstdint>
#include <stdexcept>  // decode() throws std::out_of_range
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace es::train {

using TokenId = std::uint32_t;

class BpeTokenizer {
 public:
  // A tokenizer with no merges: one token per byte (vocab 256).
  BpeTokenizer();

  // Learns (vocabSize - 256) merges from `text`; stops early if no pair occurs twice.
  // vocabSize must be in [256, 65536] (token ids are stored as uint16 on disk).
  static Expected<BpeTokenizer> train(std::string_view text, int vocabSize);

  // Thread-safe: the chunk cache lives inside each call, so one tokenizer may encode on many threads.
  std::vector<TokenId> encode(std::string_view text) const;
  // Ids >= vocabSize() throw std::out_of_range: silently skipping them would hide corrupt data.
  std::string decode(const std::vector<TokenId>& ids) const;

  int vocabSize() const { return 256 + static_cast<int>(merges_.size()); }
  // merges()[i] = (left, right) became token 256 + i.
  const std::vector<std::pair<TokenId, TokenId>>& merges() const { return merges_; }

  // JSON: {"type":"byte-bpe","version":1,"vocab_size":N,"merges":[[l,r],...]}.
  std::string toJson() const;
  static Expected<BpeTokenizer> fromJson(std::string_view json);
  Status save(const std::string& path) const;  // atomic: temp file + rename
  static Expected<BpeTokenizer> load(const std::string& path);

 private:
  explicit BpeTokenizer(std::vector<std::pair<TokenId, TokenId>> merges);
  // Appends the tokens of one pre-tokenized chunk to `out`.
  void encodeChunk(std::string_view chunk, std::vector<TokenId>& out) const;

  std::vector<std::pair<TokenId, TokenId>> merges_;
  std::unordered_map<std::uint64_t, TokenId> ranks_;  // (left << 32 | right) -> merge index
  std::vector<std::string> tokenBytes_;               // id -> the bytes it decodes to
};

}  // namespace es::train
