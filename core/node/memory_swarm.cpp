#include "core/node/memory_swarm.h"

#include <QCryptographicHash>
#include <QFile>
#include <QTimer>

#include <algorithm>

namespace es::node {

MemorySwarm::MemorySwarm(MemorySwarmHub& hub, std::string selfId) : hub_(hub), selfId_(std::move(selfId)) {
  hub_.members_.push_back(this);
}

MemorySwarm::~MemorySwarm() {
  hub_.members_.erase(std::remove(hub_.members_.begin(), hub_.members_.end(), this), hub_.members_.end());
}

Status MemorySwarm::announce(const Announcement& a) {
  SwarmPeer p;
  p.id = selfId_;
  p.publicKey = selfId_;
  p.round = a.round;
  p.claims = a.claims;
  p.leaseUntil = a.leaseUntil;
  p.contrib = a.contrib;
  p.snapshot = a.snapshot;
  p.merged = a.merged;
  p.steps = a.steps;
  p.loss = a.loss;
  p.tokensPerSecond = a.tokensPerSecond;
  hub_.records_[selfId_] = std::move(p);
  for (auto* member : hub_.members_)
    if (member != this)
      QTimer::singleShot(0, &member->context_, [member] {
        if (member->events_.peersChanged) member->events_.peersChanged();
      });
  return {};
}

std::vector<SwarmPeer> MemorySwarm::peers() const {
  std::vector<SwarmPeer> out;
  for (const auto& [id, p] : hub_.records_)
    if (id != selfId_) out.push_back(p);
  return out;
}

// Content ids name the bytes, as info-hashes do: two peers publishing identical snapshots get one
// id (resync votes count peers per id).
Expected<std::string> MemorySwarm::publish(const std::string& path) {
  QFile file(QString::fromStdString(path));
  if (!file.open(QIODevice::ReadOnly)) return makeError("cannot read \"" + path + "\"");
  QCryptographicHash hash(QCryptographicHash::Sha256);
  if (!hash.addData(&file)) return makeError("cannot read \"" + path + "\"");
  const std::string id = hash.result().toHex().toStdString();
  hub_.files_.emplace(id, path);  // the first publisher's copy serves everyone
  return id;
}

Status MemorySwarm::fetch(const std::string& contentId, const std::string&) {
  auto it = hub_.files_.find(contentId);
  if (it == hub_.files_.end()) return makeError("unknown content " + contentId);
  if (withheld_ && withheld_(contentId)) return {};
  QTimer::singleShot(0, &context_, [this, contentId, path = it->second] {
    if (events_.fetched) events_.fetched(contentId, path);
  });
  return {};
}

// Files stay (other nodes of the hub may still read them); what was retired is remembered.
void MemorySwarm::retire(const std::string& contentId, bool) { retired_.insert(contentId); }

std::vector<int> MemorySwarm::chooseClaims(std::int64_t round, int nExperts, int count) const {
  std::vector<int> owners(static_cast<std::size_t>(nExperts), 0);
  for (const auto& p : peers())
    if (p.leaseUntil >= round)
      for (int e : p.claims)
        if (e >= 0 && e < nExperts) ++owners[static_cast<std::size_t>(e)];
  std::vector<int> order(static_cast<std::size_t>(nExperts));
  for (int e = 0; e < nExperts; ++e) order[static_cast<std::size_t>(e)] = e;
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return owners[a] < owners[b]; });
  order.resize(static_cast<std::size_t>(std::min(count, nExperts)));
  std::sort(order.begin(), order.end());
  return order;
}

}  // namespace es::node
