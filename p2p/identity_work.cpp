#include "p2p/identity_work.h"

#include "core/common/atomic_file.h"

#include <sodium.h>

#include <array>
#include <chrono>
#include <cstring>
#include <optional>
#include <sstream>

namespace es::p2p {
namespace detail {
void ensureSodium();  // types.cpp
}

namespace {

constexpr char kDomain[] = "expertswarm identity work v1";
constexpr std::size_t kDomainBytes = sizeof kDomain - 1;
constexpr std::size_t kInputBytes = kDomainBytes + 32 + 8;

using Input = std::array<std::uint8_t, kInputBytes>;

Input puzzleInput(const PublicKey& key) {
  Input input{};
  std::memcpy(input.data(), kDomain, kDomainBytes);
  std::memcpy(input.data() + kDomainBytes, key.data(), key.size());
  return input;
}

int leadingZeroBits(const Input& input, std::int64_t nonce, Input& scratch) {
  scratch = input;
  auto value = static_cast<std::uint64_t>(nonce);
  for (std::size_t i = 0; i < 8; ++i, value >>= 8)
    scratch[kDomainBytes + 32 + i] = static_cast<std::uint8_t>(value & 0xff);
  std::array<std::uint8_t, 32> hash{};
  crypto_generichash(hash.data(), hash.size(), scratch.data(), scratch.size(), nullptr, 0);
  int bits = 0;
  for (const std::uint8_t byte : hash) {
    if (byte != 0) return bits + __builtin_clz(static_cast<unsigned>(byte)) - 24;
    bits += 8;
  }
  return bits;
}

// "<64 hex digits> <decimal nonce>\n", nothing else.
std::optional<std::int64_t> parseWorkFile(const std::string& text, const PublicKey& key) {
  std::istringstream in(text);
  std::string hex, nonceText, rest;
  if (!(in >> hex >> nonceText) || (in >> rest)) return std::nullopt;
  if (hex != toHex(key) || nonceText.empty() || nonceText.size() > 18) return std::nullopt;
  for (const char c : nonceText)
    if (c < '0' || c > '9') return std::nullopt;
  return std::stoll(nonceText);
}

}  // namespace

int identityWorkBits(const PublicKey& key, std::int64_t nonce) {
  detail::ensureSodium();
  if (nonce < 0) return 0;
  Input scratch{};
  return leadingZeroBits(puzzleInput(key), nonce, scratch);
}

std::int64_t solveIdentityWork(const PublicKey& key, int bits) {
  detail::ensureSodium();
  const Input input = puzzleInput(key);
  Input scratch{};
  std::int64_t nonce = 0;
  while (leadingZeroBits(input, nonce, scratch) < bits) ++nonce;
  return nonce;
}

Expected<IdentityWork> loadOrSolveIdentityWork(const std::string& path, const PublicKey& key, int bits) {
  if (bits < 0 || bits > kMaxIdentityWorkBits)
    return makeError("identity work of " + std::to_string(bits) + " bits asked; at most " +
                     std::to_string(kMaxIdentityWorkBits));
  if (auto text = readWholeFile(path)) {
    if (const auto nonce = parseWorkFile(*text, key)) {
      const int have = identityWorkBits(key, *nonce);
      if (have >= bits) return IdentityWork{*nonce, have, false, 0};
    }
  }
  const auto start = std::chrono::steady_clock::now();
  IdentityWork work;
  work.nonce = solveIdentityWork(key, bits);
  work.bits = identityWorkBits(key, work.nonce);
  work.solved = true;
  work.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (auto s = writeFileAtomically(path, toHex(key) + " " + std::to_string(work.nonce) + "\n"); !s)
    return makeError("cannot keep the identity's work in \"" + path + "\": " + s.error());
  return work;
}

}  // namespace es::p2p
