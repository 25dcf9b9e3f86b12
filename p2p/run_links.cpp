#include "p2p/run_links.h"

#include <algorithm>

namespace es::p2p {

void RunLinks::note(const std::vector<Endpoint>& dialable, Clock::time_point now) {
  linked_ = {dialable.begin(), dialable.end()};
  for (const auto& e : dialable) lastLinked_[e] = now;
  for (auto it = lastLinked_.begin(); it != lastLinked_.end();)
    it = now - it->second > timing_.memory ? lastLinked_.erase(it) : std::next(it);
  while (lastLinked_.size() > timing_.maxRemembered) {  // the longest unlinked goes first
    auto oldest = std::min_element(lastLinked_.begin(), lastLinked_.end(),
                                   [](const auto& a, const auto& b) { return a.second < b.second; });
    lastLinked_.erase(oldest);
  }
}

bool RunLinks::relinkDue(bool clearable, bool peersMissing, Clock::time_point now) {
  if (lost().empty()) {  // every link back: the next loss starts the back-off afresh
    backoff_ = timing_.firstRelink;
    nextRelink_ = now;
    return false;
  }
  if (!clearable || !peersMissing || now < nextRelink_) return false;
  nextRelink_ = now + (linked_.empty() ? std::min(backoff_, timing_.unlinkedRelink) : backoff_);
  backoff_ = std::min(backoff_ * 2, timing_.maxRelink);
  return true;
}

std::vector<RunLinks::Endpoint> RunLinks::targets() const {
  std::vector<Endpoint> out;
  for (const auto& [e, at] : lastLinked_) out.push_back(e);
  return out;
}

std::vector<RunLinks::Endpoint> RunLinks::lost() const {
  std::vector<Endpoint> out;
  for (const auto& [e, at] : lastLinked_)
    if (!linked_.count(e)) out.push_back(e);
  return out;
}

}  // namespace es::p2p
