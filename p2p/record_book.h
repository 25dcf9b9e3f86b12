// The records a peer believes: the newest valid record per public key, plus per-sender counts of
// what was refused. Pure logic (no session, no clock), so gossip, BEP44 and tests share it.
#pragma once

#include "p2p/peer_record.h"

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace es::p2p {

enum class OfferOutcome {
  Accepted,   // new pk, or higher seq than stored: stored, should be relayed
  Duplicate,  // exactly the stored bytes again (normal in gossip; not counted)
  Stale,      // seq lower than stored: a replay (counted)
  Conflict,   // same seq as stored but different bytes: equivocation (counted)
  Rejected,   // parseRecord refused it (counted; see rejection)
};
const char* offerOutcomeName(OfferOutcome outcome);

struct OfferResult {
  OfferOutcome outcome;
  std::optional<RecordRejection> rejection;  // set when Rejected
  bool counted() const { return outcome == OfferOutcome::Stale || outcome == OfferOutcome::Conflict ||
                                outcome == OfferOutcome::Rejected; }
};

class RecordBook {
 public:
  explicit RecordBook(std::string runId);

  // `sender`: who handed us the bytes (a peer id, or "ip:port"); refusals are counted against it.
  OfferResult offer(std::string_view bytes, const std::string& sender, const PublicKey* expectedKey = nullptr);

  std::optional<PeerRecord> find(const PublicKey& key) const;
  std::optional<std::string> wireBytes(const PublicKey& key) const;  // for relaying
  std::vector<PeerRecord> records() const;                           // sorted by pk
  std::size_t size() const { return entries_.size(); }

  int dropsFrom(const std::string& sender) const;
  int totalDrops() const { return totalDrops_; }
  const std::map<std::string, int>& dropsBySender() const { return drops_; }

 private:
  struct Entry {
    PeerRecord record;
    std::string bytes;
  };
  std::string runId_;
  std::map<PublicKey, Entry> entries_;
  std::map<std::string, int> drops_;
  int totalDrops_ = 0;
};

}  // namespace es::p2p
