// Deterministic batches: batch number `cursor` of a run is a pure function of (tokens, seed,
// cursor), so a resumed or replayed peer sees exactly the same data, and the training state only
// needs to store the cursor. Windows start at offsets drawn by a counter-based hash (SplitMix64),
// not a stateful RNG.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <memory>
#include <vector>

namespace es::train {

using TokenBuffer = std::shared_ptr<const std::vector<std::uint16_t>>;

struct Batch {
  torch::Tensor inputs;   // [B, T] int64
  torch::Tensor targets;  // [B, T] int64: inputs shifted by one token
};

class BatchSampler {
 public:
  // Needs at least seqLen + 1 tokens.
  BatchSampler(TokenBuffer tokens, int seqLen, int batchSize, std::uint64_t seed);

  // Random windows for training step `cursor`.
  Batch at(std::uint64_t cursor) const;

  // The fixed validation slice: consecutive windows starting at token 0, batch `index` of them.
  // Returns an empty batch when the tokens run out.
  Batch sequential(int index) const;

  std::size_t tokenCount() const { return tokens_->size(); }

 private:
  Batch fromOffsets(const std::vector<std::int64_t>& offsets) const;

  TokenBuffer tokens_;
  int seqLen_;
  int batchSize_;
  std::uint64_t seed_;
};

std::uint64_t splitMix64(std::uint64_t x);

}  // namespace es::train
