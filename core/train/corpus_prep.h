// Turns a run's text corpus into what training reads: tokenizer.json (BPE trained on the train
// corpus), data/train-NNN.bin shards and data/val.bin (token_shard.h). The marker prepared.json is
// written last (llm.c style), so a crash mid-preparation is redone on the next start, never
// trained on. A prepared folder is reused as long as its copy of run.json matches.
#pragma once

#include "core/common/expected.h"
#include "core/train/batch_sampler.h"
#include "core/train/bpe_tokenizer.h"
#include "core/train/run_manifest.h"

#include <functional>
#include <string>

namespace es::train {

using LogFn = std::function<void(const std::string&)>;

// sourceDir holds run.json and the corpus files it names; runDir is created if needed. The corpus
// is checked first (checkCorpusFiles: inside sourceDir or alsoAllowedDir, regular files, capped):
// a manifest that fails leaves no runDir and has had no corpus file opened.
Status prepareRunData(const std::string& sourceDir, const std::string& runDir, const LogFn& log,
                      const std::string& alsoAllowedDir = {});

struct RunData {
  RunManifest manifest;
  BpeTokenizer tokenizer;
  TokenBuffer train;  // all train shards, concatenated in shard order
  TokenBuffer val;
};

Expected<RunData> loadRunData(const std::string& runDir);
// The run folder of a prepared run (create-run) in the data dir: a copy of its run.json and a
// prepared.json that names the folder the data stays in (it is the run torrent, seeded in place),
// so loadRunData(runDir) reads it from there. `sourceDir` was checked (checkPreparedFiles).
Status linkPreparedRun(const std::string& sourceDir, const std::string& runDir);
// A prepared run's folder (create-run, or fetched by magnet), read in place: no tokenizer is
// trained and no text tokenized. Its files are checked against its run.json first (prepared_run.h).
Expected<RunData> loadPreparedRun(const std::string& dir);
// The training shards `indices` of a prepared run's folder, concatenated in that order, each id
// inside `vocabSize` (a peer moving on to other shards: core/train/shard_assignment.h).
Expected<TokenBuffer> readTrainShards(const std::string& dir, const std::vector<int>& indices, int vocabSize);

}  // namespace es::train
