// MemorySwarm's folders (support/memory_swarm.h): a published folder — a sharded contribution
// (core/sync/shard_file.h), a prepared run — as the p2p layer takes one: one content id over every
// file's path and bytes, its file list shown to FetchLimits::folder before anything moves, and
// only FetchLimits::folderWanted's files copied (v2 fetches a file alone).
#pragma once

#include "core/common/expected.h"
#include "core/common/ids.h"
#include "core/node/swarm.h"

#include <QString>

#include <set>
#include <string>

namespace es::node::memory_folders {

// Every plain file below `folder`: its path below it ('/'-separated) and size, sorted by path.
FetchLimits::FolderFiles listFiles(const QString& folder);

// SHA-256 over each file's path, size and bytes, in path order: equal folders, one id.
Expected<ContentId> folderId(const QString& folder);

// What a fetch of `folder` into `dir` takes, by `limits`: the files to copy (refused: why not).
struct FolderFetch {
  std::set<std::string> wanted;
  std::string refused;  // non-empty: the limits refuse the folder (the sender's fault)
};
FolderFetch plan(const QString& folder, const FetchLimits& limits);

// Copies `wanted` of `folder` into `dir`/<its name>/; → that path, or why not.
Expected<std::string> copyInto(const QString& folder, const std::string& dir, const std::set<std::string>& wanted);

}  // namespace es::node::memory_folders
