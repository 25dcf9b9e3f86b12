#include "core/train/trainer.h"
#include "core/train/trainer_weights.h"

#include "core/checkpoint/training_state.h"
#include "core/model/cross_entropy.h"
#include "core/model/tensor_names.h"
#include "core/model/torch_compat.h"
#include "core/train/grad_clip.h"
#include "core/train/trainer_impl.h"

#include <torch/torch.h>

#include <malloc.h>
#include <algorithm>
#include <chrono>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

namespace es::train {
namespace {

std::string joinInts(const std::vector<int>& values) {
  std::ostringstream out;
  for (size_t i = 0; i < values.size(); ++i) out << (i ? "," : "") << values[i];
  return out.str();
}

// "auto" picks CUDA when LibTorch was built with it and a GPU is present.
Expected<torch::Device> parseDevice(const std::string& name) {
  if (name == "auto") return torch::cuda::is_available() ? torch::Device(torch::kCUDA, 0) : torch::Device(torch::kCPU);
  try {
    torch::Device device(name);
    if (device.is_cuda() && !torch::cuda::is_available())
      return makeError("device \"" + name + "\": this LibTorch has no CUDA or no GPU is visible");
    if (device.is_cuda() && device.has_index() && device.index() >= static_cast<int>(torch::cuda::device_count()))
      return makeError("device \"" + name + "\": only " + std::to_string(torch::cuda::device_count()) + " GPU(s)");
    if (!device.is_cpu() && !device.is_cuda()) return makeError("device \"" + name + "\": use cpu, cuda or cuda:N");
    return device;
  } catch (const std::exception&) {
    return makeError("unknown device \"" + name + "\": use auto, cpu, cuda or cuda:N");
  }
}

ckpt::NamedTensors namedParameters(model::MoeTransformer& model) {
  ckpt::NamedTensors out;
  for (const auto& item : model->named_parameters()) out.emplace_back(item.key(), item.value());
  return out;
}

}  // namespace

void configureTrainingRuntime(int threads) {
  mallopt(M_MMAP_MAX, 0);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  torch::set_num_threads(threads);
}

Status checkDevice(const std::string& device) {
  auto parsed = parseDevice(device);
  if (!parsed) return makeError(parsed.error());
  return {};
}

std::string resolvedDevice(const std::string& device) {
  if (device != "auto") return device;
  return torch::cuda::is_available() ? "cuda" : "cpu";
}

Trainer::Trainer(std::unique_ptr<TrainerImpl> impl) : impl_(std::move(impl)) {}
Trainer::~Trainer() = default;

Expected<std::unique_ptr<Trainer>> Trainer::create(const TrainerOptions& options,
                                                   std::shared_ptr<const std::vector<std::uint16_t>> trainTokens,
                                                   std::shared_ptr<const std::vector<std::uint16_t>> valTokens) {
  if (auto problem = options.model.validate(); !problem.empty()) return makeError("model config: " + problem);
  std::vector<int> local = options.localExperts;
  std::sort(local.begin(), local.end());
  if (std::adjacent_find(local.begin(), local.end()) != local.end())
    return makeError("expert list has duplicates: " + joinInts(options.localExperts));
  for (int e : local)
    if (e < 0 || e >= options.model.nExperts)
      return makeError("expert " + std::to_string(e) + " out of range (the model has " +
                       std::to_string(options.model.nExperts) + " experts: 0.." +
                       std::to_string(options.model.nExperts - 1) + ")");
  if (local.empty())
    for (int e = 0; e < options.model.nExperts; ++e) local.push_back(e);
  const auto window = static_cast<std::size_t>(options.model.seqLen) + 1;
  if (!trainTokens || trainTokens->size() < window || !valTokens || valTokens->size() < window)
    return makeError("train and validation data must each hold more than one sequence");

  auto device = parseDevice(options.device);
  if (!device) return makeError(device.error());
  if (options.precision != "auto" && options.precision != "f32" && options.precision != "bf16")
    return makeError("precision must be auto, f32 or bf16, not \"" + options.precision + "\"");

  auto impl = std::make_unique<TrainerImpl>();
  impl->options = options;
  impl->localExperts = local;
  impl->device = *device;
  impl->bf16 = options.precision == "bf16" || (options.precision == "auto" && device->is_cuda());
  {
    // The seed and the initialisation use torch's process-wide generator: two trainers created
    // at once on two threads (in-process nodes, tests) would interleave its draws.
    static std::mutex initialisation;
    std::lock_guard lock(initialisation);
    torch::manual_seed(options.seed);                    // same seed -> same initial weights on every peer (built on
    impl->model = model::MoeTransformer(options.model);  // the CPU, whatever the device)
  }
  impl->model->to(impl->device);

  ckpt::NamedTensors trainable;
  const std::set<int> localSet(local.begin(), local.end());
  for (auto& [name, param] : namedParameters(impl->model)) {
    const auto expert = model::expertOf(name);
    const bool train = !expert || localSet.count(expert->expert) > 0;
    param.set_requires_grad(train);
    if (train) trainable.emplace_back(name, param);
  }
  const auto& t = options.train;
  // On a GPU every tensor's update in one multi-tensor kernel (LibTorch >= 2.4).
  const bool multiTensor = !impl->device.is_cpu();
  impl->optimizer =
      std::make_unique<SparseAdamW>(trainable, AdamWHyper{t.beta1, t.beta2, t.eps, t.weightDecay, multiTensor});
  impl->trainSampler =
      std::make_unique<BatchSampler>(std::move(trainTokens), options.model.seqLen, t.batchSize, options.dataSeed);
  impl->valSampler = std::make_unique<BatchSampler>(std::move(valTokens), options.model.seqLen, t.batchSize, 0);
  return std::unique_ptr<Trainer>(new Trainer(std::move(impl)));
}

StepStats Trainer::trainStep() {
  auto& s = *impl_;
  const auto start = std::chrono::steady_clock::now();
  const auto& cfg = s.options.train;
  const int nExperts = s.options.model.nExperts;

  // SPES: scale the balance terms of local experts while the ramp lasts. With every expert local
  // (centralised training) there is nothing to distinguish and all weights stay 1.
  std::vector<float> weights(static_cast<size_t>(nExperts), 1.0f);
  if (static_cast<int>(s.localExperts.size()) < nExperts) {
    const double factor = localExpertBalanceFactor(s.step, cfg.totalSteps);
    for (int e : s.localExperts) weights[static_cast<size_t>(e)] = static_cast<float>(factor);
  }
  auto lbWeights = torch::tensor(weights).to(s.device);

  const Batch batch = s.trainSampler->at(s.dataCursor);
  const auto inputs = batch.inputs.to(s.device), targets = batch.targets.to(s.device);
  for (const auto& slot : s.optimizer->slots()) slot.param.mutable_grad() = torch::Tensor();
  model::ForwardOutput out;
  {
    model::Bf16Autocast autocast(s.bf16, s.device.type());  // the forward only: backward follows its casts
    out = s.model->forward(inputs, lbWeights);
  }
  auto ce = model::crossEntropy(out.logits.to(torch::kFloat).reshape({-1, out.logits.size(-1)}), targets.reshape({-1}));
  auto loss = ce + cfg.loadBalanceCoef * out.loadBalance + cfg.zLossCoef * out.zLoss;
  loss.backward();

  std::vector<torch::Tensor> params;
  for (const auto& slot : s.optimizer->slots()) params.push_back(slot.param);
  const auto gradNorm = clipGradNorm(params, cfg.gradClip);  // read below, with the other figures
  const double lr = learningRateAt(cfg, s.step);
  s.optimizer->step(lr, s.step + 1);
  s.step += 1;
  s.dataCursor += 1;

  StepStats stats;
  stats.step = s.step;
  stats.loss = ce.item<double>();
  stats.loadBalance = out.loadBalance.item<double>();
  stats.zLoss = out.zLoss.item<double>();
  stats.lr = lr;
  stats.gradNorm = gradNorm.defined() ? gradNorm.item<double>() : 0.0;
  stats.tokens = batch.inputs.numel();
  stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return stats;
}

double Trainer::evaluate() {
  auto& s = *impl_;
  torch::NoGradGuard noGrad;
  double sum = 0;
  std::int64_t count = 0;
  for (int i = 0; i < s.options.train.evalBatches; ++i) {
    const Batch batch = s.valSampler->sequential(i);
    if (!batch.inputs.defined()) break;
    torch::Tensor logits;
    {
      model::Bf16Autocast autocast(s.bf16, s.device.type());
      logits = s.model->forward(batch.inputs.to(s.device)).logits.to(torch::kFloat);
    }
    auto ce = torch::nn::functional::cross_entropy(
        logits.reshape({-1, logits.size(-1)}), batch.targets.to(s.device).reshape({-1}),
        torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum));
    sum += ce.item<double>();
    count += batch.targets.numel();
  }
  return count ? sum / double(count) : 0.0;
}

std::int64_t Trainer::step() const { return impl_->step; }
const TrainerOptions& Trainer::options() const { return impl_->options; }
std::vector<int> Trainer::localExperts() const { return impl_->localExperts; }
std::string Trainer::deviceName() const { return impl_->device.str(); }
std::int64_t Trainer::optimizerStateBytes() const { return impl_->optimizer->stateBytes(); }

std::vector<std::string> Trainer::trainableTensorNames() const {
  std::vector<std::string> names;
  for (const auto& slot : impl_->optimizer->slots()) names.push_back(slot.name);
  return names;
}

namespace {
ckpt::NamedTensors deepCopy(const ckpt::NamedTensors& tensors) {
  ckpt::NamedTensors out;
  out.reserve(tensors.size());
  for (const auto& [name, t] : tensors) out.emplace_back(name, t.detach().clone());
  return out;
}
}  // namespace

ckpt::TrainingState captureTrainingState(const Trainer& trainer) {
  auto& s = const_cast<Trainer&>(trainer).impl();
  ckpt::TrainingState state;
  state.weights = deepCopy(namedParameters(s.model));
  state.expAvg = deepCopy(s.optimizer->expAvg());
  state.expAvgSq = deepCopy(s.optimizer->expAvgSq());
  state.step = s.step;
  state.dataCursor = s.dataCursor;
  state.rngState = at::detail::getDefaultCPUGenerator().get_state().clone();
  state.extra = {{"model_config", s.options.model.toJson()},
                 {"local_experts", joinInts(s.localExperts)},
                 {"data_seed", std::to_string(s.options.dataSeed)}};
  return state;
}

Status Trainer::saveState(const std::string& path) const {
  auto& s = *impl_;
  ckpt::TrainingState state;
  state.weights = namedParameters(s.model);
  state.expAvg = s.optimizer->expAvg();
  state.expAvgSq = s.optimizer->expAvgSq();
  state.step = s.step;
  state.dataCursor = s.dataCursor;
  state.rngState = at::detail::getDefaultCPUGenerator().get_state();
  state.extra = {{"model_config", s.options.model.toJson()},
                 {"local_experts", joinInts(s.localExperts)},
                 {"data_seed", std::to_string(s.options.dataSeed)}};
  return ckpt::saveTrainingState(path, state);
}

Status Trainer::loadState(const std::string& path) {
  auto& s = *impl_;
  auto state = ckpt::loadTrainingState(path);
  if (!state) return makeError(state.error());
  auto config = state->extra.find("model_config");
  if (config == state->extra.end()) return makeError(path + ": no model_config in the training state");
  auto parsed = model::ModelConfig::fromJson(config->second);
  if (!parsed || *parsed != s.options.model)
    return makeError(path + ": the training state belongs to a different model configuration");

  std::map<std::string, const torch::Tensor*> weights;
  for (const auto& [name, t] : state->weights) weights[name] = &t;
  auto params = namedParameters(s.model);
  for (const auto& [name, param] : params) {
    auto it = weights.find(name);
    if (it == weights.end()) return makeError(path + ": missing tensor \"" + name + "\"");
    if (!it->second->sizes().equals(param.sizes()) || it->second->scalar_type() != param.scalar_type())
      return makeError(path + ": tensor \"" + name + "\" has the wrong shape or dtype");
  }
  if (weights.size() != params.size()) return makeError(path + ": unexpected extra tensors");
  if (auto moments = s.optimizer->loadMoments(state->expAvg, state->expAvgSq); !moments) return moments;

  torch::NoGradGuard noGrad;
  for (auto& [name, param] : params) param.copy_(*weights[name]);
  if (state->rngState.defined()) {
    auto generator = at::detail::getDefaultCPUGenerator();  // a handle: copying it shares the state
    generator.set_state(state->rngState);
  }
  s.step = state->step;
  s.dataCursor = state->dataCursor;
  return {};
}

Status Trainer::saveWeights(const std::string& path) const {
  return ckpt::saveSafetensors(path, namedParameters(impl_->model),
                               {{"format", "expertswarm-model"},
                                {"model_config", impl_->options.model.toJson()},
                                {"step", std::to_string(impl_->step)}});
}

Status Trainer::setTrainTokens(std::shared_ptr<const std::vector<std::uint16_t>> tokens) {
  auto& d = *impl_;
  if (!tokens || tokens->size() < std::size_t(d.options.model.seqLen) + 1)
    return makeError("fewer training tokens than one window");
  d.trainSampler = std::make_unique<BatchSampler>(std::move(tokens), d.options.model.seqLen, d.options.train.batchSize,
                                                  d.options.dataSeed);
  return {};
}

}  // namespace es::train
