// When a claim on an expert counts: the one lease rule that p2p/leases.cpp (ownership, the experts
// a joining peer takes) and core/node (live peers, the claims' drift between rounds) both apply,
// so every path computes the same owners. Plain integers: core/ and p2p/ can both include it.
#pragma once

#include <cstdint>
#include <limits>

namespace es {

// A peer that merged first is one round ahead of the one judging its record: it announces the
// next round, so its lease reaches round + 1 + lease_rounds. One round of slack admits that and
// no more (an honest peer is never two rounds ahead: it waits for the round's contributions).
inline constexpr std::int64_t kLeaseSlackRounds = 1;

namespace detail {
constexpr std::int64_t saturatingAdd(std::int64_t a, std::int64_t b) {  // b >= 0; records are untrusted
  return a > std::numeric_limits<std::int64_t>::max() - b ? std::numeric_limits<std::int64_t>::max() : a + b;
}
}  // namespace detail

// Whether a record of round `recordRound` with lease `leaseUntil` holds its claims at `round`.
// An honest peer announces leaseUntil = its round + lease_rounds exactly. A lease past its own
// round + lease_rounds + slack comes only from a peer that ignores the protocol (e.g. "until
// 2^62"), so it counts for nothing rather than being clamped: clamping would still hand it
// lease_rounds of every expert it names, renewed by each record for free. The bound against
// `round` (the judge's) stops a record whose own round is in the far future from holding forever.
constexpr bool leaseHolds(std::int64_t recordRound, std::int64_t leaseUntil, std::int64_t round, int leaseRounds) {
  const std::int64_t longest = std::int64_t{leaseRounds > 0 ? leaseRounds : 0} + kLeaseSlackRounds;
  // leaseUntil >= round >= 0 here, so leaseUntil - longest cannot overflow.
  return leaseUntil >= round && leaseUntil <= detail::saturatingAdd(round, longest) &&
         leaseUntil - longest <= recordRound;
}

}  // namespace es
