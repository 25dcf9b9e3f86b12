#include "p2p/dht_state.h"

#include "core/common/atomic_file.h"

#include <libtorrent/bdecode.hpp>
#include <libtorrent/session.hpp>
#include <libtorrent/session_params.hpp>

namespace es::p2p {

Status writeDhtState(const std::string& path, const lt::dht::dht_state& state) {
  lt::session_params params;
  params.dht_state = state;
  const std::vector<char> bytes = lt::write_session_params_buf(params, lt::session::save_dht_state);
  return writeFileAtomically(path, std::string_view(bytes.data(), bytes.size()));
}

Expected<lt::dht::dht_state> readDhtState(const std::string& path) {
  auto bytes = readWholeFile(path);
  if (!bytes) return makeError(bytes.error());
  lt::error_code ec;
  int errorPos = 0;
  const lt::bdecode_node root = lt::bdecode(*bytes, ec, &errorPos);
  if (ec) return makeError("not bencoded (" + ec.message() + " at byte " + std::to_string(errorPos) + ")");
  // read_session_params() silently returns defaults for anything it does not recognise; a file
  // without our one key is foreign, not an empty state.
  if (root.type() != lt::bdecode_node::dict_t || root.dict_find_dict("dht state").type() != lt::bdecode_node::dict_t)
    return makeError("no \"dht state\" dictionary in it");
  try {
    return lt::read_session_params(root, lt::session::save_dht_state).dht_state;
  } catch (const std::exception& e) {
    return makeError(std::string("unreadable: ") + e.what());
  }
}

int dhtStateNodes(const lt::dht::dht_state& state) { return int(state.nodes.size() + state.nodes6.size()); }

}  // namespace es::p2p
