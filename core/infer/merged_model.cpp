#include "core/infer/merged_model.h"

#include "core/checkpoint/round_dirs.h"
#include "core/checkpoint/training_state.h"
#include "core/sync/outer_rule.h"
#include "core/sync/work_ledger.h"

#include <torch/torch.h>

#include <algorithm>
#include <filesystem>
#include <map>

namespace es::infer {
namespace fs = std::filesystem;
namespace {

// A round folder's base holds the swarm's state beside the weights — the outer rule's momentum and
// the work ledger (sync/swarm_state.h) — which are not the model's.
ckpt::NamedTensors modelWeightsOnly(ckpt::NamedTensors tensors) {
  const std::string momentum = sync::kMomentumPrefix;
  tensors.erase(std::remove_if(tensors.begin(), tensors.end(),
                               [&](const auto& t) {
                                 return t.first == sync::kWorkLedgerTensor || t.first.rfind(momentum, 0) == 0;
                               }),
                tensors.end());
  return tensors;
}

}  // namespace

Expected<MergedState> loadNewestState(const std::string& runDir) {
  MergedState state;
  const std::string stateDir = runDir + "/swarm-state";
  std::error_code ec;
  if (fs::is_directory(stateDir, ec)) {
    std::vector<std::string> skipped;
    auto loaded = node::round_dirs::loadNewest(
        stateDir,
        [&](const node::round_dirs::RoundDir& dir) -> Status {
          auto file = ckpt::loadSafetensors(dir.path + "/base.safetensors");
          if (!file) return makeError(file.error());
          state.path = dir.path + "/base.safetensors";
          state.round = dir.round;
          state.weights = modelWeightsOnly(std::move(file->tensors));
          return {};
        },
        skipped);
    if (!loaded) return makeError(loaded.error());
    if (*loaded) return state;
  }
  const std::string local = runDir + "/state/training-state.safetensors";
  if (fs::exists(local, ec)) {
    auto training = ckpt::loadTrainingState(local);
    if (!training) return makeError(training.error());
    state.path = local;
    state.weights = std::move(training->weights);
    return state;
  }
  return makeError("the run in " + runDir + " has no merged round and no local state yet: train it first");
}

Expected<model::MoeTransformer> buildModel(const model::ModelConfig& config, const ckpt::NamedTensors& weights,
                                           const std::string& device) {
  if (auto problem = config.validate(); !problem.empty()) return makeError("invalid model config: " + problem);
  model::MoeTransformer model(config);
  model->eval();
  std::map<std::string, const at::Tensor*> byName;
  for (const auto& [name, tensor] : weights)
    if (!byName.emplace(name, &tensor).second) return makeError("tensor \"" + name + "\" appears twice");
  torch::NoGradGuard noGrad;
  auto params = model->named_parameters();
  if (params.size() != byName.size())
    return makeError("the state has " + std::to_string(byName.size()) + " tensors, the model " +
                     std::to_string(params.size()));
  for (auto& item : params) {
    const auto it = byName.find(item.key());
    if (it == byName.end()) return makeError("tensor \"" + item.key() + "\" is missing");
    if (it->second->sizes() != item.value().sizes())
      return makeError("tensor \"" + item.key() + "\" has the wrong shape");
    item.value().copy_(*it->second);
  }
  try {
    const bool gpu = device == "auto" ? torch::cuda::is_available() : device != "cpu";
    if (gpu) model->to(device == "auto" ? torch::Device(torch::kCUDA) : torch::Device(device));
  } catch (const std::exception& e) {
    return makeError("device \"" + device + "\": " + e.what());
  }
  return model;
}

}  // namespace es::infer
