#include "core/train/run_create.h"

#include "core/common/atomic_file.h"
#include "core/train/bpe_tokenizer.h"
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

// The documents of every file, joined by a blank line; `progress` by files read.
Expected<std::string> readCorpus(const std::vector<std::string>& files, const ProgressFn& progress) {
  std::string text;
  for (std::size_t i = 0; i < files.size(); ++i) {
    auto documents = readCorpusDocuments(files[i], kMaxCorpusBytes - std::int64_t(text.size()));
    if (!documents) return makeError(documents.error());
    for (auto& d : *documents) {
      if (d.empty()) continue;
      if (!text.empty()) text += "\n\n";
      text += d;
    }
    progress("reading", double(i + 1) / double(files.size()));
  }
  if (text.empty()) return makeError("the corpus is empty: its files hold no text");
  return text;
}

// Where the validation tail begins: after the line break nearest `fraction` from the end, or at a
// UTF-8 character boundary there when the text has no line break near it.
std::size_t validationCut(const std::string& text, double fraction) {
  std::size_t cut = text.size() - std::max<std::size_t>(1, std::size_t(double(text.size()) * fraction));
  if (const auto nl = text.rfind('\n', cut); nl != std::string::npos && nl > cut / 2) return nl + 1;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xc0) == 0x80) --cut;
  return cut;
}

// Encoded in slices cut at blank lines (whitespace, where the pre-tokenizer cuts anyway), so that
// progress can be told; the slices are fixed by the text, so the tokens are too.
std::vector<std::uint16_t> encodeText(const BpeTokenizer& tokenizer, std::string_view text,
                                      const std::function<void(double)>& progress) {
  constexpr std::size_t kSlice = std::size_t(4) << 20;
  std::vector<std::uint16_t> out;
  for (std::size_t begin = 0; begin < text.size();) {
    std::size_t end = std::min(text.size(), begin + kSlice);
    if (end < text.size())
      if (const auto blank = text.find("\n\n", end); blank != std::string_view::npos) end = blank + 2;
    const auto ids = tokenizer.encode(text.substr(begin, std::min(end, text.size()) - begin));
    out.insert(out.end(), ids.begin(), ids.end());  // ids < vocab <= 65536 (the tokenizer's own bound)
    begin = std::min(end, text.size());
    progress(double(begin) / double(text.size()));
  }
  return out;
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

Expected<CreatedRun> writeRun(const CreateRunRequest& r, const Preset& preset, const std::string& name,
                              const fs::path& staging, const std::string& text, const ProgressFn& progress) {
  progress("tokenizer", 0);
  const std::size_t cut = validationCut(text, r.valFraction);
  const std::string_view trainText(text.data(), cut), valText(text.data() + cut, text.size() - cut);
  auto tokenizer = BpeTokenizer::train(trainText, preset.model.vocabSize);
  if (!tokenizer) return makeError("tokenizer: " + tokenizer.error());
  if (tokenizer->vocabSize() != preset.model.vocabSize)
    return makeError("the corpus is too small for a vocabulary of " + std::to_string(preset.model.vocabSize) +
                     " tokens (it supports " + std::to_string(tokenizer->vocabSize()) + "): give more text");
  progress("tokenizer", 1);
  const auto train = encodeText(*tokenizer, trainText, [&](double f) { progress("tokenizing", 0.95 * f); });
  const auto val = encodeText(*tokenizer, valText, [](double) {});
  progress("tokenizing", 1);
  const std::int64_t batch = std::int64_t(preset.batchSize) * preset.model.seqLen + 1;
  if (std::int64_t(train.size()) < batch)
    return makeError("the corpus gives " + std::to_string(train.size()) + " training tokens, fewer than one batch (" +
                     std::to_string(batch) + ") of the " + preset.name + " preset");
  if (std::int64_t(val.size()) <= preset.model.seqLen)
    return makeError("the validation tail gives " + std::to_string(val.size()) +
                     " tokens, fewer than one sequence: raise --val-fraction or give more text");
  if (std::int64_t(train.size()) > kMaxPreparedTrainTokens)
    return makeError("the corpus gives more than " + std::to_string(kMaxPreparedTrainTokens) + " training tokens");
  std::error_code ec;
  fs::create_directories(staging / "data", ec);
  if (ec) return makeError("cannot create \"" + (staging / "data").string() + "\": " + ec.message());
  std::vector<std::int64_t> shards;
  const auto shardTokens = std::size_t(std::clamp<std::int64_t>(r.shardTokens, 1024, kMaxShardTokens));
  for (std::size_t begin = 0; begin < train.size(); begin += shardTokens) {
    const auto end = std::min(train.size(), begin + shardTokens);
    if (shards.size() >= std::size_t(kMaxPreparedShards))
      return makeError("more than " + std::to_string(kMaxPreparedShards) + " shards: raise --shard-tokens");
    const std::vector<std::uint16_t> shard(train.begin() + std::ptrdiff_t(begin), train.begin() + std::ptrdiff_t(end));
    if (auto s = writeTokenShard((staging / "data" / trainShardName(int(shards.size()))).string(), shard); !s)
      return makeError(s.error());
    shards.push_back(std::int64_t(shard.size()));
    progress("writing", double(end) / double(train.size()));
  }
  if (auto s = writeTokenShard((staging / "data" / "val.bin").string(), val); !s) return makeError(s.error());
  if (auto s = tokenizer->save((staging / "tokenizer.json").string()); !s) return makeError(s.error());
  auto manifest = manifestText(r, preset, name, shards, std::int64_t(val.size()));
  if (!manifest) return makeError(manifest.error());
  if (auto s = writeFileAtomically((staging / "run.json").string(), *manifest); !s) return makeError(s.error());
  return CreatedRun{r.out, std::int64_t(train.size()), std::int64_t(val.size()), int(shards.size())};
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
  auto files = listCorpusFiles(r.corpus, kMaxCorpusBytes);
  if (!files) return makeError(files.error());
  auto text = readCorpus(*files, progress);
  if (!text) return makeError(text.error());
  const fs::path staging = out.string() + ".partial";
  fs::remove_all(staging, ec);  // an interrupted create's leftovers: start clean
  auto created = writeRun(r, *preset, name, staging, *text, progress);
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
