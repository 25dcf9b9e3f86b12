#include "core/common/hex_bits.h"

#include <cmath>
#include <cstdint>
#include <cstring>

namespace es {
namespace {
constexpr std::size_t kHexDigits = 16;
}

std::string doubleAsHex(double value) {
  std::uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  static const char* digits = "0123456789abcdef";
  std::string hex(kHexDigits, '0');
  for (std::size_t k = kHexDigits; k-- > 0; bits >>= 4) hex[k] = digits[bits & 0xf];
  return hex;
}

Expected<double> hexAsDouble(const std::string& hex) {
  if (hex.size() != kHexDigits) return makeError("not 16 hex digits");
  std::uint64_t bits = 0;
  for (const char c : hex) {
    const bool digit = c >= '0' && c <= '9', letter = c >= 'a' && c <= 'f';
    if (!digit && !letter) return makeError("not 16 lower-case hex digits");
    bits = bits << 4 | std::uint64_t(digit ? c - '0' : c - 'a' + 10);
  }
  double value = 0;
  std::memcpy(&value, &bits, sizeof value);
  if (!std::isfinite(value)) return makeError("not a finite number");
  return value;
}

}  // namespace es
