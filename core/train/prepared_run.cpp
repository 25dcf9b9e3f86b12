#include "core/train/prepared_run.h"

#include <cstdio>
#include <filesystem>
#include <map>
#include <set>

namespace es::train {
namespace {

namespace fs = std::filesystem;

// What makeTorrent leaves out of a torrent (p2p/torrent_maker.cpp): hidden files and the partial
// files of our atomic writes.
bool leftOutOfTorrents(const fs::path& p) {
  const auto name = p.filename().string();
  return name.empty() || name[0] == '.' || name.find(".tmp-") != std::string::npos;
}

// Every file below `dir` that a torrent of it would carry, relative; links and other non-regular
// files are errors (a torrent of ours has none, and a link could point anywhere).
Expected<std::set<std::string>> filesBelow(const fs::path& dir) {
  std::set<std::string> out;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (leftOutOfTorrents(it->path())) {
      if (it->is_directory(ec)) it.disable_recursion_pending();
      continue;
    }
    const auto relative = it->path().lexically_relative(dir).generic_string();
    const auto status = it->symlink_status(ec);
    if (fs::is_directory(status)) continue;
    if (!fs::is_regular_file(status)) return makeError("\"" + relative + "\" is not a regular file");
    out.insert(relative);
    if (out.size() > std::size_t(kMaxPreparedShards) + 8) return makeError("more files than a run has");
  }
  if (ec) return makeError("cannot list \"" + dir.string() + "\": " + ec.message());
  return out;
}

}  // namespace

std::string trainShardName(int index) {
  char name[32];
  std::snprintf(name, sizeof name, "train-%03d.bin", index);
  return name;
}

std::vector<std::string> preparedRunFiles(const RunManifest& manifest) {
  std::vector<std::string> files{"run.json", "tokenizer.json", "data/val.bin"};
  for (std::size_t i = 0; i < manifest.data.preparedTrainTokens.size(); ++i)
    files.push_back("data/" + trainShardName(int(i)));
  return files;
}

std::int64_t tokenShardBytes(std::int64_t tokens) { return 16 + 2 * tokens; }

Status checkPreparedFiles(const RunManifest& m, const std::string& dirText, bool someShards) {
  const fs::path dir(dirText);
  const std::string where = "run folder \"" + dirText + "\": ";
  auto present = filesBelow(dir);
  if (!present) return makeError(where + present.error());
  const auto expected = preparedRunFiles(m);
  std::size_t shards = 0;
  for (const auto& file : expected) {
    const bool shard = file.rfind("data/train-", 0) == 0;
    if (!present->erase(file)) {
      if (someShards && shard) continue;
      return makeError(where + "\"" + file + "\" is missing");
    }
    shards += shard ? 1 : 0;
    std::error_code ec;
    const auto size = std::int64_t(fs::file_size(dir / file, ec));
    if (ec) return makeError(where + "\"" + file + "\": " + ec.message());
    std::int64_t want = -1;
    if (file == "data/val.bin") want = tokenShardBytes(m.data.preparedValTokens);
    if (file.rfind("data/train-", 0) == 0)
      want = tokenShardBytes(m.data.preparedTrainTokens[std::size_t(&file - &expected[3])]);
    if (want >= 0 && size != want)
      return makeError(where + "\"" + file + "\" has " + std::to_string(size) + " bytes, run.json says " +
                       std::to_string(want));
    if (file == "tokenizer.json" && size > kMaxTokenizerBytes)
      return makeError(where + "tokenizer.json has " + std::to_string(size) + " bytes, more than the " +
                       std::to_string(kMaxTokenizerBytes) + " allowed");
  }
  if (!present->empty()) return makeError(where + "\"" + *present->begin() + "\" is not part of the run");
  if (shards == 0) return makeError(where + "it holds no training shard");
  return {};
}

std::vector<int> presentShards(const RunManifest& m, const std::string& dir) {
  return presentShardsIn(dir, int(m.data.preparedTrainTokens.size()));
}

std::vector<int> presentShardsIn(const std::string& dir, int shardCount) {
  std::vector<int> out;
  std::error_code ec;
  for (int i = 0; i < shardCount; ++i)
    if (fs::is_regular_file(fs::path(dir) / "data" / trainShardName(i), ec)) out.push_back(i);
  return out;
}

std::string preparedTorrentProblem(const std::vector<std::pair<std::string, std::int64_t>>& files) {
  const std::int64_t maxShard = tokenShardBytes(kMaxShardTokens);
  std::map<std::string, std::int64_t> byName(files.begin(), files.end());
  if (byName.size() != files.size()) return "a file listed twice";
  const std::pair<const char*, std::int64_t> fixed[] = {
      {"run.json", kMaxRunManifestBytes}, {"tokenizer.json", kMaxTokenizerBytes}, {"data/val.bin", maxShard}};
  for (const auto& [name, most] : fixed) {
    const auto it = byName.find(name);
    if (it == byName.end()) return std::string("no ") + name;
    if (it->second > most)
      return std::string(name) + " of " + std::to_string(it->second) + " bytes, more than " + std::to_string(most);
    byName.erase(it);
  }
  std::int64_t tokens = 0;
  for (int i = 0; !byName.empty(); ++i) {
    const auto it = byName.find("data/" + trainShardName(i));
    if (it == byName.end() || i >= kMaxPreparedShards)
      return "\"" + byName.begin()->first + "\", which is not a file of a prepared run";
    const std::int64_t bytes = it->second;
    if (bytes < tokenShardBytes(1) || bytes > maxShard || (bytes - tokenShardBytes(0)) % 2)
      return it->first + " of " + std::to_string(bytes) + " bytes, not a token shard's size";
    tokens += (bytes - tokenShardBytes(0)) / 2;
    if (tokens > kMaxPreparedTrainTokens)
      return "more than " + std::to_string(kMaxPreparedTrainTokens) + " training tokens";
    byName.erase(it);
  }
  return tokens > 0 ? std::string() : "no training shard";
}

}  // namespace es::train
