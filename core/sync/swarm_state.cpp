#include "core/sync/swarm_state.h"

#include "core/sync/outer_step.h"
#include "core/sync/validate.h"

#include <torch/torch.h>

#include <cstring>

namespace es::sync {

NamedTensors withState(const NamedTensors& base, const NamedTensors& momentum, const WorkLedger& ledger) {
  NamedTensors out = withMomentum(base, momentum);
  if (ledger.empty()) return out;
  const std::string text = ledger.encode();
  at::Tensor bytes = torch::empty({static_cast<std::int64_t>(text.size())}, torch::dtype(torch::kUInt8));
  std::memcpy(bytes.data_ptr<std::uint8_t>(), text.data(), text.size());
  out.emplace_back(kWorkLedgerTensor, std::move(bytes));
  return out;
}

std::string swarmFingerprint(const NamedTensors& base, const NamedTensors& momentum, const WorkLedger& ledger) {
  return stateFingerprint(withState(base, momentum, ledger));
}

Expected<WorkLedger> ledgerIn(const ckpt::SafetensorsFile& file, std::int64_t round) {
  const at::Tensor t = file.find(kWorkLedgerTensor);
  if (!t.defined()) return WorkLedger{};
  if (t.scalar_type() != at::kByte || t.dim() != 1) return makeError("the work ledger is not U8 of one dimension");
  const at::Tensor c = t.contiguous();
  const std::string text(reinterpret_cast<const char*>(c.data_ptr<std::uint8_t>()),
                         static_cast<std::size_t>(c.numel()));
  auto ledger = WorkLedger::decode(text, round);
  if (!ledger) return makeError(ledger.error());
  if (ledger->empty()) return makeError("the work ledger is stored but empty");  // never written so
  return ledger;
}

}  // namespace es::sync
