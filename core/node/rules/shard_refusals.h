// Issue 38: a sharded round's refusals, gathered into one verdict. Some refusals every peer
// computes alike from what every reducer holds (the no-work floor, the norm cap, the expert bound:
// from the senders' signed figures, shard_figures_file.h); the others only a shard's reducers can
// find — a figure its bytes do not give, a weight past the ceiling in its rows, a file that does
// not decode. Each reducer names the senders it refused in its shard in the output it signs
// (shard_outputs.h: agreeing reducers name the same ones), and a sender refused by any shard's
// applied output is out of the whole round, as mergeRound would have refused it whole.
//
// One pass when nobody is refused. Otherwise every shard is reduced again from the set without
// them: the round's scale (the expert bound's median, the ledger's weights among the accepted)
// depends on who is in, so no shard's first output stands. A shard's own refusals do not depend on
// who else is in (each reads one sender's bytes against its figure and the ceiling), so the second
// pass refuses nobody new and a round takes at most two — the extra hop is paid only in a round
// someone was refused in. Being out of the round is not a ban: a peer bans a sender only for
// bytes it checked itself (a shard's reducers, an auditor), so R colluding reducers cannot get an
// honest sender banned by the others.
// Pure functions, no Qt, no Torch.
#pragma once

#include "core/common/ids.h"

#include <map>
#include <set>
#include <string>
#include <vector>

namespace es::node {

// The output a peer applied for one shard (shard_outputs.h's decision) and whom it refused.
struct AppliedShard {
  std::string inputDigest;        // the input set it was reduced from (mergedSetDigest)
  std::set<std::string> refused;  // senders its reducers refused in this shard
};

enum class RoundPass { Reducing, Again, Done };

struct RoundRefusals {
  RoundPass pass = RoundPass::Reducing;
  std::set<std::string> refused;     // every sender out of the round so far (the given ones too)
  std::string digest;                // the input set to reduce (Again: the next pass's) or reduced (Done)
  std::vector<std::string> waiting;  // Reducing: the shards without an applied output for it, in order
};

// `inputs`: the round's agreed input set, sender → its contribution; `refused`: the senders
// already out (a pass's refusals, carried to the next); `applied`: shard → the output applied for
// the current set (outputs for another set are ignored). Reducing while a shard of `shards` has
// no output for the set; then Again, with the set without the newly refused, when any output
// refused a sender of the set (a name outside it is ignored: it changes nothing); else Done.
RoundRefusals gatherRefusals(const std::map<std::string, ContentId>& inputs, const std::set<std::string>& refused,
                             const std::vector<std::string>& shards,
                             const std::map<std::string, AppliedShard>& applied);

// The digest of `inputs` without the senders in `refused` (merged_set.h's digest).
std::string inputDigest(const std::map<std::string, ContentId>& inputs, const std::set<std::string>& refused);

}  // namespace es::node
