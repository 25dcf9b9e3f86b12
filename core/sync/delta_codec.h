// Delta codec: how a contribution's deltas travel (docs/ARCHITECTURE.md, "Swarm protocol",
// Contribution).
//   f32   as is
//   bf16  rounded to bfloat16 (round-to-nearest-even)
//   int8  per-row absmax: row r of a tensor viewed as [rows, last dim] (a 1-D or 0-D tensor is one
//         row) is stored as int8 q = round(x / s_r), s_r = max|x_r| / 127 (s_r = 0 for a zero row),
//         plus a float32 tensor "<name>.__scale" of shape [rows]. Arithmetic in float32, ties
//         to even; decoding rejects a negative or non-finite scale.
#pragma once

#include "core/checkpoint/safetensors.h"
#include "core/common/expected.h"

#include <map>
#include <string>

namespace es::sync {

enum class Codec { F32, BF16, Int8 };

std::string codecName(Codec codec);  // "f32", "bf16", "int8"
Expected<Codec> parseCodec(const std::string& name);

// Encoded tensors, ready to save (sorted by name, as safetensors stores them).
ckpt::NamedTensors encodeDeltas(const ckpt::NamedTensors& deltas, Codec codec);

// Back to float32. Strict: a missing or misshapen scale, a wrong dtype or a stray tensor is an error.
Expected<ckpt::NamedTensors> decodeDeltas(const ckpt::NamedTensors& encoded, Codec codec);

// Max |decode(encode(x)) − x| per tensor, for reports.
std::map<std::string, double> codecError(const ckpt::NamedTensors& deltas, Codec codec);

// Bytes the encoded tensors occupy (payload only, without the file header).
std::int64_t encodedBytes(const ckpt::NamedTensors& encoded);

}  // namespace es::sync
