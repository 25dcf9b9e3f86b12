// Our byte-level BPE (core/train/bpe_tokenizer.h) in the Hugging Face `tokenizers` library's
// format (tokenizer.json), so that AutoTokenizer encodes every text to exactly our token ids.
//
// How it maps (issue 17, item 2):
//  - ids: byte b is token b, merge i makes token 256 + i, as in our vocabulary; token strings use
//    GPT-2's byte-to-character table (the ByteLevel alphabet), so byte 0x20 is "Ġ";
//  - merges: ours in rank order, as "left right" strings; BPE applies them lowest rank first,
//    leftmost first among equal ranks, as our encoder does;
//  - pre-tokenizer: our chunking (bpe_pretokenize.cpp) is not GPT-2's regex (ASCII classes, every
//    non-ASCII character a letter, contractions only at a word's end), so the export uses a Split
//    with pretokenizePattern() (the same chunks, shown equal by tst_export_hf on real and random
//    text), then ByteLevel without its own regex.
// No Torch, no Qt: JSON text from the tokenizer alone.
#pragma once

#include "core/common/expected.h"
#include "core/train/bpe_tokenizer.h"

#include <string>

namespace es::hf {

// Our chunker (bpe_detail::chunkEnd) as an Oniguruma regex: each alternative is one branch of
// chunkEnd, in the same order.
const std::string& pretokenizePattern();

// tokenizer.json. Error when two tokens decode to the same bytes (tokenizer.json maps a string to
// one id, so such a vocabulary cannot be expressed).
Expected<std::string> tokenizerJson(const train::BpeTokenizer& tokenizer);

// tokenizer_config.json: a PreTrainedTokenizerFast with no special tokens (our runs have none)
// and the model's context length.
std::string tokenizerConfigJson(int modelMaxLength);

// GPT-2's table: the printable character standing for byte b, as UTF-8.
std::string byteLevelChar(unsigned char b);

}  // namespace es::hf
