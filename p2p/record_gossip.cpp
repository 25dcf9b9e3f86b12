#include "p2p/record_gossip.h"

#include <libtorrent/alert_types.hpp>
#include <libtorrent/bdecode.hpp>
#include <libtorrent/entry.hpp>
#include <libtorrent/error_code.hpp>
#include <libtorrent/peer_connection_handle.hpp>

#include <algorithm>
#include <chrono>
#include <vector>

namespace es::p2p {
namespace {

constexpr int kOurMessageId = 31;  // our id for es_record in the BEP10 handshake "m" dictionary

std::int64_t steadyMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

class GossipPeer final : public lt::peer_plugin {
 public:
  GossipPeer(lt::peer_connection_handle pc, std::shared_ptr<GossipHub> hub)
      : pc_(std::move(pc)),
        hub_(std::move(hub)),
        sender_(pc_.remote().address().to_string() + ":" + std::to_string(pc_.remote().port())),
        addressKey_(gossipAddressKey(pc_.remote().address())),
        bucket_(gossipBucket(steadyMs())) {}
  ~GossipPeer() override { giveSlot(); }

  lt::string_view type() const override { return kGossipExtensionName; }

  void add_handshake(lt::entry& handshake) override {
    handshake["m"][kGossipExtensionName] = kOurMessageId;
    int port = 0;
    {
      std::lock_guard lock(hub_->mutex);
      port = hub_->dialPort;
    }
    if (port > 0) handshake[kDialPortKey] = port;  // p2p/gossip_wire.h says why not "p"
  }

  bool on_extension_handshake(const lt::bdecode_node& handshake) override {
    const GossipHandshake parsed = readGossipHandshake(handshake);
    if (parsed.remoteId == 0) return true;  // an ordinary BitTorrent peer: keep the connection, no gossip
    // Over the cap: cut. True all the same: libtorrent erases the plugins that return false from
    // the list it is walking, which disconnecting may have emptied.
    if (!holdsSlot_ && !takeSlot()) return true;
    remoteId_ = parsed.remoteId;
    std::vector<std::string> all;
    const bool dialBack = parsed.dialBackPort != 0;  // either direction: see GossipHub::dialBack
    {
      std::lock_guard lock(hub_->mutex);
      for (const auto& [key, bytes] : hub_->current) all.push_back(bytes);
      if (dialBack && hub_->dialBack.size() < kMaxDialBacks)
        hub_->dialBack.emplace_back(pc_.remote().address(), static_cast<std::uint16_t>(parsed.dialBackPort));
    }
    if (dialBack && hub_->wake) hub_->wake();
    for (const auto& bytes : all) send(bytes);
    return true;
  }

  // Called for each fragment; only the last one has body.size() == length.
  bool on_extended(int length, int msg, lt::span<const char> body) override {
    if (msg != kOurMessageId) return false;
    const GossipFragment fragment = classifyGossipFragment(length, body.size());
    if (fragment == GossipFragment::Oversize) {
      {
        std::lock_guard lock(hub_->mutex);
        ++hub_->oversizeMessages;
      }
      if (++oversize_ >= kMaxOversizePerConnection) cut();
    }
    if (fragment != GossipFragment::Complete) return true;
    // Gossip only on a connection holding its address's slot: one that skipped the handshake
    // (or was over the cap) would otherwise gossip uncounted.
    if (!holdsSlot_) return true;
    bool queued = false;
    {
      std::lock_guard lock(hub_->mutex);
      if (!bucket_.take(steadyMs())) {
        ++hub_->rateDropped;
        return true;
      }
      queued = queueInbound(*hub_, {std::string(body.data(), static_cast<std::size_t>(body.size())), sender_});
    }
    if (queued && hub_->wake) hub_->wake();
    return true;
  }

  // About once a second: the engine's verdicts on what this connection sent.
  void tick() override {
    bool bad = false;
    {
      std::lock_guard lock(hub_->mutex);
      bad = isBadSender(*hub_, sender_);
    }
    if (bad) cut();
  }

  // Every peer of a run seeds the run torrent, and libtorrent drops seed-to-seed connections as
  // useless; on the run torrent they carry the gossip, so they stay.
  bool can_disconnect(const lt::error_code& ec) override {
    return ec != lt::error_code(lt::errors::upload_upload_connection);
  }

  // The slot goes back as soon as the connection closes, not when libtorrent frees it.
  void on_disconnect(const lt::error_code&) override { giveSlot(); }

  bool ready() const { return remoteId_ > 0 && !pc_.is_disconnecting(); }

  void send(const std::string& bytes) {
    if (!ready()) return;
    // BEP10: <length: 4 bytes, big-endian> <20: extended> <the peer's id for es_record> <payload>
    const auto length = static_cast<std::uint32_t>(bytes.size() + 2);
    std::string frame;
    frame.reserve(bytes.size() + 6);
    for (int shift = 24; shift >= 0; shift -= 8) frame.push_back(static_cast<char>((length >> shift) & 0xff));
    frame.push_back(static_cast<char>(20));
    frame.push_back(static_cast<char>(remoteId_));
    frame += bytes;
    pc_.send_buffer(frame.data(), static_cast<int>(frame.size()));
  }

 private:
  // Why it went is in the hub's counters (and the engine's log for bad-sender marks).
  void cut() {
    if (pc_.is_disconnecting()) return;
    {
      std::lock_guard lock(hub_->mutex);
      ++hub_->disconnects;
    }
    pc_.disconnect(lt::errors::make_error_code(lt::errors::invalid_message), lt::operation_t::bittorrent,
                   lt::peer_connection_interface::peer_error);
  }

  bool takeSlot() {
    {
      std::lock_guard lock(hub_->mutex);
      holdsSlot_ = hub_->gossipSlots.take(addressKey_);
      if (!holdsSlot_) ++hub_->addressCapped;
    }
    if (!holdsSlot_)
      pc_.disconnect(lt::errors::make_error_code(lt::errors::too_many_connections), lt::operation_t::bittorrent,
                     lt::peer_connection_interface::normal);
    return holdsSlot_;
  }
  void giveSlot() {
    if (!holdsSlot_) return;
    holdsSlot_ = false;
    std::lock_guard lock(hub_->mutex);
    hub_->gossipSlots.give(addressKey_);
  }

  lt::peer_connection_handle pc_;
  std::shared_ptr<GossipHub> hub_;
  std::string sender_;
  std::string addressKey_;
  bool holdsSlot_ = false;  // network thread only
  TokenBucket bucket_;      // network thread only
  int oversize_ = 0;
  int remoteId_ = 0;
};

class GossipTorrent final : public lt::torrent_plugin {
 public:
  explicit GossipTorrent(std::shared_ptr<GossipHub> hub) : hub_(std::move(hub)) {}

  std::shared_ptr<lt::peer_plugin> new_connection(const lt::peer_connection_handle& pc) override {
    if (pc.type() != lt::connection_type::bittorrent) return {};
    auto peer = std::make_shared<GossipPeer>(pc, hub_);
    peers_.push_back(peer);
    return peer;
  }

  void broadcast(const std::vector<std::string>& messages) {
    std::vector<std::weak_ptr<GossipPeer>> alive;
    for (auto& weak : peers_) {
      auto peer = weak.lock();
      if (!peer) continue;
      for (const auto& m : messages) peer->send(m);
      alive.push_back(weak);
    }
    peers_.swap(alive);
  }

 private:
  std::shared_ptr<GossipHub> hub_;
  std::vector<std::weak_ptr<GossipPeer>> peers_;
};

class GossipPlugin final : public lt::plugin {
 public:
  explicit GossipPlugin(std::shared_ptr<GossipHub> hub) : hub_(std::move(hub)) {}

  lt::feature_flags_t implemented_features() override { return tick_feature | alert_feature; }

  std::shared_ptr<lt::torrent_plugin> new_torrent(const lt::torrent_handle&, lt::client_data_t data) override {
    if (data.get<GossipHub>() != hub_.get()) return {};
    auto torrent = std::make_shared<GossipTorrent>(hub_);
    torrent_ = torrent;
    return torrent;
  }

  // The engine wakes us with post_dht_stats(): its alert is posted on the network thread, where
  // sending is allowed. The session tick (about once a second) is the fallback.
  void on_alert(const lt::alert* a) override {
    if (a->type() == lt::dht_stats_alert::alert_type) flush();
  }
  void on_tick() override { flush(); }

 private:
  void flush() {
    std::vector<std::string> messages;
    {
      std::lock_guard lock(hub_->mutex);
      if (hub_->outbox.empty()) return;
      messages.assign(hub_->outbox.begin(), hub_->outbox.end());
      hub_->outbox.clear();
    }
    if (auto torrent = torrent_.lock()) torrent->broadcast(messages);
  }

  std::shared_ptr<GossipHub> hub_;
  std::weak_ptr<GossipTorrent> torrent_;
};

}  // namespace

bool queueInbound(GossipHub& hub, GossipInbound message) {
  if (hub.inbox.size() >= kMaxGossipInbox) {
    ++hub.inboxDropped;
    return false;
  }
  hub.inbox.push_back(std::move(message));
  return true;
}

void markBadSender(GossipHub& hub, const std::string& sender) {
  if (isBadSender(hub, sender)) return;
  if (hub.badSenders.size() >= kMaxBadSenders) hub.badSenders.pop_front();
  hub.badSenders.push_back(sender);
}

bool isBadSender(const GossipHub& hub, const std::string& sender) {
  return std::find(hub.badSenders.begin(), hub.badSenders.end(), sender) != hub.badSenders.end();
}

std::string gossipAddressKey(const lt::address& address) {
  if (address.is_v4()) return address.to_string();
  const auto v6 = address.to_v6();
  if (v6.is_v4_mapped()) return boost::asio::ip::make_address_v4(boost::asio::ip::v4_mapped, v6).to_string();
  auto bytes = v6.to_bytes();
  std::fill(bytes.begin() + 8, bytes.end(), std::uint8_t(0));
  return lt::address_v6(bytes).to_string() + "/64";
}

std::shared_ptr<lt::plugin> makeGossipPlugin(std::shared_ptr<GossipHub> hub) {
  return std::make_shared<GossipPlugin>(std::move(hub));
}

lt::client_data_t runTag(GossipHub* hub) { return lt::client_data_t(hub); }

}  // namespace es::p2p
