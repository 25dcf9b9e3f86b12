// One libtorrent session and everything the swarm protocol does with it: DHT discovery of the
// run's peers, record gossip (a BEP10 extension on the run torrent's connections) and BEP44
// mutable items, and checkpoint swarms (publish a file as a hybrid torrent, fetch one by info-hash).
//
// Threads: create and use it on one thread with a Qt event loop (the engine thread). libtorrent's
// notify callback and the gossip plugin only post a queued call here; alerts are drained and
// dispatched on this thread (docs/ARCHITECTURE.md, "Threads"). Signals carry plain types.
//
// Nothing in this header names libtorrent: the session lives behind a pimpl.
#pragma once

#include "core/common/expected.h"
#include "core/node/swarm.h"
#include "p2p/peer_record.h"
#include "p2p/record_book.h"
#include "p2p/swarm_settings.h"

#include <QObject>

#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace es::p2p {

class Identity;
struct TorrentFile;

// A transfer's state, as the node and the UI see it.
struct TransferStatus {
  std::string infoHash;  // v2 info-hash, hex (64 characters)
  std::string path;      // the file on disk (complete only when finished)
  std::int64_t totalBytes = 0;
  std::int64_t doneBytes = 0;
  std::int64_t uploadedBytes = 0;    // payload, this session
  std::int64_t downloadedBytes = 0;  // payload, this session
  int peers = 0;
  bool finished = false;
  bool seeding = false;
};

struct SwarmCounters {
  int recordsAccepted = 0;
  int recordsDropped = 0;  // = records().totalDrops()
  int hashFailures = 0;    // pieces that failed their hash check (a lying or damaged peer)
  int refusedFetches = 0;  // fetches whose metadata broke their limits
  int droppedAlerts = 0;   // times libtorrent's alert queue overflowed (reconcileTransfers ran)
  int dhtNodes = 0;
  int runPeers = 0;              // connections on the run torrent (half-open ones too)
  int runLinks = 0;              // of those, the established ones (handshake done)
  int recordKeys = 0;            // records in the book (≤ kMaxRecordKeys)
  int bannedKeys = 0;            // keys banned for equivocation
  int gossipRateDropped = 0;     // messages over a connection's token bucket
  int gossipInboxDropped = 0;    // messages dropped at the full inbox
  int gossipDisconnects = 0;     // connections cut for oversize or garbage
  int gossipAddressCapped = 0;   // connections cut: their address held its gossip slots already
  int gossipMostPerAddress = 0;  // the most gossip connections one address holds now
  int relinks = 0;               // times the run torrent's lost links were dialled again (p2p/run_links.h)
  std::int64_t bytesSent = 0;    // all traffic of the session (payload + protocol + DHT)
  std::int64_t bytesReceived = 0;
};

class SwarmSession : public QObject {
  Q_OBJECT

 public:
  // Starts the session (listening, DHT). Fails with a clear message for a bad listen address or
  // bootstrap entry.
  static Expected<std::unique_ptr<SwarmSession>> create(const SwarmSettings& settings, const Identity& identity);
  // Waits for libtorrent's network thread to close, at most settings.shutdownTimeoutMs.
  ~SwarmSession() override;
  // A session's network thread did not close in time and still runs: end the process with
  // std::_Exit once everything else is done (static destruction would pull libtorrent's state
  // from under that thread).
  static bool abandonedNetworkThread();

  int listenPort() const;  // the real port (when asked for port 0)
  // "IP:PORT", usable as another node's bootstrap entry: the listen address as given, or for a
  // wildcard (0.0.0.0, [::]) the most reachable interface address libtorrent listens on.
  std::string listenEndpoint() const;
  // Where we can be reached: every address libtorrent listens on (most reachable first), the
  // external address once learned (DHT nodes, peers or the router's port mapping; "" before),
  // the reachability self-test's line ("reachability: …", p2p/reachability.h; "" when the test
  // does not run, i.e. peers on one host), and all of it as one status-bar line.
  std::vector<std::string> listenAddresses() const;
  std::string externalAddress() const;
  std::string reachabilityLine() const;
  std::string networkSummary() const;

  // Joins a run: seeds (or fetches) the run torrent `torrentFile` (a .torrent, or a ".resume" file
  // of saveFetchState: the files it did not fetch stay unfetched) into `saveDir`, announces it on
  // the DHT and gossips records with its peers. The run id is the torrent's v2 info-hash (hex).
  // `rules`: the identity work the run asks of every key, and our key's nonce (it must have it).
  struct RunRules {
    int minWorkBits = 0;
    std::int64_t ownWork = 0;
  };
  Status joinRun(const std::string& torrentFile, const std::string& saveDir, const RunRules& rules);
  const std::string& runId() const;
  // A prepared run held in part (issue 40; p2p/swarm_run_files.cpp): the run torrent's files to
  // hold (paths below its folder; the others are not fetched), whether all of `files` are here,
  // and deleting `files` from disk (libtorrent then rechecks what it holds).
  Status setRunFiles(const std::set<std::string>& wanted);
  bool runFilesComplete(const std::set<std::string>& files) const;
  Status dropRunFiles(const std::set<std::string>& files);

  // Signs `record` (pk = our key, run = our run), stores it, gossips it and puts it as a BEP44
  // item. seq must be higher than our last one.
  Status publishRecord(const PeerRecord& record);
  const RecordBook& records() const;
  // Test-only: hands raw bytes to the gossip as if they were a record (to test how others react).
  void injectRawGossip(const std::string& bytes);

  // Checkpoint swarms. publishFile makes a deterministic hybrid torrent of `path` and seeds it;
  // returns the v2 info-hash (hex). publishFileAsync does the same with the hashing (the whole
  // file: v1 pieces and the v2 merkle tree) on a thread of its own and calls `done` back on this
  // object's thread, never from inside the call. fetch downloads `infoHash` into `saveDir` from the run's peers
  // and the DHT; progress and completion arrive as signals. With limits, the metadata is checked
  // before any piece is requested: content that breaks them is removed with its files and
  // reported by transferRefused. retire stops a transfer and, if asked, deletes its file.
  Expected<std::string> publishFile(const std::string& path);
  void publishFileAsync(const std::string& path, std::function<void(Expected<std::string>)> done);
  Status fetch(const std::string& infoHash, const std::string& saveDir, const node::FetchLimits& limits = {});
  void retire(const std::string& infoHash, bool deleteFile);
  // Saves what the fetched transfer `infoHash` is — its metadata, merkle trees, the files it holds
  // — as a libtorrent resume file at `path` (written atomically); fetchStateSaved tells when.
  // joinRun takes such a file (".resume") where a .torrent cannot be made again by hashing the
  // folder: a prepared run of which this peer fetched only some shards.
  Status saveFetchState(const std::string& infoHash, const std::string& path);
  // True while libtorrent still deletes a removed transfer's files (then filesRemoved follows).
  bool removingFiles(const std::string& infoHash) const;
  std::vector<TransferStatus> transfers() const;
  // Per-transfer upload cap (bytes/s, 0 = none); applies to loopback only with limitLocalPeers.
  void setTransferUploadLimit(const std::string& infoHash, int bytesPerSecond);

  // Session-wide caps (bytes/s, 0 = unlimited), applied at once: the donor's bandwidth settings.
  void setRateLimits(int uploadBytesPerSecond, int downloadBytesPerSecond);
  std::pair<int, int> rateLimits() const;  // what libtorrent holds now (upload, download)

  SwarmCounters counters() const;

 Q_SIGNALS:
  void recordAccepted(const es::p2p::PeerRecord& record);
  void recordDropped(const QString& sender, const QString& reason);
  // A key signed two records with one seq (p2p/record_book.h): its record is gone and it is refused.
  void keyBanned(const QString& peerId, const QString& reason);
  void transferProgress(const QString& infoHash, qint64 doneBytes, qint64 totalBytes);
  void transferFinished(const QString& infoHash, const QString& path);
  void transferFailed(const QString& infoHash, const QString& reason);
  void transferRefused(const QString& infoHash, const QString& reason);  // removed: broke the fetch's limits
  void filesRemoved(const QString& infoHash);                           // a removed transfer's files are gone from disk
  void fetchStateSaved(const QString& infoHash, const QString& error);  // saveFetchState: "" = saved
  void pieceHashFailed(const QString& infoHash);
  void runPeersChanged(int peers);
  void networkChanged();  // listen/external address or reachability changed (lines go to settings.log)

 private:
  SwarmSession();
  Expected<std::string> seedMadeTorrent(const std::string& path, Expected<TorrentFile> torrent);
  struct Impl;
  std::unique_ptr<Impl> impl_;
  friend struct Impl;
};

}  // namespace es::p2p
