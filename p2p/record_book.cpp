#include "p2p/record_book.h"

#include <algorithm>
#include <utility>

namespace es::p2p {

const char* offerOutcomeName(OfferOutcome outcome) {
  switch (outcome) {
    case OfferOutcome::Accepted:
      return "accepted";
    case OfferOutcome::Duplicate:
      return "duplicate";
    case OfferOutcome::Stale:
      return "stale";
    case OfferOutcome::Conflict:
      return "conflict (equivocation: key banned)";
    case OfferOutcome::Rejected:
      return "rejected";
    case OfferOutcome::Banned:
      return "banned key";
    case OfferOutcome::Expired:
      return "expired";
    case OfferOutcome::Full:
      return "book full";
  }
  return "unknown";
}

RecordBook::RecordBook(std::string runId, int minWorkBits) : runId_(std::move(runId)), minWorkBits_(minWorkBits) {}

OfferResult RecordBook::offer(std::string_view bytes, const std::string& sender, const PublicKey* expectedKey,
                              std::int64_t nowMs) {
  if (auto replay = answerReplay(bytes, expectedKey)) {
    if (replay->counted()) count(sender);
    return *replay;
  }
  OfferResult result{OfferOutcome::Accepted, std::nullopt, std::nullopt};
  ++parses_;
  ParsedRecord parsed = parseRecord(bytes, runId_, expectedKey, minWorkBits_);
  if (parsed.ok) remember(bytes, parsed.record.pk, parsed.record.seq);
  const auto it = parsed.ok ? entries_.find(parsed.record.pk) : entries_.end();
  const auto tomb = parsed.ok ? tombstones_.find(parsed.record.pk) : tombstones_.end();
  if (!parsed.ok) {
    result = {OfferOutcome::Rejected, std::move(parsed.rejection), std::nullopt};
  } else if (banned_.count(parsed.record.pk)) {
    result.outcome = OfferOutcome::Banned;
  } else if (it == entries_.end() && tomb != tombstones_.end() && parsed.record.seq <= tomb->second.seq) {
    result.outcome = OfferOutcome::Expired;
  } else if (it == entries_.end() || parsed.record.seq > it->second.record.seq) {
    result = store(std::move(parsed), bytes, nowMs);
  } else if (it->second.bytes == bytes) {
    result.outcome = OfferOutcome::Duplicate;
  } else if (parsed.record.seq < it->second.record.seq) {
    result.outcome = OfferOutcome::Stale;  // a replay: the stored record stays
  } else {
    // Same seq, other bytes, both signatures valid (parseRecord checked this one, offer the
    // stored one): the author signed two records for one seq. Nothing it says can be trusted.
    result.outcome = OfferOutcome::Conflict;
    if (!pinned_.count(parsed.record.pk)) ban(parsed.record.pk, it->second.bytes, std::string(bytes));
  }
  if (result.counted()) count(sender);
  return result;
}

// The very bytes of a record we judged valid, its key's entry still here: what offer() would decide
// again (same bytes, same signature, same run and work bits), decided without the parse. Anything
// else — unknown bytes, another expected key, the key evicted, expired or banned since, or the same
// seq as stored — goes the long way.
std::optional<OfferResult> RecordBook::answerReplay(std::string_view bytes, const PublicKey* expectedKey) const {
  const auto known = judged_.find(bytes);
  if (known == judged_.end() || (expectedKey && *expectedKey != known->second.key)) return std::nullopt;
  const auto entry = entries_.find(known->second.key);
  if (entry == entries_.end()) return std::nullopt;
  if (entry->second.bytes == bytes) return OfferResult{OfferOutcome::Duplicate, std::nullopt, std::nullopt};
  if (known->second.seq < entry->second.record.seq) return OfferResult{OfferOutcome::Stale, std::nullopt, std::nullopt};
  return std::nullopt;
}

void RecordBook::remember(std::string_view bytes, const PublicKey& key, std::int64_t seq) {
  const auto [it, added] = judged_.try_emplace(std::string(bytes), Judged{key, seq});
  if (!added) return;
  judgedOrder_.push_back(it);
  if (judgedOrder_.size() <= kMaxJudgedRecords) return;
  judged_.erase(judgedOrder_.front());
  judgedOrder_.pop_front();
}

// The bytes are kept as received (they are canonical, so re-encoding would give the same) so
// relaying forwards exactly what the author signed.
OfferResult RecordBook::store(ParsedRecord parsed, std::string_view bytes, std::int64_t nowMs) {
  OfferResult result{OfferOutcome::Accepted, std::nullopt, std::nullopt};
  const PublicKey key = parsed.record.pk;
  auto it = entries_.find(key);
  if (it == entries_.end()) {
    if (entries_.size() >= kMaxRecordKeys && !makeRoom(result)) return result;
    tombstones_.erase(key);
    Entry entry{std::move(parsed.record), std::string(bytes), nowMs, nowMs, nextOrder_++, false};
    unproven_.emplace(entry.order, key);
    entries_.emplace(key, std::move(entry));
    return result;
  }
  Entry& entry = it->second;
  entry.record = std::move(parsed.record);
  entry.bytes = std::string(bytes);
  entry.advancedMs = nowMs;
  if (!entry.proven && nowMs - entry.firstSeenMs >= kProvenAfterMs) {
    entry.proven = true;
    unproven_.erase({entry.order, key});
  }
  return result;
}

// Evicts the oldest unproven, unpinned record; false (and Full) when there is none.
bool RecordBook::makeRoom(OfferResult& result) {
  for (auto candidate = unproven_.begin(); candidate != unproven_.end(); ++candidate) {
    const PublicKey victim = candidate->second;
    if (pinned_.count(victim)) continue;
    unproven_.erase(candidate);
    entries_.erase(victim);
    result.evicted = victim;
    ++evictions_;
    return true;
  }
  result.outcome = OfferOutcome::Full;
  ++refusedFull_;
  return false;
}

void RecordBook::ban(const PublicKey& key, std::string first, std::string second) {
  if (auto it = entries_.find(key); it != entries_.end()) {
    unproven_.erase({it->second.order, key});
    entries_.erase(it);
  }
  if (banned_.size() >= kMaxBannedKeys) banned_.erase(banned_.begin());  // bounded; it would be re-banned
  banned_[key] = Equivocation{std::move(first), std::move(second)};
}

void RecordBook::count(const std::string& sender) {
  ++totalDrops_;
  auto it = drops_.find(sender);
  if (it == drops_.end() && drops_.size() >= kMaxDropSenders)
    it = drops_.try_emplace(kOtherSenders, 0).first;
  else if (it == drops_.end())
    it = drops_.emplace(sender, 0).first;
  ++it->second;
}

void RecordBook::bury(const PublicKey& key, std::int64_t seq) {
  if (tombstones_.size() >= kMaxTombstones) {
    const auto oldest = std::min_element(tombstones_.begin(), tombstones_.end(),
                                         [](const auto& a, const auto& b) { return a.second.order < b.second.order; });
    tombstones_.erase(oldest);
  }
  tombstones_[key] = Tombstone{seq, nextOrder_++};
}

std::vector<PublicKey> RecordBook::expire(std::int64_t nowMs) {
  std::vector<PublicKey> gone;
  for (auto it = entries_.begin(); it != entries_.end();) {
    if (pinned_.count(it->first) || nowMs - it->second.advancedMs < kRecordExpiryMs) {
      ++it;
      continue;
    }
    gone.push_back(it->first);
    unproven_.erase({it->second.order, it->first});
    bury(it->first, it->second.record.seq);
    it = entries_.erase(it);
  }
  return gone;
}

std::optional<PeerRecord> RecordBook::find(const PublicKey& key) const {
  const auto it = entries_.find(key);
  if (it == entries_.end()) return std::nullopt;
  return it->second.record;
}

std::optional<std::string> RecordBook::wireBytes(const PublicKey& key) const {
  const auto it = entries_.find(key);
  if (it == entries_.end()) return std::nullopt;
  return it->second.bytes;
}

std::vector<PeerRecord> RecordBook::records() const {
  std::vector<PeerRecord> out;
  out.reserve(entries_.size());
  for (const auto& [key, entry] : entries_) out.push_back(entry.record);  // map order = sorted by pk
  return out;
}

bool RecordBook::isProven(const PublicKey& key) const {
  const auto it = entries_.find(key);
  return it != entries_.end() && it->second.proven;
}

std::vector<PublicKey> RecordBook::nextPollBatch(std::size_t max, const PublicKey& skip) {
  std::vector<PublicKey> batch;
  auto it = pollCursor_ ? entries_.upper_bound(*pollCursor_) : entries_.begin();
  for (std::size_t visited = 0; visited < entries_.size() && batch.size() < max; ++visited, ++it) {
    if (it == entries_.end()) it = entries_.begin();  // wrap around
    if (it->first != skip) batch.push_back(it->first);
    pollCursor_ = it->first;
  }
  return batch;
}

int RecordBook::dropsFrom(const std::string& sender) const {
  const auto it = drops_.find(sender);
  return it == drops_.end() ? 0 : it->second;
}

}  // namespace es::p2p
