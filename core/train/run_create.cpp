#include "core/train/run_create.h"

#include "core/common/atomic_file.h"
#include "core/train/bpe_tokenizer.h"
#include "core/train/corpus_split.h"
#include "core/train/corpus_text.h"
#include "core/train/prepared_run.h"
#include "core/train/run_manifest.h"
#include "core/train/token_shard.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>

namespace es::train {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct Preset {
  const char* name;
  model::ModelConfig model;
  int batchSize;
  int syncEvery;
};

// tiny: a model that trains in minutes on a laptop core (the tests' shape, a wider vocabulary);
// default: the bundled run's; gpu-1b: bench/train_throughput's GPU-sized model (≈1 B parameters).
std::vector<Preset> presets() {
  model::ModelConfig tiny;
  tiny.vocabSize = 1024;
  tiny.dModel = 64;
  tiny.nLayers = 2;
  tiny.nHeads = 2;
  tiny.nExperts = 4;
  tiny.expertHidden = 128;
  tiny.seqLen = 64;
  model::ModelConfig big;
  big.dModel = 1024;
  big.nLayers = 12;
  big.nHeads = 16;
  big.nExperts = 16;
  big.expertHidden = 1536;
  big.seqLen = 1024;
  return {{"tiny", tiny, 8, 20}, {"default", model::ModelConfig(), 8, 50}, {"gpu-1b", big, 16, 50}};
}

Expected<Preset> findPreset(const std::string& name) {
  for (const auto& p : presets())
    if (name == p.name) return p;
  return makeError("unknown preset \"" + name + "\" (tiny, default or gpu-1b)");
}

// run.json: the template's train and swarm settings with the preset's model, this run's name,
// seed and shards.
Expected<std::string> manifestText(const CreateRunRequest& r, const Preset& preset, const std::string& name,
                                   const std::vector<std::int64_t>& shards, std::int64_t valTokens) {
  json m = json::parse(r.manifestTemplate, nullptr, false);
  if (!m.is_object()) return makeError("the run.json template is not a JSON object");
  m["name"] = name;
  m["seed"] = r.seed;
  m["model"] = json::parse(preset.model.toJson());
  m["train"]["batch_size"] = preset.batchSize;
  m["data"] = {{"prepared", {{"train_shards", shards}, {"val_tokens", valTokens}}}};
  m["swarm"]["sync_every"] = r.syncEvery > 0 ? r.syncEvery : preset.syncEvery;
  if (r.expertsPerPeer > 0) m["swarm"]["experts_per_peer"] = r.expertsPerPeer;
  std::string text = m.dump(2) + "\n";
  if (auto parsed = parseRunManifest(text); !parsed) return makeError(parsed.error());
  return text;
}

Status checkSizes(const Preset& preset, std::int64_t trainTokens, std::size_t valTokens) {
  const std::int64_t batch = std::int64_t(preset.batchSize) * preset.model.seqLen + 1;
  if (trainTokens < batch)
    return makeError("the corpus gives " + std::to_string(trainTokens) + " training tokens, fewer than one batch (" +
                     std::to_string(batch) + ") of the " + preset.name + " preset");
  if (std::int64_t(valTokens) <= preset.model.seqLen)
    return makeError("the validation text gives " + std::to_string(valTokens) +
                     " tokens, fewer than one sequence: raise --val-fraction, give more text or a longer --val");
  return {};
}

// The corpus read three times as a stream (corpus_split.h): measured, split and sampled for the
// tokenizer, then tokenized into shards as it passes.
Expected<CreatedRun> writeRun(const CreateRunRequest& r, const Preset& preset, const std::string& name,
                              const std::vector<std::string>& files, const std::vector<std::string>& valFiles,
                              const fs::path& staging, const ProgressFn& progress) {
  auto total = measureCorpus(files, kMaxCreateTextBytes, [&](double f) { progress("reading", f); });
  if (!total) return makeError(total.error());
  progress("tokenizer", 0);
  auto split =
      splitCorpus(files, *total, r.valFraction, !valFiles.empty(), [&](double f) { progress("tokenizer", 0.2 * f); });
  if (!split) return makeError(split.error());
  auto tokenizer = BpeTokenizer::train(split->sample, preset.model.vocabSize);
  if (!tokenizer) return makeError("tokenizer: " + tokenizer.error());
  if (tokenizer->vocabSize() != preset.model.vocabSize)
    return makeError("the corpus is too small for a vocabulary of " + std::to_string(preset.model.vocabSize) +
                     " tokens (it supports " + std::to_string(tokenizer->vocabSize()) + "): give more text");
  split->sample = std::string();  // up to kTokenizerSampleBytes, no longer needed
  progress("tokenizer", 1);
  std::error_code ec;
  fs::create_directories(staging / "data", ec);
  if (ec) return makeError("cannot create \"" + (staging / "data").string() + "\": " + ec.message());
  const auto shardTokens = std::clamp<std::int64_t>(r.shardTokens, 1024, kMaxShardTokens);
  auto encoded = encodeCorpus(files, *split, *tokenizer, (staging / "data").string(), shardTokens,
                              [&](double f) { progress("tokenizing", f); });
  if (!encoded) return makeError(encoded.error());
  if (!valFiles.empty()) {
    auto val = encodeValidation(valFiles, *tokenizer);
    if (!val) return makeError(val.error());
    encoded->validation = std::move(*val);
  }
  if (auto s = checkSizes(preset, encoded->trainTokens, encoded->validation.size()); !s) return makeError(s.error());
  progress("writing", 0);
  if (auto s = writeTokenShard((staging / "data" / "val.bin").string(), encoded->validation); !s)
    return makeError(s.error());
  if (auto s = tokenizer->save((staging / "tokenizer.json").string()); !s) return makeError(s.error());
  auto manifest = manifestText(r, preset, name, encoded->shards, std::int64_t(encoded->validation.size()));
  if (!manifest) return makeError(manifest.error());
  if (auto s = writeFileAtomically((staging / "run.json").string(), *manifest); !s) return makeError(s.error());
  progress("writing", 1);
  return CreatedRun{r.out, encoded->trainTokens, std::int64_t(encoded->validation.size()), int(encoded->shards.size())};
}

}  // namespace

std::vector<std::string> runPresetNames() {
  std::vector<std::string> names;
  for (const auto& p : presets()) names.emplace_back(p.name);
  return names;
}

Expected<model::ModelConfig> presetModel(const std::string& name) {
  auto p = findPreset(name);
  if (!p) return makeError(p.error());
  return p->model;
}

int presetBatchSize(const std::string& name) {
  auto p = findPreset(name);
  return p ? p->batchSize : 0;
}

std::int64_t trainingMemoryBytes(const model::ModelConfig& m, int batchSize) {
  const std::int64_t tokens = std::int64_t(batchSize) * m.seqLen;
  const std::int64_t activations = tokens * (std::int64_t(m.dModel) * m.nLayers * 40 + std::int64_t(m.vocabSize) * 8);
  return m.totalParameters() * 16 + activations;
}

Expected<CreatedRun> createRun(const CreateRunRequest& r, const ProgressFn& progress) {
  auto preset = findPreset(r.preset);
  if (!preset) return makeError(preset.error());
  const fs::path out = fs::absolute(r.out).lexically_normal();
  const std::string folder = out.filename().string();
  const std::string name = r.name.empty() ? folder : r.name;
  if (!isValidRunName(folder))
    return makeError("--out: the folder's name \"" + folder + "\" names the run torrent: use [A-Za-z0-9._-]{1,64}");
  if (!isValidRunName(name)) return makeError("--name: use [A-Za-z0-9._-]{1,64}, got \"" + name + "\"");
  if (!(r.valFraction > 0 && r.valFraction < 0.5)) return makeError("--val-fraction: must be in (0, 0.5)");
  std::error_code ec;
  if (fs::exists(out, ec)) return makeError("\"" + out.string() + "\" exists already: nothing was changed");
  auto files = listCorpusFiles(r.corpus, kMaxCreateTextBytes);
  if (!files) return makeError(files.error());
  std::vector<std::string> valFiles;
  if (!r.valCorpus.empty()) {
    auto listed = listCorpusFiles(r.valCorpus, kMaxValidationTextBytes);
    if (!listed) return makeError("--val: " + listed.error());
    for (const auto& f : *listed)
      if (std::find(files->begin(), files->end(), f) != files->end())
        return makeError("--val: \"" + f + "\" is part of the training corpus too");
    valFiles = std::move(*listed);
  }
  const fs::path staging = out.string() + ".partial";
  fs::remove_all(staging, ec);  // an interrupted create's leftovers: start clean
  auto created = writeRun(r, *preset, name, *files, valFiles, staging, progress);
  ec.clear();
  if (created) fs::rename(staging, out, ec);
  if (!created || ec) {
    fs::remove_all(staging, ec);
    return makeError(created ? "cannot rename the new run into \"" + out.string() + "\"" : created.error());
  }
  created->dir = out.string();
  return created;
}

}  // namespace es::train
