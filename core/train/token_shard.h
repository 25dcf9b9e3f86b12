// Token shard files: the tokenized corpus on disk.
//   bytes 0..7   magic "ESTOKEN1"
//   bytes 8..15  u64 little-endian token count N
//   bytes 16..   N x u16 little-endian token ids
// A vocabulary up to 65536 fits u16 (llm.c and nanoGPT store tokens the same way); the header
// lets a reader reject a truncated or foreign file instead of training on garbage.
#pragma once

#include "core/common/expected.h"

#include <cstdint>
#include <string>
#include <vector>

namespace es::train {

Status writeTokenShard(const std::string& path, const std::vector<std::uint16_t>& tokens);  // atomic
Expected<std::vector<std::uint16_t>> readTokenShard(const std::string& path);

}  // namespace es::train
