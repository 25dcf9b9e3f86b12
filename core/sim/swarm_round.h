// One sync round of the simulated swarm (internal to es_sim): every peer's contribution goes
// through the real client's path (codec, contribution file), then every peer merges on its own
// with the client's round function (sync::mergeRound) and the results are checked for
// bit-identity.
#pragma once

#include "core/sim/simulated_swarm.h"
#include "core/sync/work_ledger.h"
#include "core/train/trainer.h"

#include <memory>
#include <string>
#include <vector>

namespace es::sim::detail {

struct Peer {
  std::string id;           // sender id in contributions and the ownership map
  std::vector<int> claims;  // experts it trains (all of them under FedAvg)
  std::unique_ptr<train::Trainer> trainer;
  ckpt::NamedTensors outerMomentum;  // the outer rule's momentum as this peer merged it (empty: plain)
  sync::WorkLedger ledger;           // the work ledger as this peer merged it (weighs the next merge)
  sync::ErrorFeedback feedback;      // what it did not send yet (sparse contributions only)
};

struct RoundOutcome {
  ckpt::NamedTensors merged;  // the new base: what every peer holds now
  std::vector<ContributionBytes> bytes;
  double alpha = 0;
  int rejected = 0;
  int uncredited = 0;            // accepted, not credited (sync/work_credit.h)
  double lowestAgreement = 1.0;  // of an accepted contribution
  bool identical = true;
};

struct RoundInput {
  int round = 0;
  std::int64_t step = 0;
  const ckpt::NamedTensors& base;
  const SimConfig& config;
};

Expected<RoundOutcome> syncRound(std::vector<Peer>& peers, const RoundInput& in, const MergeObserver& observer,
                                 const train::LogFn& log);

}  // namespace es::sim::detail
