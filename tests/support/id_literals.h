// Test shorthand for typed ids (core/common/ids.h): "peer-a"_peer, "c1"_content. Production code
// has no literals for ids: they come from records, hashes and the ledger.
#pragma once

#include "core/common/ids.h"

#include <cstddef>
#include <string>

namespace es::test {

inline PeerId operator""_peer(const char* text, std::size_t size) { return PeerId(std::string(text, size)); }
inline ContentId operator""_content(const char* text, std::size_t size) { return ContentId(std::string(text, size)); }

}  // namespace es::test
