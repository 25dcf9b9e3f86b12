#include "p2p/reachability.h"

namespace es::p2p {

void Reachability::noteOutgoing(const std::string& ip) {
  if (ip.empty() || !contacted_.insert(ip).second) return;
  contactedOrder_.push_back(ip);
  // Bounded: on the public DHT we talk to thousands of nodes an hour. Forgetting the oldest can
  // only turn a late reply from one of them into a false "reachable" — rare, and the mapping or
  // a real incoming contact would usually have said the same.
  if (contactedOrder_.size() > kMaxRemembered) {
    contacted_.erase(contactedOrder_.front());
    contactedOrder_.pop_front();
  }
}

bool Reachability::noteIncoming(const std::string& ip, const std::string& what, bool tcpToListenPort) {
  if (ip.empty() || own_.count(ip)) return false;              // nobody, or ourselves
  if (contacted_.count(ip) && !tcpToListenPort) return false;  // a reply (or a node we queried first)
  if (!setState(mappingMethod_.empty() ? State::Reachable : State::ReachableViaPortMapping)) return false;
  proof_ = what + " from " + ip;
  return true;
}

void Reachability::notePortMapped(int externalPort, const std::string& method) {
  mappedPort_ = externalPort;
  mappingMethod_ = method;
}

std::string Reachability::external(int port) const {
  if (externalIp_.empty()) return "port " + std::to_string(port);
  const bool v6 = externalIp_.find(':') != std::string::npos;
  return (v6 ? "[" + externalIp_ + "]" : externalIp_) + ":" + std::to_string(port);
}

bool Reachability::tick(int dhtNodes, Clock::time_point now) {
  if (dhtNodes > 0 && !onlineSince_) onlineSince_ = now;
  if (state_ != State::Checking || !onlineSince_ || now - *onlineSince_ < grace_) return false;
  return setState(State::OutgoingOnly);
}

bool Reachability::setState(State state) {
  // Proven states are never given up for weaker ones (a later contact without mapping does not
  // undo "via port mapping"; nothing returns to checking).
  if (state == state_) return false;
  if (state_ == State::ReachableViaPortMapping ||
      (state_ == State::Reachable && state != State::ReachableViaPortMapping))
    return false;
  state_ = state;
  return true;
}

const char* Reachability::stateName(State state) {
  switch (state) {
    case State::Checking:
      return "checking";
    case State::Reachable:
      return "reachable";
    case State::ReachableViaPortMapping:
      return "reachable via port mapping";
    case State::OutgoingOnly:
      return "outgoing-only";
  }
  return "?";
}

std::string Reachability::detail() const {
  switch (state_) {
    case State::Checking:
      return {};
    case State::Reachable:
      return (externalIp_.empty() ? "" : "external " + external(listenPort_) + "; ") + proof_;
    case State::ReachableViaPortMapping:
      return "external " + external(mappedPort_) + " via " + mappingMethod_ + "; " + proof_;
    case State::OutgoingOnly:
      return "nobody contacted us unasked in " + std::to_string(grace_.count()) + " s" +
             (mappingMethod_.empty() ? "" : " despite a " + mappingMethod_ + " mapping of " + external(mappedPort_)) +
             "; forward the listen port (TCP and UDP) to this machine to accept connections";
  }
  return {};
}

std::string Reachability::line() const {
  const std::string d = detail();
  return std::string("reachability: ") + stateName(state_) + (d.empty() ? "" : " (" + d + ")");
}

}  // namespace es::p2p
