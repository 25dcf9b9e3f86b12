// Issue 38, step 1: which peers reduce which shard (shard_plan.h) in a round. Every peer computes
// the same plan from what every peer holds: the candidates are the senders the work ledger's
// latest two rounds merged (work_ledger.h, part of the agreed state — so a fresh key cannot make itself
// a reducer), the seed is the previous round's agreed fingerprint (not known before that round
// closed, so nobody picks its shards in advance).
//
// Why not plain rendezvous hashing (each shard's R highest-scoring peers): its busiest peer
// reduces well over the mean (balls into bins: 1.45 × at 16 peers, 1.6 × at 64, 1.8 × at 256 —
// the median of 200 draws of random R = 3 choices over equal shards), and the busiest peer's
// bytes are what the issue bounds. Here shards are dealt in plan order to the least-loaded
// candidates (load = elements to reduce), ties broken by a per-shard hash rank — as unpredictable
// as rendezvous, and the busiest peer reduces about one shard more than an even share at most
// (greedy to the least loaded; owners, who take their expert's shards whatever their load, aside:
// tst_reduction_plan bounds it by two of the largest). An expert's
// owners come first for its shards (they hold their own part already). The rest of each shard's
// order is the replacement list: a reducer that does not deliver is replaced by the next.
#pragma once

#include "core/sync/shard_plan.h"
#include "core/sync/work_ledger.h"

#include <map>
#include <set>
#include <string>
#include <vector>

namespace es::sync {

// The senders one of the ledger's latest two rounds merged (merged work, and here lately), in id
// order. Not every sender with merged work: a peer that left stays in the ledger for
// kForgetRounds, and as a reducer it was given up and its shards recomputed by every peer, every
// round (bench/reduction_processes --kill 2: rounds 3, 4 and 5 alike); nor should the switch wait
// that long to go back to all-to-all when the swarm shrinks. Two rounds, not one: a peer one round
// out of step (its contribution of the other state, a snapshot taken) still counts, so the
// topology does not flip under it — one that differs from the swarm's has its contribution refused
// for its shape, as a lie (not told apart from one yet).
std::vector<std::string> reducerCandidates(const WorkLedger& ledger);

// For each shard (plan order) every candidate, the `replicas` reducers first (fewer when there are
// fewer candidates), then the replacements. `owners`: expert → its owners this round.
std::vector<std::vector<std::string>> assignReducers(const std::vector<Shard>& shards,
                                                     const std::vector<std::string>& candidates,
                                                     const std::map<int, std::set<std::string>>& owners,
                                                     const std::string& seed, int replicas);

// A 64-bit hash of (seed, shard, peer): FNV-1a, then splitmix64's finaliser to spread its bits.
// Not keyed: an attacker can compute it, but the seed is the previous round's agreed state.
std::uint64_t reducerRank(const std::string& seed, const std::string& shard, const std::string& peer);

}  // namespace es::sync
