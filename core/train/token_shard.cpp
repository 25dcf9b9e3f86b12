#include "core/train/token_shard.h"

#include "core/common/atomic_file.h"

#include <algorithm>
#include <cstring>
#include <string_view>

namespace es::train {
namespace {

constexpr std::string_view kMagic = "ESTOKEN1";
constexpr std::size_t kHeaderSize = 16;

// Explicit little-endian byte order keeps the files portable whatever the host is.
void putU64(char* out, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((v >> (8 * i)) & 0xffu);
}

std::uint64_t getU64(const char* in) {
  std::uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= std::uint64_t{static_cast<unsigned char>(in[i])} << (8 * i);
  return v;
}

}  // namespace

Status writeTokenShard(const std::string& path, const std::vector<std::uint16_t>& tokens) {
  return writeFileAtomically(path, [&](int fd) -> std::string {
    char header[kHeaderSize];
    std::memcpy(header, kMagic.data(), kMagic.size());
    putU64(header + 8, tokens.size());
    if (auto error = writeAll(fd, header, sizeof header); !error.empty()) return error;
    // Converted in blocks so a 100M-token shard does not need a second full-size buffer.
    constexpr std::size_t kBlock = 1 << 16;
    std::vector<char> block(2 * kBlock);
    for (std::size_t begin = 0; begin < tokens.size(); begin += kBlock) {
      const std::size_t count = std::min(kBlock, tokens.size() - begin);
      for (std::size_t i = 0; i < count; ++i) {
        block[2 * i] = static_cast<char>(tokens[begin + i] & 0xffu);
        block[2 * i + 1] = static_cast<char>(tokens[begin + i] >> 8);
      }
      if (auto error = writeAll(fd, block.data(), 2 * count); !error.empty()) return error;
    }
    return {};
  });
}

Expected<std::vector<std::uint16_t>> readTokenShard(const std::string& path) {
  auto bytes = readWholeFile(path);
  if (!bytes) return makeError(bytes.error());
  const std::string& data = *bytes;
  const auto fail = [&](const std::string& why) { return makeError("token shard \"" + path + "\": " + why); };
  if (data.size() < kHeaderSize) return fail("truncated header (" + std::to_string(data.size()) + " bytes)");
  if (std::string_view(data.data(), kMagic.size()) != kMagic) return fail("bad magic (not an ESTOKEN1 file)");
  const std::uint64_t count = getU64(data.data() + 8);
  const std::uint64_t payload = data.size() - kHeaderSize;
  // Compare without computing 2 * count, which a corrupt header could overflow.
  if (payload % 2 != 0 || payload / 2 != count)
    return fail("header says " + std::to_string(count) + " tokens but the file holds " + std::to_string(payload) +
                " payload bytes" + (payload / 2 < count ? " (truncated)" : ""));
  std::vector<std::uint16_t> tokens(count);
  const auto* p = reinterpret_cast<const unsigned char*>(data.data() + kHeaderSize);
  for (std::size_t i = 0; i < count; ++i) tokens[i] = static_cast<std::uint16_t>(p[2 * i] | (p[2 * i + 1] << 8));
  return tokens;
}

}  // namespace es::train
