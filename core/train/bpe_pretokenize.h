// Pre-tokenization for the byte-level BPE (bpe_tokenizer.h): splits text into chunks that merges
// never cross. Shared by training (bpe_training.cpp) and encoding (bpe_tokenizer.cpp).
#pragma once

#include "core/train/bpe_tokenizer.h"

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace es::train::bpe_detail {

using PairKey = std::uint64_t;
inline PairKey pairKey(TokenId left, TokenId right) { return (PairKey{left} << 32) | right; }

// End of the chunk that starts at byte i of s (lossless: chunks concatenate back to s).
std::size_t chunkEnd(std::string_view s, std::size_t i);

template <typename Fn>
void forEachChunk(std::string_view text, Fn&& fn) {
  for (std::size_t i = 0; i < text.size();) {
    const std::size_t end = chunkEnd(text, i);
    fn(text.substr(i, end - i));
    i = end;
  }
}

}  // namespace es::train::bpe_detail
