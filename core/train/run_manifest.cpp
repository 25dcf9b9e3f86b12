#include "core/train/run_manifest.h"

#include "core/common/json_depth.h"
#include "core/train/manifest_json.h"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>

namespace es::train {
namespace {

using namespace manifest;

constexpr std::int64_t kBig = std::int64_t(1) << 40;
// run.json nests 3 levels (swarm.merge_warmup.interval); deeper is an attack on nlohmann's
// recursive dump(), which the "model" reader calls (json_depth.h).
constexpr std::size_t kMaxManifestDepth = 8;

Readers trainReaders(TrainConfig& t) {
  return {{"batch_size", integer(t.batchSize, 1, 4096)},
          {"lr", real(t.lr, 0, 10)},
          {"min_lr_ratio", real(t.minLrRatio, 0, 1)},
          {"warmup_steps", integer(t.warmupSteps, 0, kBig)},
          {"total_steps", integer(t.totalSteps, 1, kBig)},
          {"weight_decay", real(t.weightDecay, 0, 10)},
          {"beta1", real(t.beta1, 0, 0.999999)},
          {"beta2", real(t.beta2, 0, 0.999999)},
          {"eps", real(t.eps, 1e-30, 1)},
          {"grad_clip", real(t.gradClip, 0, 1e9)},
          {"load_balance_coef", real(t.loadBalanceCoef, 0, 100)},
          {"z_loss_coef", real(t.zLossCoef, 0, 100)},
          {"log_interval", integer(t.logInterval, 1, 1 << 30)},
          {"eval_interval", integer(t.evalInterval, 1, 1 << 30)},
          // Each evaluation runs eval_batches forward passes: more would stall training.
          {"eval_batches", integer(t.evalBatches, 1, 1024)},
          {"checkpoint_interval", integer(t.checkpointInterval, 1, 1 << 30)}};
}

Reader corpusList(std::vector<std::string>& out) {
  return [&out](const json& list) -> std::string {
    if (!list.is_array() || list.empty() || list.size() > 64) return "must be a list of 1 to 64 file names";
    for (std::size_t i = 0; i < list.size(); ++i) {
      std::string file;
      const std::string field = "data.train_corpus[" + std::to_string(i) + "]";
      if (auto problem = text(file, 4096)(list[i]); !problem.empty()) return field + ": " + problem;
      if (auto problem = checkCorpusPathSyntax(file, field); !problem.empty()) return problem;
      out.push_back(file);
    }
    return {};
  };
}

Reader shardList(std::vector<std::int64_t>& out) {
  return [&out](const json& list) -> std::string {
    if (!list.is_array() || list.empty() || list.size() > std::size_t(kMaxPreparedShards))
      return "must be a list of 1 to " + std::to_string(kMaxPreparedShards) + " token counts";
    std::int64_t total = 0;
    for (std::size_t i = 0; i < list.size(); ++i) {
      std::int64_t tokens = 0;
      if (auto problem = integer(tokens, 1, kMaxShardTokens)(list[i]); !problem.empty())
        return "data.prepared.train_shards[" + std::to_string(i) + "]: " + problem;
      total += tokens;
      if (total > kMaxPreparedTrainTokens)
        return "more than " + std::to_string(kMaxPreparedTrainTokens) + " training tokens in all";
      out.push_back(tokens);
    }
    return {};
  };
}

Readers preparedReaders(DataConfig& d) {
  return {{"train_shards", shardList(d.preparedTrainTokens)},
          {"val_tokens", integer(d.preparedValTokens, 1, kMaxShardTokens)}};
}

Readers dataReaders(DataConfig& d) {
  return {{"prepared", [&d](const json& v) { return readObject(v, "data.prepared", preparedReaders(d)); }},
          {"train_corpus", corpusList(d.trainCorpus)},
          {"val_corpus",
           [&d](const json& v) -> std::string {
             if (auto problem = text(d.valCorpus, 4096)(v); !problem.empty()) return problem;
             return checkCorpusPathSyntax(d.valCorpus, "data.val_corpus");
           }},
          {"shard_tokens", integer(d.shardTokens, 1024, std::int64_t(1) << 30)}};
}

Reader nested(const std::string& where, std::function<Readers()> readers) {
  return [where, readers](const json& v) { return readObject(v, where, readers()); };
}

std::string crossChecksAfterData(const RunManifest& m);

// Rules between fields, after every field was read on its own.
std::string crossChecks(const RunManifest& m, std::int64_t format) {
  if (format != 1) return "format: missing (must be 1)";
  if (m.name.empty()) return "name: missing";
  if (!isValidRunName(m.name))
    return "name: must match [A-Za-z0-9._-]{1,64} and not be \".\" or \"..\", got \"" + m.name + "\"";
  if (m.data.prepared()) {
    if (!m.data.trainCorpus.empty() || !m.data.valCorpus.empty())
      return "data: a run names either its text corpus (train_corpus, val_corpus) or its prepared shards, not both";
    if (m.data.preparedValTokens == 0) return "data.prepared.val_tokens: missing";
    return crossChecksAfterData(m);
  }
  if (m.data.preparedValTokens > 0) return "data.prepared.train_shards: missing";
  if (m.data.trainCorpus.empty()) return "data.train_corpus: missing";
  if (m.data.valCorpus.empty()) return "data.val_corpus: missing";
  return crossChecksAfterData(m);
}

std::string crossChecksAfterData(const RunManifest& m) {
  if (m.train.warmupSteps > m.train.totalSteps) return "train.warmup_steps: exceeds train.total_steps";
  if (std::int64_t(m.train.batchSize) * m.model.seqLen > kMaxTokensPerStep)
    return "train.batch_size: batch_size × model.seq_len must be at most " + std::to_string(kMaxTokensPerStep) +
           " tokens";
  return checkSwarmPolicy(m.swarm, m.model);
}

}  // namespace

bool isValidRunName(std::string_view name) {
  if (name.empty() || name.size() > 64 || name == "." || name == "..") return false;
  for (const char c : name) {
    const bool ok =
        (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

Expected<RunManifest> parseRunManifest(std::string_view input) {
  if (std::int64_t(input.size()) > kMaxRunManifestBytes)
    return makeError("run manifest: " + std::to_string(input.size()) + " bytes, more than the " +
                     std::to_string(kMaxRunManifestBytes) + " a run.json may have");
  if (jsonNestingDepth(input) > kMaxManifestDepth)
    return makeError("run manifest: nests deeper than " + std::to_string(kMaxManifestDepth) + " levels");
  const json j = json::parse(input.begin(), input.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return makeError("run manifest: not valid JSON");
  RunManifest m;
  std::int64_t format = 0;
  std::string error = readObject(j, "",
                                 {{"format", integer(format, 1, 1)},
                                  {"name", text(m.name, 64)},
                                  {"seed", integer(m.seed, 0, kBig)},
                                  {"model",
                                   [&m](const json& v) -> std::string {
                                     auto parsed = model::ModelConfig::fromJson(v.dump());
                                     if (!parsed) {
                                       const std::string& e = parsed.error();  // "model config: …"
                                       return "model: " + (e.rfind("model config: ", 0) == 0 ? e.substr(14) : e);
                                     }
                                     m.model = *parsed;
                                     return {};
                                   }},
                                  {"train", nested("train", [&m] { return trainReaders(m.train); })},
                                  {"data", nested("data", [&m] { return dataReaders(m.data); })},
                                  {"swarm", [&m](const json& v) { return readSwarmPolicy(v, m.swarm); }}});
  if (error.empty()) error = crossChecks(m, format);
  if (!error.empty()) return makeError("run manifest: " + error);
  return m;
}

Expected<std::string> readRunManifestText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return makeError("cannot open \"" + path + "\": " + std::strerror(errno));
  // One byte more than allowed tells a file at the bound from a larger one.
  std::string bytes(std::size_t(kMaxRunManifestBytes) + 1, '\0');
  in.read(bytes.data(), std::streamsize(bytes.size()));
  if (in.bad()) return makeError("cannot read \"" + path + "\"");
  bytes.resize(std::size_t(in.gcount()));
  if (std::int64_t(bytes.size()) > kMaxRunManifestBytes)
    return makeError(path + ": more than the " + std::to_string(kMaxRunManifestBytes) + " bytes a run.json may have");
  return bytes;
}

Expected<RunManifest> loadRunManifest(const std::string& path) {
  auto bytes = readRunManifestText(path);
  if (!bytes) return makeError(bytes.error());
  auto manifest = parseRunManifest(*bytes);
  if (!manifest) return makeError(path + ": " + manifest.error());
  return manifest;
}

double learningRateAt(const TrainConfig& c, std::int64_t step) {
  if (step < c.warmupSteps) return c.lr * double(step + 1) / double(c.warmupSteps);
  const double minLr = c.lr * c.minLrRatio;
  if (step >= c.totalSteps) return minLr;
  const double progress =
      double(step - c.warmupSteps) / double(std::max<std::int64_t>(1, c.totalSteps - c.warmupSteps));
  return minLr + 0.5 * (c.lr - minLr) * (1.0 + std::cos(M_PI * progress));
}

double localExpertBalanceFactor(std::int64_t step, std::int64_t totalSteps) {
  const auto rampSteps = static_cast<std::int64_t>(double(totalSteps) * 0.2);
  if (step >= rampSteps) return 1.0;
  return 0.7 + 0.3 * double(step) / double(std::max<std::int64_t>(1, rampSteps));
}

}  // namespace es::train
