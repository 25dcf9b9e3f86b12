// create-run's passes over a corpus (run_create.h), each streaming (corpus_text.h's CorpusStream)
// so that memory stays bounded whatever the corpus' size: 1) measure the text; 2) find where the
// held-out validation tail begins and take the tokenizer's sample; 3) tokenize the training text
// into shards on disk as it passes, then the validation text. Reading costs a few seconds a GiB;
// the tokenizer's training and encoding cost the rest, so three reads are cheaper than holding
// the text (the 256 MiB cap this replaced).
#pragma once

#include "core/common/expected.h"
#include "core/train/bpe_tokenizer.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace es::train {

// The tokenizer learns its merges from at most this much of the training text: all of it below,
// evenly spread pieces of it above (a BPE's merges settle long before 256 MiB of one language).
constexpr std::int64_t kTokenizerSampleBytes = std::int64_t(64) << 20;
// The held-out validation text is at most this much (a fraction of a 100 GB corpus would be
// gigabytes that every peer evaluates on and downloads).
constexpr std::int64_t kMaxValidationTextBytes = std::int64_t(64) << 20;

using FractionFn = std::function<void(double)>;

// Pass 1: bytes of the joined text (an error past `maxBytes`).
Expected<std::int64_t> measureCorpus(const std::vector<std::string>& files, std::int64_t maxBytes,
                                     const FractionFn& progress);

struct CorpusSplit {
  std::int64_t total = 0;     // bytes of the joined text
  std::int64_t trainEnd = 0;  // the training text is [0, trainEnd), the validation tail the rest
  std::string sample;         // what the tokenizer learns from
};

// Pass 2: the validation tail begins after the line break nearest `valFraction` of the text from
// its end (one within 1 MiB before that point), else at a UTF-8 character boundary there; with
// `wholeIsTraining` (validation given apart) the training text is all of it. The sample is the
// training text whole up to `sampleBytes`, else 1024 evenly spaced pieces of it, `sampleBytes` in all.
Expected<CorpusSplit> splitCorpus(const std::vector<std::string>& files, std::int64_t total, double valFraction,
                                  bool wholeIsTraining, const FractionFn& progress,
                                  std::int64_t sampleBytes = kTokenizerSampleBytes);

struct EncodedCorpus {
  std::vector<std::int64_t> shards;  // tokens in each data/train-NNN.bin written
  std::int64_t trainTokens = 0;
  std::vector<std::uint16_t> validation;  // the tail's tokens (none with `wholeIsTraining`)
};

// Pass 3: the training text's tokens into `dir`/train-NNN.bin of `shardTokens` each, the tail's
// kept. The text is encoded in slices of ~4 MiB cut at blank lines (where the pre-tokenizer cuts
// anyway), so the tokens are fixed by the text.
Expected<EncodedCorpus> encodeCorpus(const std::vector<std::string>& files, const CorpusSplit& split,
                                     const BpeTokenizer& tokenizer, const std::string& dir, std::int64_t shardTokens,
                                     const FractionFn& progress);

// A validation set given apart: its files' text (at most kMaxValidationTextBytes), tokenized.
Expected<std::vector<std::uint16_t>> encodeValidation(const std::vector<std::string>& files,
                                                      const BpeTokenizer& tokenizer);

}  // namespace es::train
