// What the swarm agrees on after a round, beyond the model's weights: the outer rule's momentum
// (outer_step.h) and the work ledger (work_ledger.h). One list of named tensors carries all three,
// so one fingerprint covers them, one file persists them and one snapshot hands them to a
// newcomer: a peer cannot agree on the weights and differ on what weighs the next round.
#pragma once

#include "core/checkpoint/safetensors.h"
#include "core/common/expected.h"
#include "core/sync/work_ledger.h"

#include <cstdint>
#include <string>

namespace es::sync {

using ckpt::NamedTensors;

// base, then momentum, then the ledger's tensor (kWorkLedgerTensor) when the ledger is not empty:
// a run's initial state, and a state of a round nobody was merged in, have none.
NamedTensors withState(const NamedTensors& base, const NamedTensors& momentum, const WorkLedger& ledger);
// stateFingerprint(withState(...)): what contributions name as their base and the vote compares.
std::string swarmFingerprint(const NamedTensors& base, const NamedTensors& momentum, const WorkLedger& ledger);

// The ledger stored in `file` (a round folder's base, a snapshot) of round `round`: empty when the
// file has none; an error when its tensor is not U8 of one dimension or does not decode.
Expected<WorkLedger> ledgerIn(const ckpt::SafetensorsFile& file, std::int64_t round);

}  // namespace es::sync
