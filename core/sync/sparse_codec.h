// Sparse deltas (issue 39, first step: the codec and its error feedback, measured in the simulator
// through bench/spes_quality; not yet a run's `swarm.compression`, so no contribution file, size
// prediction or fuzz target knows it). The scheme is SparseLoCo's shape (arXiv 2508.15706: per-chunk
// top-k with error feedback), with int8 values instead of its 2 bits until a measurement says the
// fewer bits hold:
//   every tensor, flattened, is cut into chunks of `chunk` elements (the last may be shorter);
//   each chunk keeps its `keep` entries of largest |x| (ties: the lower index; all of a chunk
//   shorter than `keep`), stored as
//     <name>          int8  [kept]     q = round-half-even(x / s), s = max|kept| / 127
//     <name>.__index  int16 [kept]     the entry's index inside its chunk (chunk <= 32768)
//     <name>.__scale  f32   [chunks]   s per chunk (0 for a zero chunk)
//   in chunk order. Bytes per element ~ keep / chunk × 3 + 4 / chunk: keep 64 of 4096 is 1.2 % of f32.
// Error feedback: what a peer did not send (its delta plus its residual, minus what the others
// decode) is its new residual and is added to its next delta, so nothing is lost, only late.
#pragma once

#include "core/checkpoint/safetensors.h"
#include "core/common/expected.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace es::sync {

struct SparseSpec {
  std::int64_t chunk = 4096;
  std::int64_t keep = 64;
};

// Encoded tensors (sorted by name). Requires 0 < keep <= chunk <= 32768.
ckpt::NamedTensors encodeSparse(const ckpt::NamedTensors& deltas, SparseSpec spec);

// Back to float32 tensors of the given shapes (name → sizes: every peer knows the model's), zeros
// where nothing was sent. Strict: a tensor missing or left over, a wrong dtype, count or index, a
// negative or non-finite scale is an error.
Expected<ckpt::NamedTensors> decodeSparse(const ckpt::NamedTensors& encoded, SparseSpec spec,
                                          const std::map<std::string, std::vector<std::int64_t>>& shapes);

// One peer's error feedback: the residual of each tensor it sent (none before its first round).
class ErrorFeedback {
 public:
  // delta + residual, per tensor: what the peer encodes this round.
  ckpt::NamedTensors corrected(const ckpt::NamedTensors& deltas) const;
  // After sending: residual = corrected − what the receivers decode.
  void keepUnsent(const ckpt::NamedTensors& corrected, const ckpt::NamedTensors& decoded);
  const std::map<std::string, at::Tensor>& residual() const { return residual_; }

 private:
  std::map<std::string, at::Tensor> residual_;
};

}  // namespace es::sync
