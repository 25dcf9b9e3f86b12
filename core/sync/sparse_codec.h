// Sparse deltas (issue 39): the codec and its error feedback. A run names it as its
// `swarm.compression` "sparse" (contributions: "sparse/<keep>/<chunk>", sparse_layout.h; files:
// contribution_codec.h). The scheme is SparseLoCo's shape (arXiv 2508.15706: per-chunk top-k with
// error feedback, its decay included), with int8 values instead of its 2 bits (measured:
// docs/PERFORMANCE.md, "Sparse contributions"):
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
#include "core/sync/sparse_layout.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace es::sync {

// Bytes a packed wire format would take for encodeSparse's output (an experiment: counted, not
// written): per tensor its values at valueBits each, each chunk's indices as Rice-coded gaps
// (the chunk's best parameter, 4 bits), bit-packed, plus a float32 scale per chunk.
std::int64_t sparseWireBytes(const ckpt::NamedTensors& encoded, SparseSpec spec);

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
  // SparseLoCo's decay of the residual (e <- decay * e + delta); 1: none, nothing is dropped.
  explicit ErrorFeedback(double decay = 1.0) : decay_(decay) {}
  // delta + residual, per tensor: what the peer encodes this round.
  ckpt::NamedTensors corrected(const ckpt::NamedTensors& deltas) const;
  // After sending: residual = corrected − what the receivers decode.
  void keepUnsent(const ckpt::NamedTensors& corrected, const ckpt::NamedTensors& decoded);
  const std::map<std::string, at::Tensor>& residual() const { return residual_; }
  // A residual restored (a resume, a rewrite from the value before the pending write) or dropped.
  void setResidual(std::map<std::string, at::Tensor> residual) { residual_ = std::move(residual); }

 private:
  double decay_ = 1.0;
  std::map<std::string, at::Tensor> residual_;
};

}  // namespace es::sync
