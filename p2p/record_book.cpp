#include "p2p/record_book.h"

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
      return "conflict";
    case OfferOutcome::Rejected:
      return "rejected";
  }
  return "unknown";
}

RecordBook::RecordBook(std::string runId) : runId_(std::move(runId)) {}

OfferResult RecordBook::offer(std::string_view bytes, const std::string& sender, const PublicKey* expectedKey) {
  OfferResult result{OfferOutcome::Accepted, std::nullopt};
  ParsedRecord parsed = parseRecord(bytes, runId_, expectedKey);
  if (!parsed.ok) {
    result = {OfferOutcome::Rejected, std::move(parsed.rejection)};
  } else if (auto it = entries_.find(parsed.record.pk);
             it == entries_.end() || parsed.record.seq > it->second.record.seq) {
    // The bytes are kept as received (they are canonical, so re-encoding would give the same) so
    // relaying forwards exactly what the author signed.
    const PublicKey key = parsed.record.pk;
    entries_[key] = Entry{std::move(parsed.record), std::string(bytes)};
  } else if (it->second.bytes == bytes) {
    result.outcome = OfferOutcome::Duplicate;
  } else {
    // Lower seq is a replay; equal seq with other bytes means the author signed two records
    // (equivocation). Either way the stored record stays: for equal seq the first seen wins, so
    // peers relaying the two versions cannot make the book flap.
    result.outcome = parsed.record.seq < it->second.record.seq ? OfferOutcome::Stale : OfferOutcome::Conflict;
  }
  if (result.counted()) {
    ++drops_[sender];
    ++totalDrops_;
  }
  return result;
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

int RecordBook::dropsFrom(const std::string& sender) const {
  const auto it = drops_.find(sender);
  return it == drops_.end() ? 0 : it->second;
}

}  // namespace es::p2p
