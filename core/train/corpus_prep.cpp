#include "core/train/corpus_prep.h"

#include "core/common/atomic_file.h"
#include "core/train/prepared_run.h"
#include "core/train/token_shard.h"

#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>

namespace es::train {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

std::vector<std::uint16_t> toU16(const std::vector<TokenId>& ids) {
  return std::vector<std::uint16_t>(ids.begin(), ids.end());  // vocab <= 65536 (checked)
}

bool alreadyPrepared(const std::string& manifestText, const fs::path& runDir) {
  auto copy = readRunManifestText((runDir / "run.json").string());
  return fs::exists(runDir / "prepared.json") && copy && *copy == manifestText;
}

}  // namespace

Status prepareRunData(const std::string& sourceDir, const std::string& runDirText, const LogFn& log,
                      const std::string& alsoAllowedDir) {
  const fs::path source(sourceDir), runDir(runDirText);
  auto manifestText = readRunManifestText((source / "run.json").string());
  if (!manifestText) return makeError(manifestText.error());
  auto manifest = parseRunManifest(*manifestText);
  if (!manifest) return makeError((source / "run.json").string() + ": " + manifest.error());
  if (auto corpus = checkCorpusFiles(*manifest, sourceDir, alsoAllowedDir); !corpus)
    return makeError((source / "run.json").string() + ": " + corpus.error());
  if (alreadyPrepared(*manifestText, runDir)) return {};

  std::error_code ec;
  fs::create_directories(runDir / "data", ec);
  if (ec) return makeError("cannot create \"" + (runDir / "data").string() + "\": " + ec.message());
  fs::remove(runDir / "prepared.json", ec);

  std::string trainText;
  for (const auto& file : manifest->data.trainCorpus) {
    auto part = readWholeFile((source / file).string());
    if (!part) return makeError(part.error());
    trainText += *part;
  }
  auto valText = readWholeFile((source / manifest->data.valCorpus).string());
  if (!valText) return makeError(valText.error());

  auto start = std::chrono::steady_clock::now();
  auto tokenizer = BpeTokenizer::train(trainText, manifest->model.vocabSize);
  if (!tokenizer) return makeError("tokenizer: " + tokenizer.error());
  if (tokenizer->vocabSize() != manifest->model.vocabSize)
    return makeError("tokenizer: the corpus supports only " + std::to_string(tokenizer->vocabSize()) +
                     " tokens, the model expects " + std::to_string(manifest->model.vocabSize));
  log("Tokenizer trained. Vocab: " + std::to_string(tokenizer->vocabSize()) +
      ". Seconds: " + std::to_string(secondsSince(start)));

  start = std::chrono::steady_clock::now();
  const auto train = toU16(tokenizer->encode(trainText));
  const auto val = toU16(tokenizer->encode(*valText));
  log("Corpus tokenized. Train tokens: " + std::to_string(train.size()) +
      ". Val tokens: " + std::to_string(val.size()) + ". Seconds: " + std::to_string(secondsSince(start)));

  const auto shardTokens = static_cast<std::size_t>(manifest->data.shardTokens);
  int shards = 0;
  for (std::size_t begin = 0; begin < train.size(); begin += shardTokens, ++shards) {
    const std::vector<std::uint16_t> shard(
        train.begin() + static_cast<std::ptrdiff_t>(begin),
        train.begin() + static_cast<std::ptrdiff_t>(std::min(train.size(), begin + shardTokens)));
    if (auto s = writeTokenShard((runDir / "data" / trainShardName(shards)).string(), shard); !s) return s;
  }
  if (auto s = writeTokenShard((runDir / "data" / "val.bin").string(), val); !s) return s;
  if (auto s = tokenizer->save((runDir / "tokenizer.json").string()); !s) return s;
  if (auto s = writeFileAtomically((runDir / "run.json").string(), *manifestText); !s) return s;
  const json marker = {{"train_shards", shards}, {"train_tokens", train.size()}, {"val_tokens", val.size()}};
  return writeFileAtomically((runDir / "prepared.json").string(), marker.dump(2) + "\n");
}

namespace {

// The manifest, tokenizer and token files of a run, read and checked: every id inside the
// vocabulary, at least one sequence of each.
Expected<RunData> readRunData(RunManifest manifest, const fs::path& tokenizerPath,
                              const std::vector<fs::path>& trainShards, const fs::path& valPath,
                              const std::string& where) {
  auto tokenizer = BpeTokenizer::load(tokenizerPath.string());
  if (!tokenizer) return makeError(tokenizer.error());
  if (tokenizer->vocabSize() != manifest.model.vocabSize)
    return makeError(tokenizerPath.string() + ": " + std::to_string(tokenizer->vocabSize()) +
                     " tokens, the model expects " + std::to_string(manifest.model.vocabSize));
  auto train = std::make_shared<std::vector<std::uint16_t>>();
  for (const auto& path : trainShards) {
    auto shard = readTokenShard(path.string());
    if (!shard) return makeError(shard.error());
    train->insert(train->end(), shard->begin(), shard->end());
  }
  auto val = readTokenShard(valPath.string());
  if (!val) return makeError(val.error());
  for (auto* tokens : {train.get(), &val.value()})
    for (auto id : *tokens)
      if (id >= manifest.model.vocabSize) return makeError("token id out of vocabulary in " + where);
  const auto minTokens = static_cast<std::size_t>(manifest.model.seqLen) + 1;
  if (train->size() < minTokens || val->size() < minTokens)
    return makeError("run data in \"" + where + "\" is shorter than one sequence");
  return RunData{std::move(manifest), std::move(*tokenizer), std::move(train),
                 std::make_shared<const std::vector<std::uint16_t>>(std::move(*val))};
}

}  // namespace

Status linkPreparedRun(const std::string& sourceDir, const std::string& runDirText) {
  const fs::path runDir(runDirText);
  auto manifestText = readRunManifestText((fs::path(sourceDir) / "run.json").string());
  if (!manifestText) return makeError(manifestText.error());
  std::error_code ec;
  const auto source = fs::canonical(sourceDir, ec);
  if (ec) return makeError("run folder \"" + sourceDir + "\": " + ec.message());
  if (auto s = writeFileAtomically((runDir / "run.json").string(), *manifestText); !s) return s;
  const json marker = {{"prepared_run", source.string()}};
  return writeFileAtomically((runDir / "prepared.json").string(), marker.dump(2) + "\n");
}

Expected<RunData> loadRunData(const std::string& runDirText) {
  const fs::path runDir(runDirText);
  auto markerText = readWholeFile((runDir / "prepared.json").string());
  if (!markerText) return makeError("run data not prepared: " + markerText.error());
  const json marker = json::parse(*markerText, nullptr, false);
  if (marker.is_object() && marker.contains("prepared_run") && marker["prepared_run"].is_string())
    return loadPreparedRun(marker["prepared_run"].get<std::string>());
  if (!marker.is_object() || !marker.contains("train_shards") || !marker["train_shards"].is_number_integer())
    return makeError((runDir / "prepared.json").string() + ": malformed");
  auto manifest = loadRunManifest((runDir / "run.json").string());
  if (!manifest) return makeError(manifest.error());
  std::vector<fs::path> shards;
  for (int i = 0; i < marker["train_shards"].get<int>(); ++i) shards.push_back(runDir / "data" / trainShardName(i));
  return readRunData(std::move(*manifest), runDir / "tokenizer.json", shards, runDir / "data" / "val.bin", runDirText);
}

Expected<RunData> loadPreparedRun(const std::string& dirText) {
  const fs::path dir(dirText);
  auto manifest = loadRunManifest((dir / "run.json").string());
  if (!manifest) return makeError(manifest.error());
  if (!manifest->data.prepared()) return makeError((dir / "run.json").string() + ": names no prepared shards");
  // A copy fetched in part (its resume file says so) trains on the shards it holds.
  const bool partial = fs::exists(dir / kPartialRunState);
  if (auto s = checkPreparedFiles(*manifest, dirText, partial); !s) return makeError(s.error());
  std::vector<fs::path> shards;
  for (const int i : presentShards(*manifest, dirText)) shards.push_back(dir / "data" / trainShardName(i));
  return readRunData(std::move(*manifest), dir / "tokenizer.json", shards, dir / "data" / "val.bin", dirText);
}

Expected<TokenBuffer> readTrainShards(const std::string& dir, const std::vector<int>& indices, int vocabSize) {
  auto tokens = std::make_shared<std::vector<std::uint16_t>>();
  for (const int i : indices) {
    const auto path = (fs::path(dir) / "data" / trainShardName(i)).string();
    auto shard = readTokenShard(path);
    if (!shard) return makeError(shard.error());
    for (const auto id : *shard)
      if (id >= vocabSize) return makeError("token id out of vocabulary in " + path);
    tokens->insert(tokens->end(), shard->begin(), shard->end());
  }
  return TokenBuffer(std::move(tokens));
}

}  // namespace es::train
