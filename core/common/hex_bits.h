// A float64 as the 16 hex digits of its bits, and back: how a file states a figure every peer must
// read to the last bit (shard_figures_file.h, merged_shard_file.h) — no decimal round trip can move
// it, and each value has one spelling (the files' bytes are hashed).
#pragma once

#include "core/common/expected.h"

#include <string>

namespace es {

std::string doubleAsHex(double value);

// Exactly 16 lower-case hex digits of a finite value.
Expected<double> hexAsDouble(const std::string& hex);

}  // namespace es
