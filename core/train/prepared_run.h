// The files of a prepared run (DataConfig::prepared): a folder made by `expertswarm create-run`
// that is the run torrent as it is shared — run.json, tokenizer.json, data/val.bin and
// data/train-NNN.bin, nothing else. Checked by stat() before any of it is read: a folder fetched
// from strangers whose files disagree with its run.json (a count, a size, an extra or missing
// file, a link) is refused with the file named.
#pragma once

#include "core/common/expected.h"
#include "core/train/run_manifest.h"

#include <string>
#include <utility>
#include <vector>

namespace es::train {

std::string trainShardName(int index);  // "train-007.bin" (3 digits at least)

// Relative paths, in the order a run folder lists them: run.json, tokenizer.json, data/val.bin,
// then data/train-000.bin ….
std::vector<std::string> preparedRunFiles(const RunManifest& manifest);

// The size a token shard of `tokens` tokens has on disk (token_shard.h).
std::int64_t tokenShardBytes(std::int64_t tokens);

// `dir` holds exactly preparedRunFiles(manifest) (hidden files and our partial writes aside, which
// no torrent carries), each a regular file (not a link) of the size run.json implies;
// tokenizer.json at most kMaxTokenizerBytes. With `someShards`, training shards may be missing
// (a peer's copy holds the shards assigned to it: shard_assignment.h), but one must be there.
Status checkPreparedFiles(const RunManifest& manifest, const std::string& dir, bool someShards = false);

// The indices of the training shards present in `dir` (after checkPreparedFiles).
std::vector<int> presentShards(const RunManifest& manifest, const std::string& dir);
std::vector<int> presentShardsIn(const std::string& dir, int shardCount);

// A prepared run's copy that holds only some of its shards carries its torrent as this resume
// file (hidden: no torrent includes it), written when it was fetched; a complete folder is hashed
// into its torrent instead.
constexpr const char* kPartialRunState = ".run.resume";
// The torrent create-run made of the folder (hidden too): a host hashing the folder again must get
// the same, or a file changed since (a damaged shard) and the host would serve another run.
constexpr const char* kCreatedRunTorrent = ".run.torrent";

// A prepared run's torrent as its metadata lists it (each file's path below the folder, and its
// size), judged before any of it is fetched: exactly the files a prepared run has — shards
// numbered from 000 without a gap — each within its bound, the shards' tokens within
// kMaxPreparedTrainTokens. "" = allowed, else what is wrong. Whether the sizes are the ones
// run.json lists is checkPreparedFiles' job once run.json is here.
std::string preparedTorrentProblem(const std::vector<std::pair<std::string, std::int64_t>>& files);

}  // namespace es::train
