// A peer's ed25519 identity (libsodium), kept in one file in the data dir.
//
// File format (exactly 72 bytes): "ESID" · version byte 1 · 3 zero bytes · 32-byte seed ·
// 32-byte public key. The public key is stored so damage is detected: it must equal the key
// derived from the seed. The file is created with mode 0600; a file readable by group or others
// is refused (like ssh), and a damaged file is an error — never silently replaced, since the key
// is the peer's reputation in its runs.
#pragma once

#include "core/common/expected.h"
#include "p2p/types.h"

#include <string>
#include <string_view>

namespace es::p2p {

class Identity {
 public:
  // Loads `path`; creates a new key there (0600, written atomically) when it does not exist.
  static Expected<Identity> loadOrCreate(const std::string& path);
  static Expected<Identity> load(const std::string& path);
  static Identity generate();                                          // in memory only
  static Identity fromSeed(const std::array<std::uint8_t, 32>& seed);  // deterministic (tests)

  const PublicKey& publicKey() const { return publicKey_; }
  std::string peerId() const { return peerIdOf(publicKey_); }
  Signature sign(std::string_view message) const;

 private:
  Identity() = default;
  std::array<std::uint8_t, 64> secretKey_{};  // libsodium's layout: seed ‖ public key
  PublicKey publicKey_{};
};

bool verifySignature(const PublicKey& key, std::string_view message, const Signature& signature);

}  // namespace es::p2p
