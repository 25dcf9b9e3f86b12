// SwarmSession's private state, shared by swarm_session.cpp (session, alerts, records) and
// swarm_transfers.cpp (checkpoint swarms). Private to p2p/.
#pragma once

#include "p2p/dial_back.h"
#include "p2p/identity.h"
#include "p2p/listen_port_hint.h"
#include "p2p/network_monitor.h"
#include "p2p/record_book.h"
#include "p2p/record_gossip.h"
#include "p2p/run_links.h"
#include "p2p/swarm_session.h"

#include <libtorrent/fwd.hpp>
#include <libtorrent/session.hpp>
#include <libtorrent/session_params.hpp>
#include <libtorrent/torrent_handle.hpp>

#include <QThreadPool>
#include <QTimer>

#include <atomic>
#include <chrono>
#include <map>
#include <optional>
#include <set>

namespace es::p2p {

struct Transfer {
  lt::torrent_handle handle;
  std::string saveDir;
  std::string name;        // file name, once the metadata is known
  bool published = false;  // we made it (seeding from the start)
  bool finished = false;
  bool flushing = false;        // all pieces passed; waiting for them to be on disk (onCacheFlushed)
  bool awaitingCheck = false;   // in upload mode until its metadata passed `limits`
  bool seedingStopped = false;  // fetched content that reached settings.fetchedSeedRatio
  node::FetchLimits limits;
  std::int64_t lastReportedDone = -1;
  std::chrono::steady_clock::time_point added;
  std::chrono::steady_clock::time_point lastAnnounce;  // our last forced DHT announce of it
};

// A fetch asked for while its content's files are still being deleted (p2p/swarm_deletions.cpp).
struct DeferredFetch {
  std::string saveDir;
  node::FetchLimits limits;
};

struct SwarmSession::Impl {
  SwarmSession* owner = nullptr;
  SwarmSettings settings;
  Identity identity;
  std::unique_ptr<lt::session> session;
  std::shared_ptr<GossipHub> hub = std::make_shared<GossipHub>();
  std::shared_ptr<ListenPortHint> portHint = std::make_shared<ListenPortHint>();  // p2p/listen_port_hint.h
  std::atomic<bool> pumpQueued{false};

  // The run.
  std::string runId;
  std::string salt;  // BEP44 salt: the first 16 bytes of the run id (hex → 32 characters)
  lt::torrent_handle runHandle;
  lt::sha1_hash rendezvous;  // the DHT key run peers announce under (see announceRun)
  std::optional<RecordBook> book;
  std::int64_t lastSeq = 0;
  std::int64_t ownWork = 0;  // our key's identity-work nonce, in every record we sign
  std::chrono::steady_clock::time_point joinedAt;
  QTimer announceTimer, pollTimer, progressTimer;
  int runPeers = 0;
  int retryMs = 0;  // the next fast rendezvous interval (backs off while peers are missing)
  std::chrono::steady_clock::time_point lastAnnounce, lastLookup, lastPeerKick;

  std::map<std::string, Transfer> transfers;      // v2 info-hash hex → transfer
  std::map<std::string, std::string> stateFiles;  // saveFetchState: v2 info-hash hex → where to
  // publishFileAsync hashes here, one file at a time (in order; a second core stays for training
  // and the network), so the engine thread keeps pumping alerts, gossip and timers meanwhile.
  QThreadPool hashing;
  SwarmCounters counters;
  std::unique_ptr<NetworkMonitor> network;  // addresses and the reachability self-test

  void reportNetwork();  // hands the monitor's new lines to settings.log, then networkChanged()

  explicit Impl(const Identity& id) : identity(id) {}
  void queuePump();
  void pump();
  void dispatch(lt::alert* alert);
  void onDhtItem(const lt::dht_mutable_item_alert& item);              // a BEP44 record
  void onRendezvousPeers(const lt::dht_get_peers_reply_alert& reply);  // the run's peers: dialled
  void onSessionStats(const lt::session_stats_alert& stats);           // traffic, DHT size
  void onDhtBootstrapped();                                            // announce and look up at once
  void onAlertsDropped();  // the queue overflowed: transfers re-checked from their state
  void drainGossip();
  void offerRecord(const std::string& bytes, const std::string& sender, const PublicKey* expectedKey);
  void announceRun();
  void refreshRunPeers();
  bool isSelf(const lt::tcp::endpoint& endpoint) const;
  // swarm_links.cpp: the run peers we dial ourselves, and relinking after the links dropped.
  struct RunLinkView {
    std::vector<lt::tcp::endpoint> dialable;  // established links we dialled (or uTP): we can dial them again
    int established = 0;                      // every established link (handshake done)
    bool allDialled = true;                   // no incoming TCP link among them
    int dialling = 0;                         // connections not yet links (connecting, handshaking)
  };
  RunLinkView viewRunLinks() const;
  std::vector<lt::tcp::endpoint> dialTargets() const;  // linked now or within RunLinks' memory
  void connectRunPeers(const lt::torrent_handle& handle, const std::vector<lt::tcp::endpoint>& runPeers);
  void relinkRun(std::chrono::steady_clock::time_point now);
  void linkPeersMetOnTransfers(std::chrono::steady_clock::time_point now);
  RunLinks runLinks;
  std::chrono::steady_clock::time_point lastMetLink;  // linkPeersMetOnTransfers' last dial
  std::size_t lastRendezvousPeers = 0;                // what the last rendezvous line said
  std::set<std::string> droppedKindsLogged;           // record refusal kinds said once in the log
  std::size_t lastRelinkLost = 0;                     // what the last "Run links lost" line said; 0 once they are back
  void dialBack(const lt::tcp::endpoint& endpoint);   // swarm_rendezvous.cpp
  std::unique_ptr<DialBackProber> dialBacks;          // made with the session (its probes are owner's children)
  // swarm_records.cpp: the record book's side of the session (gossip in, BEP44 polls, expiry).
  void pollRecords();
  void expireRecords();
  void forgetRecord(const PublicKey& key);     // evicted, expired or banned: no longer handed to new peers
  void strike(const std::string& sender);      // a rejected record from `sender`
  std::map<std::string, int> rejectsBySender;  // for strike(); at most kMaxBadSenders entries
  void kickTransfers();
  // swarm_transfers.cpp
  void onTransferFinished(const lt::torrent_handle& handle);
  void onResumeData(const lt::torrent_handle& handle, const lt::add_torrent_params* params, const std::string& error);
  void onCacheFlushed(const lt::torrent_handle& handle);
  void onMetadata(const lt::torrent_handle& handle);
  void limitSeeding(Transfer& t);
  void onTransferError(const lt::torrent_handle& handle, const std::string& message);
  void onStateUpdate(const std::vector<lt::torrent_status>& statuses);
  Transfer* findTransfer(const lt::torrent_handle& handle, std::string* hash = nullptr);
  void reconcileTransfers();  // after alerts were dropped: each transfer's state read, not told
  // swarm_deletions.cpp: a fetch of content whose files are still being deleted waits for that.
  std::map<std::string, std::chrono::steady_clock::time_point> deleting;            // hash → removed at
  std::map<std::string, DeferredFetch> deferredFetches;                             // hash → the fetch asked for
  void removeWithFiles(const std::string& hash, const lt::torrent_handle& handle);  // erases it from `transfers`
  bool deferWhileDeleting(const std::string& hash, const std::string& saveDir, const node::FetchLimits& limits);
  void onFilesDeleted(const lt::info_hash_t& hashes);
  void filesDeleted(const std::string& hash);  // starts the fetch deferred for it, if any
  void releaseOverdueDeletions();              // deletions whose alert never came (kickTransfers)
};

std::string v2Hex(const lt::info_hash_t& hashes);
// The record book's clock: steady milliseconds (expiry and proof ages must not jump with the wall clock).
std::int64_t nowMs();
// swarm_network.cpp: puts the DHT state saved at settings.dhtStatePath into `params` (logged).
void loadDhtState(const SwarmSettings& settings, lt::session_params& params);

}  // namespace es::p2p
