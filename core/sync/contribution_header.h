// Header of a contribution (carried in the file's metadata, see contribution_file.h). Plain
// strings, no Torch: the node predicts a contribution's size from it before fetching
// (fetch_size.h).
#pragma once

#include <cstdint>
#include <string>

namespace es::sync {

struct ContributionHeader {
  std::string run;
  std::int64_t round = 0;
  std::string sender;
  std::string baseHash;
  std::string codec;  // "f32", "bf16", "int8" or "sparse/<keep>/<chunk>" (contribution_codec.h)
};

inline bool sameHeader(const ContributionHeader& a, const ContributionHeader& b) {
  return a.run == b.run && a.round == b.round && a.sender == b.sender && a.baseHash == b.baseHash && a.codec == b.codec;
}

}  // namespace es::sync
