#include "p2p/record_gossip.h"

#include <libtorrent/alert_types.hpp>
#include <libtorrent/bdecode.hpp>
#include <libtorrent/entry.hpp>
#include <libtorrent/error_code.hpp>
#include <libtorrent/peer_connection_handle.hpp>

#include <vector>

namespace es::p2p {
namespace {

constexpr int kOurMessageId = 31;  // our id for es_record in the BEP10 handshake "m" dictionary

class GossipPeer final : public lt::peer_plugin {
 public:
  GossipPeer(lt::peer_connection_handle pc, std::shared_ptr<GossipHub> hub)
      : pc_(std::move(pc)), hub_(std::move(hub)), sender_(pc_.remote().address().to_string() + ":" + std::to_string(pc_.remote().port())) {}

  lt::string_view type() const override { return kGossipExtensionName; }

  void add_handshake(lt::entry& handshake) override { handshake["m"][kGossipExtensionName] = kOurMessageId; }

  bool on_extension_handshake(const lt::bdecode_node& handshake) override {
    const auto m = handshake.dict_find_dict("m");
    if (!m) return true;
    remoteId_ = static_cast<int>(m.dict_find_int_value(kGossipExtensionName, 0));
    if (remoteId_ <= 0 || remoteId_ > 255) {
      remoteId_ = 0;
      return true;  // an ordinary BitTorrent peer: keep the connection, no gossip
    }
    std::vector<std::string> all;
    const auto port = handshake.dict_find_int_value("p", 0);
    const bool dialBack = port > 0 && port < 65536;  // either direction: see GossipHub::dialBack
    {
      std::lock_guard lock(hub_->mutex);
      for (const auto& [key, bytes] : hub_->current) all.push_back(bytes);
      if (dialBack && hub_->dialBack.size() < kMaxDialBacks)
        hub_->dialBack.emplace_back(pc_.remote().address(), static_cast<std::uint16_t>(port));
    }
    if (dialBack && hub_->wake) hub_->wake();
    for (const auto& bytes : all) send(bytes);
    return true;
  }

  // Called for each fragment; only the last one has body.size() == length.
  bool on_extended(int length, int msg, lt::span<const char> body) override {
    if (msg != kOurMessageId) return false;
    if (static_cast<std::size_t>(length) > kMaxGossipMessage) {
      if (static_cast<std::size_t>(body.size()) == static_cast<std::size_t>(length) || body.size() == 0) {
        std::lock_guard lock(hub_->mutex);
        ++hub_->oversizeMessages;
      }
      return true;
    }
    if (body.size() != length) return true;
    {
      std::lock_guard lock(hub_->mutex);
      hub_->inbox.push_back({std::string(body.data(), static_cast<std::size_t>(body.size())), sender_});
    }
    if (hub_->wake) hub_->wake();
    return true;
  }

  // Every peer of a run seeds the run torrent, and libtorrent drops seed-to-seed connections as
  // useless; on the run torrent they carry the gossip, so they stay.
  bool can_disconnect(const lt::error_code& ec) override {
    return ec != lt::error_code(lt::errors::upload_upload_connection);
  }

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
  lt::peer_connection_handle pc_;
  std::shared_ptr<GossipHub> hub_;
  std::string sender_;
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

std::shared_ptr<lt::plugin> makeGossipPlugin(std::shared_ptr<GossipHub> hub) {
  return std::make_shared<GossipPlugin>(std::move(hub));
}

lt::client_data_t runTag(GossipHub* hub) { return lt::client_data_t(hub); }

}  // namespace es::p2p
