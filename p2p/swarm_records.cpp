// The session's side of the record book: gossip in (drainGossip, offerRecord), relaying, BEP44
// polls, expiry and the verdicts on senders (docs/ARCHITECTURE.md, "Records that flood").
#include "p2p/swarm_session_impl.h"

#include <chrono>

namespace es::p2p {
namespace {

// 32 keys a cycle (every 60 s off loopback, 10 s on it): each dht_get_item is a DHT traversal of
// a few dozen packets, and polling every key of a full book at once (2048 traversals) would trip
// the 5 packets/s DoS blocker of the DHT nodes we ask (see "Rendezvous timing"). Gossip carries
// records; BEP44 only repairs partitions, so a full pass over a large book may take an hour.
constexpr std::size_t kMaxPollsPerCycle = 32;

std::array<char, 32> ltKey(const PublicKey& key) {
  std::array<char, 32> out{};
  std::copy(key.begin(), key.end(), out.begin());
  return out;
}

}  // namespace

std::int64_t nowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void SwarmSession::Impl::drainGossip() {
  std::deque<GossipInbound> inbound;
  std::deque<lt::tcp::endpoint> dialBacks;
  {
    std::lock_guard lock(hub->mutex);
    inbound.swap(hub->inbox);
    dialBacks.swap(hub->dialBack);
  }
  for (const auto& message : inbound) offerRecord(message.bytes, message.sender, nullptr);
  for (const auto& endpoint : dialBacks) dialBack(endpoint);
}

void SwarmSession::Impl::offerRecord(const std::string& bytes, const std::string& sender,
                                     const PublicKey* expectedKey) {
  if (!book) return;
  const auto result = book->offer(bytes, sender, expectedKey, nowMs());
  if (result.evicted) forgetRecord(*result.evicted);
  if (result.outcome == OfferOutcome::Conflict) {
    const auto parsed = parseRecord(bytes, runId, expectedKey, book->minWorkBits());
    if (book->isBanned(parsed.record.pk)) {
      forgetRecord(parsed.record.pk);
      const std::string why = "equivocation: two signed records with seq " + std::to_string(parsed.record.seq) +
                              " (both kept as proof; relayed by " + sender + ")";
      if (settings.log) settings.log("Peer " + peerIdOf(parsed.record.pk).substr(0, 16) + " banned: " + why);
      Q_EMIT owner->keyBanned(QString::fromStdString(peerIdOf(parsed.record.pk)), QString::fromStdString(why));
    }
  }
  if (result.outcome == OfferOutcome::Rejected) strike(sender);
  if (result.counted()) {
    counters.recordsDropped = book->totalDrops();
    const std::string reason =
        result.rejection ? std::string(recordErrorName(result.rejection->error)) + ": " + result.rejection->detail
                         : offerOutcomeName(result.outcome);
    Q_EMIT owner->recordDropped(QString::fromStdString(sender), QString::fromStdString(reason));
    // A refused record is said once per error kind (a handful): a peer that hears nobody can tell
    // why from its log. Stale ones are gossip's normal races, not said.
    if (result.rejection && settings.log && droppedKindsLogged.insert(recordErrorName(result.rejection->error)).second)
      settings.log("A record was refused (" + reason + "; from " + sender +
                   "); further refusals of this kind are counted, not logged");
    return;
  }
  if (result.outcome != OfferOutcome::Accepted) return;
  ++counters.recordsAccepted;
  const auto parsed = parseRecord(bytes, runId, expectedKey, book->minWorkBits());
  {
    std::lock_guard lock(hub->mutex);
    hub->current[toHex(parsed.record.pk)] = bytes;
    hub->outbox.push_back(bytes);  // relay: new to us, so possibly new to our neighbours
  }
  session->post_dht_stats();
  Q_EMIT owner->recordAccepted(parsed.record);
}

// Only gossip connections ("ip:port") can be cut; BEP44 senders ("dht:…") and our own are not.
void SwarmSession::Impl::strike(const std::string& sender) {
  if (sender.rfind("dht:", 0) == 0 || sender == "self") return;
  if (rejectsBySender.size() >= kMaxBadSenders && !rejectsBySender.count(sender)) rejectsBySender.clear();  // bounded
  if (++rejectsBySender[sender] < kMaxRejectsPerSender) return;
  rejectsBySender.erase(sender);
  {
    std::lock_guard lock(hub->mutex);
    markBadSender(*hub, sender);
  }
  if (settings.log)
    settings.log("Gossip connection " + sender + " sent " + std::to_string(kMaxRejectsPerSender) +
                 " invalid records; disconnecting it");
}

void SwarmSession::Impl::forgetRecord(const PublicKey& key) {
  std::lock_guard lock(hub->mutex);
  hub->current.erase(toHex(key));
}

// Records missed by the gossip (a partition, a late joiner) are fetched from the DHT, a bounded
// batch per cycle, round-robin over the book.
void SwarmSession::Impl::pollRecords() {
  if (!book) return;
  for (const auto& key : book->nextPollBatch(kMaxPollsPerCycle, identity.publicKey()))
    session->dht_get_item(ltKey(key), salt);
}

void SwarmSession::Impl::expireRecords() {
  if (!book) return;
  for (const auto& key : book->expire(nowMs())) forgetRecord(key);
}

SwarmCounters SwarmSession::counters() const {
  auto c = impl_->counters;
  c.dhtNodes = 0;
  if (impl_->book) {
    c.recordsDropped = impl_->book->totalDrops();
    c.recordKeys = static_cast<int>(impl_->book->size());
    c.bannedKeys = static_cast<int>(impl_->book->bannedKeys().size());
  }
  std::lock_guard lock(impl_->hub->mutex);
  c.gossipRateDropped = impl_->hub->rateDropped;
  c.gossipInboxDropped = impl_->hub->inboxDropped;
  c.gossipDisconnects = impl_->hub->disconnects;
  c.gossipAddressCapped = impl_->hub->addressCapped;
  c.gossipMostPerAddress = impl_->hub->gossipSlots.most();
  return c;
}

}  // namespace es::p2p
