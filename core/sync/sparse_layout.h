// The sparse codec's layout without Torch (issue 39; the codec itself: sparse_codec.h): its name
// in a contribution's header and a run's manifest, the tensors a sparse contribution stores, and
// how far one sent value may move a weight. The size predictor (fetch_size.h) lays files out with
// it, so a prediction is byte-exact.
//
// A contribution's codec "sparse/<keep>/<chunk>" (decimal, no sign or leading zero) names per
// chunk of `chunk` elements the `keep` largest |x|, int8 values. For each delta tensor `name` it
// stores
//   <name>          I8  [kept]    the values
//   <name>.__index  I16 [kept]    each value's index inside its chunk
//   <name>.__scale  F32 [chunks]  each chunk's scale
//   <name>.__shape  I64 [dims]    the delta's shape (a receiver checks it against the model's)
// with kept = full chunks × keep + min(keep, the last chunk's length).
#pragma once

#include "core/checkpoint/safetensors_format.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace es::sync {

struct SparseSpec {
  std::int64_t chunk = 4096;
  std::int64_t keep = 64;
  // 8: q in [-127, 127], s = max|kept| / 127 (the client's format). 2 (an experiment, simulator
  // only): q in {-2, -1, 1, 2} with s = mean|kept| / 1.5; still held in int8 tensors, its packed
  // size is sparseWireBytes' (sparse_codec.h).
  int valueBits = 8;
};

inline constexpr std::int64_t kMaxSparseChunk = 32768;  // indices are int16

// 0 < keep <= chunk <= kMaxSparseChunk, values of 8 or 2 bits.
bool validSparseSpec(const SparseSpec& spec);

// "sparse/<keep>/<chunk>" for 8-bit values; parseSparseCodec is its strict inverse (nothing for
// any other text, a 2-bit spec's name included).
std::string sparseCodecName(const SparseSpec& spec);
std::optional<SparseSpec> parseSparseCodec(const std::string& name);

std::int64_t sparseChunks(std::int64_t elements, const SparseSpec& spec);
std::int64_t sparseKept(std::int64_t elements, const SparseSpec& spec);

// The four tensors stored for a delta named `name` of `shape` (dtype, shape; offsets 0).
std::vector<ckpt::TensorInfo> sparseTensors(const std::string& name, const std::vector<std::int64_t>& shape,
                                            const SparseSpec& spec);

// The rounds of AdamW movement one sent value may carry: floor(√(chunk / keep)), at least 1. A
// sender's error feedback holds back what it did not send, so a sent value may carry several
// rounds; held to W rounds per element with keep·W² ≤ chunk, a contribution's L2 norm is at most
// what a dense one at the one-round ceiling has (docs/PERFORMANCE.md, "Sparse contributions").
int sparseWaitRounds(const SparseSpec& spec);

}  // namespace es::sync
