// Issue 38, protocol step 1 and item 5: how round r is reduced — all-to-all (every peer fetches
// every contribution) or sharded (shard plan, each shard's reducer order) — decided by every peer
// alike from what the state agreed after round r − 1 holds: the work ledger (its senders with
// merged work are the candidates: a fresh key counts for nothing, so keys cannot flip a run into
// sharding nor make themselves reducers), the model, the previous fingerprint (the reducers'
// seed) and the round's owners. The switch is reduction_bytes.h's shardingPays at the number of
// candidates; a run whose codec is sparse stays all-to-all (a shard file's top-k would be per
// piece, the error feedback is per tensor: SpesPeer::writeShardedContribution refuses it).
#pragma once

#include "core/model/model_config.h"
#include "core/sync/shard_plan.h"
#include "core/sync/work_ledger.h"

#include <map>
#include <set>
#include <string>
#include <vector>

namespace es::sync {

struct ReductionPolicy {
  int replicas = 3;  // reducers per shard (the R)
  int audits = 1;    // shards each peer recomputes a round (docs/ARCHITECTURE.md, step 7)
  // 0: shard when the byte model says it pays (shardingPays); N: from N senders with merged work
  // on, whatever it costs — the netlab's 6 and 12 peers and the real-process bench at 4 and 8
  // run sharded rounds where they do not pay. Never with every sender a reducer.
  int shardFrom = 0;
};

struct RoundTopology {
  bool sharded = false;
  std::string why;                               // one line for the log: the switch's inputs
  std::int64_t shardElements = 0;                // sharded: the plan's shard size
  std::vector<Shard> plan;                       // sharded: the shards, plan order
  std::vector<std::vector<std::string>> orders;  // sharded: each shard's reducers, then replacements

  // The plan's shards `peer` is among the first `replicas` reducers of (plan order).
  std::vector<std::string> shardsReducedBy(const std::string& peer, int replicas) const;
  // At the round's close (protocol step 2: "missing reducers are replaced by the next in hash
  // order"): each order keeps only the senders of the closed set (`senders`) — a reducer gone
  // before it sent the round (killed, left, cut off) is replaced by the next of its order that
  // sent it, so nobody waits for outputs it will never publish. An order with no sender left
  // stays as it was (its reducers are given up at the outputs' deadline and the shard recomputed).
  // Every peer that closed on the same set gets the same orders.
  RoundTopology withReducersAmong(const std::set<std::string>& senders) const;
};

// `owners`: expert → its owners this round (peer ids); `seed`: the fingerprint agreed after the
// round before; `denseCodec`: the run's codec is not sparse.
RoundTopology roundTopology(const model::ModelConfig& config, const WorkLedger& ledger,
                            const std::map<int, std::set<std::string>>& owners, const std::string& seed,
                            const ReductionPolicy& policy, bool denseCodec);

}  // namespace es::sync
