// Identity work (issue 15, item 1: Sybils). A key pair costs microseconds, so counting keys —
// a newcomer's first snapshot vote, the record book's slots — counts whatever a flooder wants.
// Each key therefore carries a proof of work, S/Kademlia's "static crypto puzzle" with a nonce:
// BLAKE2b-256("expertswarm identity work v1" ‖ public key ‖ nonce, 8 bytes little-endian) must
// start with at least the run's `swarm.identity_work_bits` zero bits. The nonce travels in every
// signed record (`work`) and is checked with one hash before the signature (a flood costs the
// flooder 2^bits hashes per key and us one hash per record).
//
// The proof belongs to the key, not to a run: it is found once and kept beside the key in a
// public file (identity.work, "<public key hex> <nonce>"), found again only for a run that asks
// for more bits. Nothing in it is secret; a damaged or foreign file is simply worked out again.
#pragma once

#include "core/common/expected.h"
#include "p2p/types.h"

#include <cstdint>
#include <string>

namespace es::p2p {

// 30 bits: ~2^30 hashes, about 3 minutes on one core of the development machine (169 ns a hash).
// A run manifest may not ask more (joining would take hours); records carry nonces below 2^63.
constexpr int kMaxIdentityWorkBits = 30;

// Leading zero bits of the puzzle's hash for (key, nonce): 0–256.
int identityWorkBits(const PublicKey& key, std::int64_t nonce);

// The smallest nonce ≥ 0 whose hash has at least `bits` leading zero bits (bits ≤ kMaxIdentityWorkBits).
std::int64_t solveIdentityWork(const PublicKey& key, int bits);

struct IdentityWork {
  std::int64_t nonce = 0;
  int bits = 0;         // what the nonce achieves (≥ the bits asked for)
  bool solved = false;  // worked out now (not read from the file)
  double seconds = 0;   // time spent solving
};

// The proof kept at `path` for `key` when it has `bits`; else solved and written there (atomically).
Expected<IdentityWork> loadOrSolveIdentityWork(const std::string& path, const PublicKey& key, int bits);

}  // namespace es::p2p
