#include "p2p/announcement_record.h"

#include <algorithm>
#include <cmath>
#include <type_traits>

namespace es::p2p {

namespace {

template <class To, class From>
std::map<std::int64_t, To> retyped(const std::map<std::int64_t, From>& byRound) {
  std::map<std::int64_t, To> out;
  for (const auto& [round, value] : byRound) {
    if constexpr (std::is_same_v<To, std::string>)
      out.emplace(round, value.str());
    else
      out.emplace(round, To(value));
  }
  return out;
}

}  // namespace

PeerRecord recordOf(const node::Announcement& a) {
  PeerRecord r;
  r.round = a.round;
  r.claims = a.claims;
  std::sort(r.claims.begin(), r.claims.end());
  r.leaseUntil = a.leaseUntil;
  r.contrib = retyped<std::string>(a.contrib);
  r.snapshot = retyped<std::string>(a.snapshot);
  r.merged = a.merged;
  r.sets = a.sets;
  r.outputs = retyped<std::string>(a.outputs);
  r.stats.steps = a.steps;
  r.stats.lossE4 = std::llround(a.loss * 1e4);
  r.stats.tokensPerSecond = std::llround(a.tokensPerSecond);
  return r;
}

node::Announcement announcementOf(const PeerRecord& r) {
  node::Announcement a;
  a.round = r.round;
  a.claims = r.claims;
  a.leaseUntil = r.leaseUntil;
  a.contrib = retyped<ContentId>(r.contrib);
  a.snapshot = retyped<ContentId>(r.snapshot);
  a.merged = r.merged;
  a.sets = r.sets;
  a.outputs = retyped<ContentId>(r.outputs);
  a.steps = r.stats.steps;
  a.loss = double(r.stats.lossE4) / 1e4;
  a.tokensPerSecond = double(r.stats.tokensPerSecond);
  return a;
}

}  // namespace es::p2p
