// The run folder's disk (issue 14: every byte from the network is hostile): each fetch gets its
// own folder, none starts past the donor's disk quota, and whatever a round left behind is
// deleted. It alone knows what was fetched into the folder per round (to retire it), how often
// a content's fetch failed, and what the quota last allowed. Engine thread only.
#pragma once

#include "core/common/ids.h"
#include "core/node/node_config.h"
#include "core/node/node_log.h"
#include "core/node/swarm.h"

#include <cstdint>
#include <map>
#include <set>
#include <string>

namespace es::node {

class RunFolder {
 public:
  RunFolder(Swarm& swarm, const NodeConfig& config, const NodeLog& log);

  // What is on disk, plus `comingBytes` (the most that the fetches in flight may still bring), plus
  // what our own next writes may add, plus `bytes` must stay within the quota: the run folder
  // never exceeds it, whatever the senders send (the limits bound each file). Says once a round
  // (`round`) why not.
  bool allows(std::int64_t bytes, std::int64_t comingBytes, const QString& what, std::int64_t round);
  std::int64_t usedBytes() const { return diskUsed_; }  // at the last fetch decision
  bool quotaReached() const { return quotaReached_; }

  // Where a fetch of `round`'s contribution (or of a snapshot) goes; the fetch is remembered so
  // the round's retirement removes it.
  std::string contributionFolder(std::int64_t round, const ContentId& content);
  std::string snapshotFolder(const ContentId& content);
  // Another fetch of the round's (a sharded round's outputs): retired with its contributions.
  void noteFetched(std::int64_t round, const ContentId& content) { fetched_[round].insert(content); }
  // One more failed fetch of `content`: how many so far.
  int failedAgain(const ContentId& content) { return ++fetchRetries_[content]; }

  // Others' contributions are seeded two rounds after `mergedRound` (a peer catching up gathers
  // them again), then removed with their files.
  void retireFetchedBefore(std::int64_t mergedRound);
  // At start nothing in incoming/ belongs to a transfer (the session restores none): all of it
  // goes. At round close: round folders older than the retention, snapshots other than
  // `keepSnapshot`. Both times: temp files of other processes in the run's folders.
  void clean(bool atStart, std::int64_t mergedRound, const ContentId& keepSnapshot);

 private:
  std::int64_t runFolderBytes() const;

  Swarm& swarm_;
  const NodeConfig& config_;
  const NodeLog& log_;
  std::map<std::int64_t, std::set<ContentId>> fetched_;  // others' contributions we fetched (round → contents)
  std::set<ContentId> snapshotFetches_;                  // snapshots fetched (retired at round close)
  std::map<ContentId, int> fetchRetries_;                // content → failed fetches restarted
  std::int64_t quotaReportedRound_ = -1;                 // the quota message is said once a round
  bool quotaReached_ = false;
  std::int64_t diskUsed_ = 0;  // the run folder at the last fetch decision
};

}  // namespace es::node
