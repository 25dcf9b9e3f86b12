// The state folder's round directories: after the merge of round N the peer's state (base +
// training state) lives in <stateDir>/round-NNNNNNNN. Written so that a kill at any moment leaves
// at least one complete round to resume from, and a damaged newest round falls back to the one
// before it (issue 14, item 4). Plain std::filesystem + POSIX fsync: no Qt, no Torch.
//
// Commit protocol for round N:
//  1. the files go into round-N.partial (each written atomically and fsynced by its writer);
//     the folder is fsynced;
//  2. a folder of the same round already there (the state of round N written again, e.g. after
//     adopting the snapshot of the round we merged) is renamed to round-N.old — never removed
//     first, as it was: a kill between "remove" and "rename" left no complete round at all;
//  3. round-N.partial is renamed to round-N and the state folder fsynced: from here round N is
//     durable;
//  4. only then do round-N.old and all but the kKeptRounds newest complete rounds go.
// A ".partial" folder is never loaded; a ".old" one is complete (step 2 renamed a committed
// round) and is the fallback for a kill between steps 2 and 3.
#pragma once

#include "core/common/expected.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace es::node::round_dirs {

// The newest round plus the one before it: the fallback when the newest is damaged.
constexpr int kKeptRounds = 2;

std::string name(std::int64_t round);  // "round-00000005"

// Writes round `round` with `write(folder)` and commits it as described above. An error from
// `write` or from the file system leaves every complete round as it was.
Status commit(const std::string& stateDir, std::int64_t round, const std::function<Status(const std::string&)>& write);

struct RoundDir {
  std::int64_t round = 0;
  std::string path;
};
// The complete round folders of `stateDir`, newest first (a round's ".old" copy after the round
// itself). Names that are not ours are ignored.
std::vector<RoundDir> complete(const std::string& stateDir);

// Tries `load(dir)` on each complete round, newest first, until one succeeds; returns its round,
// or nullopt when there is none. `skipped` gets one line per damaged round that was passed over.
// Error: every complete round failed (the newest's error; nothing is removed — the user's data).
Expected<std::optional<std::int64_t>> loadNewest(const std::string& stateDir,
                                                 const std::function<Status(const RoundDir&)>& load,
                                                 std::vector<std::string>& skipped);

}  // namespace es::node::round_dirs
