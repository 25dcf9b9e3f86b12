#include "core/train/run_manifest.h"

#include "core/common/atomic_file.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <functional>
#include <map>

namespace es::train {
namespace {

using nlohmann::json;

// Reads the keys of `object` through `readers`; anything else is an error.
std::string readObject(const json& object, const std::string& where,
                       const std::map<std::string, std::function<bool(const json&)>>& readers) {
  if (!object.is_object()) return where + ": not an object";
  for (const auto& [key, value] : object.items()) {
    auto it = readers.find(key);
    if (it == readers.end()) return where + ": unknown key \"" + key + "\"";
    if (!it->second(value)) return where + ": bad value for \"" + key + "\": " + value.dump();
  }
  return {};
}

template <typename T>
std::function<bool(const json&)> integer(T& out, std::int64_t lo, std::int64_t hi) {
  return [&out, lo, hi](const json& v) {
    if (!v.is_number_integer()) return false;
    const auto x = v.get<std::int64_t>();
    if (x < lo || x > hi) return false;
    out = static_cast<T>(x);
    return true;
  };
}

std::function<bool(const json&)> real(double& out, double lo, double hi) {
  return [&out, lo, hi](const json& v) {
    if (!v.is_number()) return false;
    const double x = v.get<double>();
    if (!std::isfinite(x) || x < lo || x > hi) return false;
    out = x;
    return true;
  };
}

std::function<bool(const json&)> text(std::string& out) {
  return [&out](const json& v) {
    if (!v.is_string() || v.get<std::string>().empty()) return false;
    out = v.get<std::string>();
    return true;
  };
}

}  // namespace

Expected<RunManifest> parseRunManifest(std::string_view input) {
  const json j = json::parse(input.begin(), input.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return makeError("run manifest: not valid JSON");
  RunManifest m;
  TrainConfig& t = m.train;
  DataConfig& d = m.data;
  std::string error;
  std::int64_t format = 0;
  const std::int64_t big = 1LL << 40;
  error = readObject(j, "run manifest", {
      {"format", integer(format, 1, 1)},
      {"name", text(m.name)},
      {"seed", integer(m.seed, 0, big)},
      {"model", [&](const json& v) {
         auto parsed = model::ModelConfig::fromJson(v.dump());
         if (!parsed) { error = parsed.error(); return false; }
         m.model = *parsed;
         return true;
       }},
      {"train", [&](const json& v) {
         error = readObject(v, "train", {
             {"batch_size", integer(t.batchSize, 1, 1 << 16)},
             {"lr", real(t.lr, 0, 10)},
             {"min_lr_ratio", real(t.minLrRatio, 0, 1)},
             {"warmup_steps", integer(t.warmupSteps, 0, big)},
             {"total_steps", integer(t.totalSteps, 1, big)},
             {"weight_decay", real(t.weightDecay, 0, 10)},
             {"beta1", real(t.beta1, 0, 0.999999)},
             {"beta2", real(t.beta2, 0, 0.999999)},
             {"eps", real(t.eps, 1e-30, 1)},
             {"grad_clip", real(t.gradClip, 0, 1e9)},
             {"load_balance_coef", real(t.loadBalanceCoef, 0, 100)},
             {"z_loss_coef", real(t.zLossCoef, 0, 100)},
             {"log_interval", integer(t.logInterval, 1, 1 << 30)},
             {"eval_interval", integer(t.evalInterval, 1, 1 << 30)},
             {"eval_batches", integer(t.evalBatches, 1, 1 << 20)},
             {"checkpoint_interval", integer(t.checkpointInterval, 1, 1 << 30)}});
         return error.empty();
       }},
      {"data", [&](const json& v) {
         error = readObject(v, "data", {
             {"train_corpus", [&](const json& list) {
                if (!list.is_array() || list.empty()) return false;
                for (const auto& f : list) {
                  if (!f.is_string() || f.get<std::string>().empty()) return false;
                  d.trainCorpus.push_back(f.get<std::string>());
                }
                return true;
              }},
             {"val_corpus", text(d.valCorpus)},
             {"shard_tokens", integer(d.shardTokens, 1024, big)}});
         return error.empty();
       }},
      {"swarm", [&](const json& v) {
         if (!v.is_object()) return false;
         m.swarmJson = v.dump();
         return true;
       }}});
  if (!error.empty()) return makeError(error.rfind("run manifest", 0) == 0 ? error : "run manifest: " + error);
  if (format != 1) return makeError("run manifest: missing \"format\": 1");
  if (m.name.empty()) return makeError("run manifest: missing \"name\"");
  if (d.trainCorpus.empty() || d.valCorpus.empty())
    return makeError("run manifest: data.train_corpus and data.val_corpus are required");
  if (t.warmupSteps > t.totalSteps) return makeError("run manifest: warmup_steps exceeds total_steps");
  return m;
}

Expected<RunManifest> loadRunManifest(const std::string& path) {
  auto bytes = readWholeFile(path);
  if (!bytes) return makeError(bytes.error());
  auto manifest = parseRunManifest(*bytes);
  if (!manifest) return makeError(path + ": " + manifest.error());
  return manifest;
}

double learningRateAt(const TrainConfig& c, std::int64_t step) {
  if (step < c.warmupSteps) return c.lr * double(step + 1) / double(c.warmupSteps);
  const double minLr = c.lr * c.minLrRatio;
  if (step >= c.totalSteps) return minLr;
  const double progress = double(step - c.warmupSteps) / double(std::max<std::int64_t>(1, c.totalSteps - c.warmupSteps));
  return minLr + 0.5 * (c.lr - minLr) * (1.0 + std::cos(M_PI * progress));
}

double localExpertBalanceFactor(std::int64_t step, std::int64_t totalSteps) {
  const auto rampSteps = static_cast<std::int64_t>(double(totalSteps) * 0.2);
  if (step >= rampSteps) return 1.0;
  return 0.7 + 0.3 * double(step) / double(std::max<std::int64_t>(1, rampSteps));
}

}  // namespace es::train
