#include "core/sync/scatter_mean.h"

#include "core/model/tensor_names.h"

#include <torch/torch.h>

#include <map>
#include <memory>
#include <string>

namespace es::sync {
namespace {

using Factors = std::map<std::string, at::Tensor>;  // shared tensor → per-element float64 factor

DeltaSource scaled(DeltaSource inner, std::shared_ptr<const Factors> factors) {
  return [inner = std::move(inner), factors]() -> Expected<ckpt::NamedTensors> {
    auto deltas = inner();
    if (!deltas) return deltas;
    for (auto& [name, t] : *deltas)
      if (const auto f = factors->find(name); f != factors->end()) t = (t.to(at::kDouble) * f->second).to(at::kFloat);
    return deltas;
  };
}

}  // namespace

Status scaleToScatterMean(std::vector<SenderDeltas>& senders) {
  std::map<std::string, double> carried;  // W_t
  Factors sent;                           // S_tj, then W_t / S_tj
  // As the aggregate weighs the shared tensors (aggregate.cpp): by weight, or all 1 when no
  // sender has merged work.
  double total = 0.0;
  for (const auto& s : senders) total += s.weight;
  auto pass = forEachSender(senders, [&](std::size_t i, const ckpt::NamedTensors& deltas) {
    const double w = total == 0.0 ? 1.0 : senders[i].weight;
    for (const auto& [name, t] : deltas) {
      if (model::expertOf(name)) continue;
      carried[name] += w;
      const at::Tensor mine = t.ne(0).to(at::kDouble) * w;
      auto [it, fresh] = sent.emplace(name, mine);
      if (!fresh) it->second = it->second + mine;
    }
  });
  if (!pass) return pass;
  for (auto& [name, s] : sent) s = torch::where(s > 0, torch::full_like(s, carried.at(name)) / s, torch::ones_like(s));
  const auto factors = std::make_shared<const Factors>(std::move(sent));
  for (auto& sender : senders) sender.deltas = scaled(std::move(sender.deltas), factors);
  return {};
}

}  // namespace es::sync
