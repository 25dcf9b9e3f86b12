// The codec a contribution's header names, and the file's tensors to and from decoded deltas:
// a dense codec (delta_codec.h: "f32", "bf16", "int8") or a sparse one ("sparse/<keep>/<chunk>",
// sparse_layout.h, sparse_codec.h). The one place contribution files and the peer turn a codec's
// name into tensors.
//
// Sparse files say each delta's shape; a decoded tensor is allocated from it, so decoding first
// holds the shapes to the model's (`expected`, what every receiver knows) or, without them (the
// fuzz target, tools), to kMaxSparseDecodedElements in all — a file of a few bytes per chunk must
// not make a receiver allocate gigabytes.
#pragma once

#include "core/checkpoint/safetensors.h"
#include "core/common/expected.h"
#include "core/sync/delta_codec.h"
#include "core/sync/sparse_layout.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace es::sync {

using TensorShapes = std::map<std::string, std::vector<std::int64_t>>;

// Without expected shapes, the most elements a sparse contribution may decode to (the bundled
// model has 15.7 M parameters; 2^28 float32 is 1 GiB).
inline constexpr std::int64_t kMaxSparseDecodedElements = std::int64_t{1} << 28;

struct ContributionCodec {
  std::optional<Codec> dense;  // f32, bf16, int8
  SparseSpec sparse;           // when not dense
  bool isSparse() const { return !dense.has_value(); }
};

Expected<ContributionCodec> parseContributionCodec(const std::string& name);

// Encoded tensors, sorted by name, ready to save.
ckpt::NamedTensors encodeContribution(const ckpt::NamedTensors& deltas, const ContributionCodec& codec);

// Back to float32 deltas, sorted by name. Strict (delta_codec.h, sparse_codec.h); for a sparse
// codec every "<name>.__shape" must be a 1-D int64 of at most 8 non-negative sizes and, with
// `expected`, name a tensor there of exactly that shape.
Expected<ckpt::NamedTensors> decodeContribution(const ckpt::NamedTensors& encoded, const ContributionCodec& codec,
                                                const TensorShapes* expected = nullptr);

}  // namespace es::sync
