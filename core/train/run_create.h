// `expertswarm create-run` (issue 40): a run of one's own, made once from a text corpus, that
// anyone can join by its magnet link. The tokenizer is trained here, once; the corpus is cut into
// a training text and a held-out validation tail (or validation files are given apart), tokenized,
// and written as token shards beside tokenizer.json and a run.json that lists them
// (DataConfig::prepared). The folder is the run torrent as every peer shares it: joiners fetch it
// and train on it without tokenizing anything. The corpus is read as a stream (corpus_split.h):
// its size is bounded by the shards' token limit, not by memory.
//
// The folder appears whole or not at all: everything is written into `<out>.partial` and renamed
// to `<out>` last. An interrupted create leaves only the .partial folder, which the next create of
// the same `<out>` removes first (it starts clean); an existing `<out>` is never touched.
#pragma once

#include "core/common/expected.h"
#include "core/model/model_config.h"
#include "core/train/run_manifest.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace es::train {

struct CreateRunRequest {
  std::vector<std::string> corpus;     // files and folders (corpus_text.h)
  std::vector<std::string> valCorpus;  // validation files apart (empty: the corpus' tail)
  std::string out;                     // the run folder to create; its name names the torrent
  std::string manifestTemplate;        // a run.json whose train and swarm settings are the starting point
  std::string preset = "default";      // runPresetNames()
  std::string name;                    // the run's name (empty: out's folder name)
  std::uint64_t seed = 1234;
  double valFraction = 0.01;           // of the corpus' bytes held out for validation
  std::int64_t shardTokens = 1 << 20;  // tokens per training shard
  int syncEvery = 0;                   // swarm.sync_every (0: the preset's)
  int expertsPerPeer = 0;              // swarm.experts_per_peer (0: the preset's)
};

// More text than this is refused after the first (cheap) read: it could not fit the shards'
// kMaxPreparedTrainTokens at any likely bytes per token (English: ~3.5–4.5).
constexpr std::int64_t kMaxCreateTextBytes = std::int64_t(8) * kMaxPreparedTrainTokens;

struct CreatedRun {
  std::string dir;  // == request.out
  std::int64_t trainTokens = 0, valTokens = 0;
  int shards = 0;
};

// Called with a stage ("reading", "tokenizer", "tokenizing", "writing") and the fraction of it
// done, as measured at that moment.
using ProgressFn = std::function<void(const std::string& stage, double fraction)>;

Expected<CreatedRun> createRun(const CreateRunRequest& request, const ProgressFn& progress);

// "tiny", "default", "gpu-1b": the model shapes (and batch sizes) create-run offers.
std::vector<std::string> runPresetNames();
Expected<model::ModelConfig> presetModel(const std::string& preset);
// What training a model of this shape takes in memory, roughly: weights, gradients and AdamW's
// two moments in f32, plus one step's activations at `batchSize` — to refuse a preset that cannot
// fit before an hour is spent tokenizing for it.
std::int64_t trainingMemoryBytes(const model::ModelConfig& model, int batchSize);
int presetBatchSize(const std::string& preset);

}  // namespace es::train
