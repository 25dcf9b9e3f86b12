#include "p2p/listen_port_hint.h"

#include <libtorrent/entry.hpp>
#include <libtorrent/peer_connection_handle.hpp>

namespace es::p2p {
namespace {

class QuietPortPeer final : public lt::peer_plugin {
 public:
  explicit QuietPortPeer(std::shared_ptr<ListenPortHint> hint) : hint_(std::move(hint)) {}
  lt::string_view type() const override { return "es_listen_port"; }
  // libtorrent fills the handshake, then hands it to every plugin (bt_peer_connection::write_extensions).
  void add_handshake(lt::entry& handshake) override {
    if (!hint_->advertise.load(std::memory_order_relaxed)) handshake.dict().erase("p");
  }

 private:
  std::shared_ptr<ListenPortHint> hint_;
};

class QuietPortTorrent final : public lt::torrent_plugin {
 public:
  explicit QuietPortTorrent(std::shared_ptr<ListenPortHint> hint) : hint_(std::move(hint)) {}
  std::shared_ptr<lt::peer_plugin> new_connection(const lt::peer_connection_handle& pc) override {
    if (pc.type() != lt::connection_type::bittorrent) return {};
    return std::make_shared<QuietPortPeer>(hint_);
  }

 private:
  std::shared_ptr<ListenPortHint> hint_;
};

class QuietPortPlugin final : public lt::plugin {
 public:
  explicit QuietPortPlugin(std::shared_ptr<ListenPortHint> hint) : hint_(std::move(hint)) {}
  std::shared_ptr<lt::torrent_plugin> new_torrent(const lt::torrent_handle&, lt::client_data_t) override {
    return std::make_shared<QuietPortTorrent>(hint_);
  }

 private:
  std::shared_ptr<ListenPortHint> hint_;
};

}  // namespace

std::shared_ptr<lt::plugin> makeListenPortPlugin(std::shared_ptr<ListenPortHint> hint) {
  return std::make_shared<QuietPortPlugin>(std::move(hint));
}

}  // namespace es::p2p
