// What this peer's own signed record says (Swarm::announce): the round it trains, its claims, its
// recent contributions and snapshots, and the states (and sets) it merged. Node owns it and alone
// changes it; the agreement reads it. Header-only.
#pragma once

#include "core/common/ids.h"
#include "core/node/swarm.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace es::node {

struct OwnRecord {
  std::int64_t round = 0;        // the round being trained
  std::int64_t mergedRound = 0;  // the last round merged (or adopted from a snapshot)
  std::vector<int> claims;
  std::map<std::int64_t, ContentId> contrib;         // our published contributions (round → content)
  std::map<std::int64_t, ContentId> snapshots;       // our published snapshots (round → content)
  std::map<ContentId, std::string> snapshotFiles;    // and their files (content → path), as long as published
  std::map<std::int64_t, std::string> fingerprints;  // the states we merged (round → fingerprint), last two
  std::map<std::int64_t, std::string> setDigests;    // round → digest of the set we merged (merged_set.h)
  std::map<std::int64_t, ContentId> outputs;         // our reducer indexes (round → content), as a reducer
  std::int64_t steps = 0;
  double loss = 0, tokensPerSecond = 0;

  std::optional<std::string> fingerprintOf(std::int64_t r) const {
    const auto it = fingerprints.find(r);
    return it == fingerprints.end() ? std::nullopt : std::optional<std::string>(it->second);
  }
  void noteFingerprint(std::int64_t r, const std::string& fingerprint) {
    fingerprints[r] = fingerprint;
    while (fingerprints.size() > 2) fingerprints.erase(fingerprints.begin());
  }
  void noteSetDigest(std::int64_t r, const std::string& digest) {
    setDigests[r] = digest;
    while (setDigests.size() > 2) setDigests.erase(setDigests.begin());
  }
  // Stopping, or before the first claim: no claims and no lease (others re-claim at once).
  Announcement announcement(bool stopping, int leaseRounds) const {
    Announcement a;
    a.round = round;
    a.claims = stopping ? std::vector<int>{} : claims;
    a.leaseUntil = stopping || claims.empty() ? 0 : round + leaseRounds;
    for (auto it = contrib.rbegin(); it != contrib.rend() && a.contrib.size() < 3; ++it) a.contrib.insert(*it);
    for (auto it = snapshots.rbegin(); it != snapshots.rend() && a.snapshot.size() < 2; ++it) a.snapshot.insert(*it);
    // The last two (a peer still applying the round before reads that one): the fullest record
    // is 890 of its 1000 bytes (tst_peer_record recordsOfTheFullestAnnouncementFit).
    for (auto it = outputs.rbegin(); it != outputs.rend() && a.outputs.size() < 2; ++it) a.outputs.insert(*it);
    a.merged.insert(fingerprints.begin(), fingerprints.end());
    for (const auto& [r, digest] : setDigests)
      if (fingerprints.count(r)) a.sets[r] = digest;  // a snapshot's set is not known
    a.steps = steps;
    a.loss = loss;
    a.tokensPerSecond = tokensPerSecond;
    return a;
  }
};

}  // namespace es::node
