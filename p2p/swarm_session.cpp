// The session, its alert pump, DHT discovery of the run and the record gossip.
#include "p2p/swarm_session.h"

#include "p2p/dht_state.h"
#include "p2p/identity_work.h"
#include "p2p/lt_settings.h"
#include "p2p/run_torrent_file.h"
#include "p2p/swarm_session_impl.h"
#include "p2p/torrent_maker.h"

#include <libtorrent/alert_types.hpp>
#include <libtorrent/bdecode.hpp>
#include <libtorrent/bencode.hpp>
#include <libtorrent/hex.hpp>
#include <libtorrent/ip_filter.hpp>
#include <libtorrent/peer_info.hpp>
#include <libtorrent/pex_flags.hpp>
#include <libtorrent/session_params.hpp>
#include <libtorrent/session_stats.hpp>
#include <libtorrent/torrent_info.hpp>

#include "core/common/bounded_wait.h"

#include <QMetaObject>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <iterator>

namespace es::p2p {
namespace {

std::atomic<bool> g_abandonedNetworkThread{false};  // see ~SwarmSession
using Clock = std::chrono::steady_clock;

// BEP44: the bytes a mutable item's signature covers (salt omitted when empty).
std::string bep44SignedBytes(const std::string& salt, std::int64_t seq, const std::string& value) {
  std::string out;
  if (!salt.empty()) out += "4:salt" + std::to_string(salt.size()) + ":" + salt;
  out += "3:seqi" + std::to_string(seq) + "e1:v" + value;
  return out;
}

std::array<char, 32> ltKey(const PublicKey& key) {
  std::array<char, 32> out{};
  std::copy(key.begin(), key.end(), out.begin());
  return out;
}

}  // namespace

std::string v2Hex(const lt::info_hash_t& hashes) { return lt::aux::to_hex(hashes.v2); }

SwarmSession::SwarmSession() = default;

Expected<std::unique_ptr<SwarmSession>> SwarmSession::create(const SwarmSettings& settings, const Identity& identity) {
  auto pack = toSettingsPack(settings);
  if (!pack) return makeError(pack.error());
  std::unique_ptr<SwarmSession> self(new SwarmSession());
  self->impl_ = std::make_unique<Impl>(identity);
  auto& d = *self->impl_;
  d.hashing.setMaxThreadCount(1);
  d.owner = self.get();
  d.settings = settings;
  d.dialBacks = std::make_unique<DialBackProber>(d.owner);
  {
    std::lock_guard lock(d.hub->mutex);
    d.hub->wake = [impl = &d] { impl->queuePump(); };
    d.hub->gossipSlots =
        AddressSlots(gossipConnectionsPerAddress(settings.sameHostSwarm, settings.gossipConnectionsPerAddress));
  }
  try {
    lt::session_params params(std::move(*pack));  // with libtorrent's default plugins (metadata, pex, smart ban)
    params.extensions.push_back(makeGossipPlugin(d.hub));
    params.extensions.push_back(makeListenPortPlugin(d.portHint));
    loadDhtState(settings, params);
    d.network = std::make_unique<NetworkMonitor>(!settings.sameHostSwarm,
                                                 std::chrono::seconds(settings.reachabilityGraceSeconds));
    d.portHint->advertise = !d.network->selfTest();  // "checking" until proven: see reportNetwork
    d.session = std::make_unique<lt::session>(std::move(params));
  } catch (const std::exception& e) {
    return makeError(std::string("cannot start the BitTorrent session: ") + e.what());
  }
  if (settings.limitLocalPeers) {
    // libtorrent exempts LAN and loopback peers from rate limits (its "local" peer class): put
    // every address in the global class so the limits apply to them too.
    lt::ip_filter everyone;
    everyone.add_rule(lt::make_address("0.0.0.0"), lt::make_address("255.255.255.255"),
                      1u << static_cast<std::uint32_t>(lt::session::global_peer_class_id));
    everyone.add_rule(lt::make_address("::"), lt::make_address("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"),
                      1u << static_cast<std::uint32_t>(lt::session::global_peer_class_id));
    d.session->set_peer_class_filter(everyone);
  }
  // Runs on libtorrent's thread with its alert lock held: only queue a call to our thread.
  d.session->set_alert_notify([impl = &d] { impl->queuePump(); });
  QObject::connect(&d.announceTimer, &QTimer::timeout, self.get(), [impl = &d] { impl->announceRun(); });
  QObject::connect(&d.pollTimer, &QTimer::timeout, self.get(), [impl = &d] { impl->pollRecords(); });
  QObject::connect(&d.progressTimer, &QTimer::timeout, self.get(), [impl = &d] {
    impl->session->post_torrent_updates();
    impl->session->post_session_stats();
    impl->refreshRunPeers();
    impl->kickTransfers();
    impl->expireRecords();
  });
  d.progressTimer.start(500);
  // listen_port() waits for the network thread, which has opened the sockets by then: this pump
  // handles their listen alerts, so the start lines can name the addresses actually listened on.
  d.session->listen_port();
  d.pump();
  return self;
}

SwarmSession::~SwarmSession() {
  // A file being hashed for publishFileAsync finishes first (one file: seconds for a 1 B-parameter
  // snapshot); its queued result is discarded with this object.
  if (impl_) impl_->hashing.waitForDone();
  if (!impl_ || !impl_->session) return;
  // Nothing may call into us once destruction starts: replace the callbacks first.
  impl_->session->set_alert_notify([] {});
  if (const auto& path = impl_->settings.dhtStatePath; !path.empty())  // before abort(): the DHT is still up
    if (auto saved = writeDhtState(path, impl_->session->session_state(lt::session::save_dht_state).dht_state);
        !saved && impl_->settings.log)
      impl_->settings.log("Cannot save the DHT state: " + saved.error());
  {
    std::lock_guard lock(impl_->hub->mutex);
    impl_->hub->wake = nullptr;
  }
  // abort() returns at once; the proxy's destructor waits for the network thread (2–40 ms over
  // TCP). This object lives on the engine thread, never the GUI thread, so the wait freezes
  // nothing. The wait is bounded: libtorrent 2.0's teardown can block for good (uTP sockets left
  // behind by a stalled interface: arvidn/libtorrent#8552; blocking UDP sends in UPnP/NAT-PMP,
  // fixed upstream but not in Debian 12's 2.0.8), and a client must stop when asked.
  auto proxy = std::make_shared<lt::session_proxy>(impl_->session->abort());
  impl_->session.reset();
  if (!finishWithin([proxy = std::move(proxy)]() mutable { proxy.reset(); },
                    std::chrono::milliseconds(impl_->settings.shutdownTimeoutMs))) {
    g_abandonedNetworkThread = true;
    if (impl_->settings.log)
      impl_->settings.log("libtorrent's network thread did not close within " +
                          std::to_string(impl_->settings.shutdownTimeoutMs / 1000) + " s; leaving without it");
  }
}

bool SwarmSession::abandonedNetworkThread() { return g_abandonedNetworkThread; }

int SwarmSession::listenPort() const { return impl_->session->listen_port(); }

void SwarmSession::Impl::queuePump() {
  if (pumpQueued.exchange(true)) return;  // one queued call drains everything
  QMetaObject::invokeMethod(
      owner, [this] { pump(); }, Qt::QueuedConnection);
}

void SwarmSession::Impl::pump() {
  pumpQueued = false;
  std::vector<lt::alert*> alerts;
  session->pop_alerts(&alerts);                                      // pointers valid until the next pop_alerts
  static const bool trace = std::getenv("ES_P2P_TRACE") != nullptr;  // every alert to stderr
  for (auto* alert : alerts) {
    if (trace) std::fprintf(stderr, "[%s] %s\n", alert->what(), alert->message().c_str());
    dispatch(alert);
  }
  reportNetwork();
  drainGossip();
}

void SwarmSession::Impl::onDhtItem(const lt::dht_mutable_item_alert& item) {
  if (item.item.type() == lt::entry::undefined_t) return;  // "not found"
  PublicKey key{};
  std::copy(item.key.begin(), item.key.end(), key.begin());
  // DHT nodes may still hold an older item: that is not the publisher's fault, not a replay.
  if (auto known = book ? book->find(key) : std::nullopt; known && known->seq >= item.seq) return;
  std::string bytes;
  lt::bencode(std::back_inserter(bytes), item.item);
  offerRecord(bytes, "dht:" + peerIdOf(key), &key);
}

void SwarmSession::Impl::onRendezvousPeers(const lt::dht_get_peers_reply_alert& reply) {
  if (reply.info_hash != rendezvous || !runHandle.is_valid()) return;
  std::vector<lt::tcp::endpoint> others;
  for (const auto& endpoint : reply.peers())
    if (!isSelf(endpoint)) others.push_back(endpoint);
  // Not linked to anyone while the DHT names run peers: the endpoints may be in the peer list
  // already, marked seeds by a short earlier link, and libtorrent would never dial them
  // (p2p/run_links.h). With no link and no dial under way, forgetting them costs nothing. Not
  // only once we hold records: a peer that never linked holds none, and waited for links that
  // never came (CI, 2026-12-06: tst_swarm_node's bootstrap peer trained alone for five rounds
  // while the DHT named its three peers, who merged without it).
  if (const auto view = viewRunLinks(); view.established == 0 && view.dialling == 0 && !others.empty())
    runHandle.clear_peers();
  // TCP (no pex_utp): a stranger's dial to the announced port is what the reachability
  // self-test needs to see (p2p/reachability.h); transfers still use uTP where it works.
  for (const auto& endpoint : others) runHandle.connect_peer(endpoint, lt::peer_info::dht, lt::pex_encryption);
  if (others.size() != lastRendezvousPeers &&
      settings.log)  // said when it changes: what the DHT names is a fact to debug by
    settings.log("Rendezvous: the DHT names " + std::to_string(others.size()) + " other run peer" +
                 (others.size() == 1 ? "" : "s"));
  lastRendezvousPeers = others.size();
}

void SwarmSession::Impl::onSessionStats(const lt::session_stats_alert& stats) {
  static const int sent = lt::find_metric_idx("net.sent_bytes"), received = lt::find_metric_idx("net.recv_bytes");
  static const int nodes = lt::find_metric_idx("dht.dht_nodes");
  const auto values = stats.counters();
  if (sent >= 0) counters.bytesSent = values[sent];
  if (received >= 0) counters.bytesReceived = values[received];
  if (nodes >= 0) network->tick(int(values[nodes]), Clock::now());  // the self-test's grace runs from here
}

// Announce and look up at once: the first traversals, started before the routing table held
// anyone, found nobody (the netlab: first records ~31 s after the start; with this, 15-17 s, the
// bootstrap's own ~15 s of timeouts towards unreachable nodes).
void SwarmSession::Impl::onDhtBootstrapped() {
  if (settings.log) settings.log("DHT bootstrapped");
  retryMs = settings.firstRetryMs;
  announceRun();
}

// The queue overflowed (a burst of peers or records): the alerts our transfers wait for (metadata,
// finished, errors) may be among the lost. Their handlers are idempotent, so each transfer's state
// is read and handled as if its alert had come. Records need nothing: BEP44 polls and gossip
// resend them.
void SwarmSession::Impl::onAlertsDropped() {
  ++counters.droppedAlerts;
  if (settings.log) settings.log("libtorrent dropped alerts (queue full); transfers re-checked from their state");
  reconcileTransfers();
}

void SwarmSession::Impl::dispatch(lt::alert* a) {
  switch (a->type()) {
    case lt::dht_mutable_item_alert::alert_type:
      onDhtItem(*static_cast<lt::dht_mutable_item_alert*>(a));
      return;
    case lt::dht_get_peers_reply_alert::alert_type:
      onRendezvousPeers(*static_cast<lt::dht_get_peers_reply_alert*>(a));
      return;
    case lt::dht_bootstrap_alert::alert_type:
      onDhtBootstrapped();
      return;
    case lt::hash_failed_alert::alert_type:
      ++counters.hashFailures;
      Q_EMIT owner->pieceHashFailed(
          QString::fromStdString(v2Hex(static_cast<lt::hash_failed_alert*>(a)->handle.info_hashes())));
      return;
    case lt::metadata_received_alert::alert_type:
      onMetadata(static_cast<lt::metadata_received_alert*>(a)->handle);
      return;
    case lt::torrent_finished_alert::alert_type:
      onTransferFinished(static_cast<lt::torrent_finished_alert*>(a)->handle);
      return;
    case lt::cache_flushed_alert::alert_type:
      onCacheFlushed(static_cast<lt::cache_flushed_alert*>(a)->handle);
      return;
    case lt::torrent_error_alert::alert_type: {
      const auto* e = static_cast<lt::torrent_error_alert*>(a);
      onTransferError(e->handle, e->error.message());
      return;
    }
    case lt::file_error_alert::alert_type: {
      const auto* e = static_cast<lt::file_error_alert*>(a);
      onTransferError(e->handle, e->error.message() + " (" + e->filename() + ")");
      return;
    }
    case lt::torrent_deleted_alert::alert_type:
      onFilesDeleted(static_cast<lt::torrent_deleted_alert*>(a)->info_hashes);
      return;
    case lt::torrent_delete_failed_alert::alert_type:  // nothing left to delete, or it could not be
      onFilesDeleted(static_cast<lt::torrent_delete_failed_alert*>(a)->info_hashes);
      return;
    case lt::session_stats_alert::alert_type:
      onSessionStats(*static_cast<lt::session_stats_alert*>(a));
      return;
    case lt::save_resume_data_alert::alert_type: {
      const auto* r = static_cast<lt::save_resume_data_alert*>(a);
      onResumeData(r->handle, &r->params, {});
      return;
    }
    case lt::save_resume_data_failed_alert::alert_type: {
      const auto* r = static_cast<lt::save_resume_data_failed_alert*>(a);
      onResumeData(r->handle, nullptr, r->error.message());
      return;
    }
    case lt::alerts_dropped_alert::alert_type:
      onAlertsDropped();
      return;
    case lt::state_update_alert::alert_type:
      onStateUpdate(static_cast<lt::state_update_alert*>(a)->status);
      return;
    default:
      network->handle(a);  // listen/external addresses, port mappings, the reachability self-test
      return;
  }
}

Status SwarmSession::joinRun(const std::string& torrentFile, const std::string& saveDir, const RunRules& rules) {
  auto& d = *impl_;
  if (d.book) return makeError("already in run " + d.runId);
  auto loaded = loadRunTorrent(torrentFile);
  if (!loaded) return makeError(loaded.error());
  auto& [torrent, params] = *loaded;
  lt::error_code ec;
  params.save_path = saveDir;
  params.userdata = runTag(d.hub.get());  // the gossip rides on this torrent's connections
  params.flags &= ~(lt::torrent_flags::auto_managed | lt::torrent_flags::paused);
  d.runHandle = d.session->add_torrent(std::move(params), ec);
  if (ec) return makeError("cannot add the run torrent: " + ec.message());
  d.runId = torrent.infoHashV2;
  std::copy_n(d.runHandle.info_hashes().v2.data(), lt::sha1_hash::size(), d.rendezvous.data());
  d.salt = d.runId.substr(0, 32);
  if (identityWorkBits(d.identity.publicKey(), rules.ownWork) < rules.minWorkBits)
    return makeError("this identity's work is below the run's " + std::to_string(rules.minWorkBits) + " bits");
  d.ownWork = rules.ownWork;
  d.book.emplace(d.runId, rules.minWorkBits);
  d.book->pin(d.identity.publicKey());  // our own record: never evicted, never expired
  d.joinedAt = Clock::now();
  d.retryMs = d.settings.firstRetryMs;
  d.pollTimer.start(d.settings.bep44PollMs);
  d.announceRun();
  return {};
}

const std::string& SwarmSession::runId() const { return impl_->runId; }

Status SwarmSession::publishRecord(const PeerRecord& input) {
  auto& d = *impl_;
  if (!d.book) return makeError("join a run before publishing a record");
  PeerRecord record = input;
  record.run = d.runId;
  record.pk = d.identity.publicKey();
  record.work = d.ownWork;
  if (record.seq <= d.lastSeq)
    return makeError("record seq " + std::to_string(record.seq) + " is not above " + std::to_string(d.lastSeq));
  auto bytes = signRecord(record, d.identity);
  if (!bytes) return makeError(bytes.error());
  const auto result = d.book->offer(*bytes, "self", nullptr, nowMs());
  if (result.outcome != OfferOutcome::Accepted)
    return makeError(std::string("own record refused: ") + offerOutcomeName(result.outcome));
  d.lastSeq = record.seq;
  {
    std::lock_guard lock(d.hub->mutex);
    d.hub->current[toHex(record.pk)] = *bytes;
    d.hub->outbox.push_back(*bytes);
  }
  d.session->post_dht_stats();  // wakes the gossip plugin on the network thread
  // BEP44: the same bytes as a mutable item under our key; signed with libsodium (libtorrent's
  // signer expects another secret-key format — docs/ARCHITECTURE.md, "libtorrent notes").
  const std::string value = *bytes;
  const Identity identity = d.identity;
  const std::int64_t seq = record.seq;
  d.session->dht_put_item(
      ltKey(record.pk),
      [value, identity, seq](lt::entry& v, std::array<char, 64>& sig, std::int64_t& itemSeq, const std::string& salt) {
        v = lt::bdecode(value);
        itemSeq = seq;
        const auto signature = identity.sign(bep44SignedBytes(salt, seq, value));
        std::copy(signature.begin(), signature.end(), sig.begin());
      },
      d.salt);
  return {};
}

const RecordBook& SwarmSession::records() const {
  static const RecordBook empty("");
  return impl_->book ? *impl_->book : empty;
}

void SwarmSession::injectRawGossip(const std::string& bytes) {
  {
    std::lock_guard lock(impl_->hub->mutex);
    impl_->hub->outbox.push_back(bytes);
  }
  impl_->session->post_dht_stats();
}

}  // namespace es::p2p
