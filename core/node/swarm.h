// What the node needs from the network, as an interface (docs/ARCHITECTURE.md, "Modules and
// layering"): the p2p/ layer implements it over libtorrent (p2p/p2p_swarm.h); tests can implement
// it in memory. Plain types only, so core/ never sees libtorrent or libsodium.
#pragma once

#include "core/common/expected.h"
#include "core/common/ids.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace es::node {

// What this peer announces (becomes its signed record; p2p/p2p_swarm.cpp converts both ways).
struct Announcement {
  std::int64_t round = 0;                      // the round it is in
  std::vector<int> claims;                     // experts it trains
  std::int64_t leaseUntil = 0;                 // claims hold through this round
  std::map<std::int64_t, ContentId> contrib;   // round → its contribution (recent rounds: record ≤ 1000 bytes)
  std::map<std::int64_t, ContentId> snapshot;  // round → a merged-state snapshot
  std::map<std::int64_t, std::string> merged;  // round → fingerprint of the state it merged (the last two rounds)
  std::map<std::int64_t, std::string> sets;    // round → digest of the contributions it merged (merged_set.h)
  std::map<std::int64_t, ContentId> outputs;   // round → its reducer index (reducer_index.h), as a reducer
  std::int64_t steps = 0;
  double loss = 0;
  double tokensPerSecond = 0;
};

// Another peer as the swarm layer hands it over: who (id, key) and what its newest signed record,
// already verified, announces.
struct SwarmPeer {
  PeerId id;
  std::string publicKey;  // hex
  std::int64_t seq = 0;   // its record's seq: a new one = the record changed
  Announcement announced;
};

// One checkpoint transfer of the swarm layer (ours seeding, or someone's being fetched).
struct SwarmTransfer {
  ContentId contentId;
  std::int64_t totalBytes = 0, doneBytes = 0, uploadedBytes = 0, downloadedBytes = 0;
  int connections = 0;
  bool finished = false;
};

// What moves over the network, for views (and for the deadline: is an awaited transfer moving?).
struct SwarmTraffic {
  std::vector<SwarmTransfer> transfers;
  std::int64_t bytesSent = 0, bytesReceived = 0;  // everything the session sent/received
};

// What the node accepts for one fetch. The swarm layer checks the content's metadata (its file
// list) against it before a single piece is requested, and refuses what does not fit: the fetch
// is removed with its files and reported by fetchFailed with refused = true (the sender's fault).
// Any limit set means exactly one plain file (no symlink, no attributes).
struct FetchLimits {
  std::vector<std::int64_t> sizes;  // of one of these sizes (empty: any size)
  std::int64_t maxBytes = 0;        // of at most this many bytes (0: no bound)
  std::string name = {};            // with this name (empty: any name of [A-Za-z0-9._-])
  // A folder instead of one file, when set (a prepared run's torrent): it is given the folder's
  // name and each file's path below it with its size — plain files whose every path component
  // is [A-Za-z0-9._-], checked by the swarm layer first — and says what is wrong ("" = allowed).
  using FolderFiles = std::vector<std::pair<std::string, std::int64_t>>;
  std::function<std::string(const std::string& folder, const FolderFiles& files)> folder = {};
  // Of an allowed folder, the files to fetch (paths below the folder; unset: all of them). The
  // others are never asked for, so never written (v2 aligns every file to its own pieces).
  std::function<std::set<std::string>(const FolderFiles& files)> folderWanted = {};
  bool any() const { return !sizes.empty() || maxBytes > 0 || !name.empty() || folder; }
  // The most bytes a file within these limits can have (0: unbounded).
  std::int64_t most() const { return sizes.empty() ? maxBytes : std::max(sizes.back(), maxBytes); }
};

// What a joining peer asks the swarm layer for: `count` experts for `round`, the leases judged by
// es::leaseHolds (core/common/lease_terms.h) with the run's lease_rounds, and the peers in
// `excluded` (ids the node banned or found silent) owning nothing — the node decides who is
// hostile, the swarm layer only counts owners.
struct ClaimRequest {
  std::int64_t round = 0;
  int nExperts = 0;
  int count = 0;
  int leaseRounds = 1;
  std::set<PeerId> excluded;
};

struct SwarmEvents {
  std::function<void()> peersChanged;                                              // a record arrived
  std::function<void(const ContentId& content, const std::string& path)> fetched;  // verified, on disk
  // refused: the metadata broke the fetch's limits (never retry it); otherwise a transfer error.
  std::function<void(const ContentId& content, const std::string& reason, bool refused)> fetchFailed;
  // The swarm layer caught a peer cheating in its records (two signed records with one seq): its
  // record is gone from peers() already; the node bans the id as for a rejected contribution.
  std::function<void(const PeerId& peer, const std::string& reason)> peerBanned;
};

class Swarm {
 public:
  virtual ~Swarm() = default;
  virtual void setEvents(SwarmEvents events) = 0;  // called back on the node's thread
  virtual PeerId selfId() const = 0;
  virtual std::string runId() const = 0;
  virtual Status announce(const Announcement& announcement) = 0;
  virtual std::vector<SwarmPeer> peers() const = 0;  // everyone else with a valid record
  // Seeds the file at `path`; `done` gets its content id (or why not) later, on the node's thread,
  // never from inside the call: hashing a snapshot takes seconds and must not stall the thread
  // that pumps the network (docs/ARCHITECTURE.md, "Threads").
  using Published = std::function<void(Expected<ContentId> content)>;
  virtual void publish(const std::string& path, Published done) = 0;
  // Into `dir` (the caller gives every fetch its own folder: a torrent's file name is the
  // sender's choice and must not reach another fetch's file).
  virtual Status fetch(const ContentId& content, const std::string& dir, const FetchLimits& limits) = 0;
  virtual void retire(const ContentId& content, bool deleteFile) = 0;
  // Experts to claim: fewest live owners first, deterministic per peer (p2p/leases.h).
  virtual std::vector<int> chooseClaims(const ClaimRequest& request) const = 0;
  virtual int connections() const = 0;
  virtual SwarmTraffic traffic() const { return {}; }
};

}  // namespace es::node
