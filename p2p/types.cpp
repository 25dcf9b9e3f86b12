#include "p2p/types.h"

#include <sodium.h>

#include <cstdio>
#include <cstdlib>

namespace es::p2p {
namespace detail {

// Shared by every p2p source that calls libsodium (declared where used; there is no private
// header). sodium_init is idempotent and thread-safe, the static only saves the repeated call.
void ensureSodium() {
  static const bool ready = sodium_init() >= 0;
  if (!ready) {
    // Only fails when the CPU/OS cannot provide what libsodium needs (e.g. no randomness):
    // nothing sensible can run without keys, and generate()/sign() have no error channel.
    std::fputs("expertswarm: libsodium failed to initialise\n", stderr);
    std::abort();
  }
}

}  // namespace detail

std::string toHex(const std::uint8_t* data, std::size_t size) {
  static const char kDigits[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(size * 2);
  for (std::size_t i = 0; i < size; ++i) {
    hex += kDigits[data[i] >> 4];
    hex += kDigits[data[i] & 0x0f];
  }
  return hex;
}

namespace {

int hexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::optional<PublicKey> publicKeyFromHex(std::string_view hex) {
  PublicKey key{};
  if (hex.size() != key.size() * 2) return std::nullopt;
  for (std::size_t i = 0; i < key.size(); ++i) {
    const int hi = hexValue(hex[2 * i]);
    const int lo = hexValue(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    key[i] = static_cast<std::uint8_t>(hi << 4 | lo);
  }
  return key;
}

std::string peerIdOf(const PublicKey& key) {
  detail::ensureSodium();
  std::array<std::uint8_t, 20> digest{};
  crypto_generichash(digest.data(), digest.size(), key.data(), key.size(), nullptr, 0);
  return toHex(digest.data(), digest.size());
}

}  // namespace es::p2p
