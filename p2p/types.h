// Plain value types that cross the p2p boundary. Nothing here knows libtorrent or libsodium, so
// core/node and ui/ can use them.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace es::p2p {

using PublicKey = std::array<std::uint8_t, 32>;  // ed25519
using Signature = std::array<std::uint8_t, 64>;  // ed25519, detached

// Lower-case hex of bytes; fromHex accepts exactly 2·N hex digits (either case).
std::string toHex(const std::uint8_t* data, std::size_t size);
inline std::string toHex(const PublicKey& key) { return toHex(key.data(), key.size()); }
std::optional<PublicKey> publicKeyFromHex(std::string_view hex);

// A peer's short, stable name: hex of BLAKE2b-160 of its public key (40 characters).
std::string peerIdOf(const PublicKey& key);

}  // namespace es::p2p
