// The records a peer believes: the newest valid record per public key, plus per-sender counts of
// what was refused. Pure logic (no session, no clock: callers pass `nowMs`, any monotonic
// milliseconds), so gossip, BEP44 and tests share it.
//
// Every byte offered is attacker-written, so everything the book keeps is bounded:
//  - keys: kMaxRecordKeys. A new key over the cap evicts the oldest *unproven* record (seen with one
//    seq only, or its second seq came sooner than kProvenAfterMs after the first); proven and
//    pinned records are never evicted. A flood of fresh keys (each costs only a key pair and one
//    signature) therefore churns among itself and cannot push out established peers; when every
//    slot is proven or pinned, new keys are refused (Full) until records expire.
//  - expiry: a record whose seq has not advanced for kRecordExpiryMs leaves the book (expire()); its
//    last seq is kept as a tombstone so relays of the old bytes do not bring it back.
//  - equivocation: two validly signed records of one key with the same seq and different bytes
//    prove the author signed both: the key is dropped and refused from then on (bannedKeys()).
//  - per-sender drop counts: kMaxDropSenders senders; later ones are counted under kOtherSenders.
//  - replays: bytes that parsed and verified once are remembered (kMaxJudgedRecords, oldest out),
//    so the same bytes again are answered by a lookup — a host replaying one valid record over
//    many connections costs a comparison each, not a signature check (issue 37 item 7).
#pragma once

#include "p2p/peer_record.h"

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace es::p2p {

// 2048: far above any swarm this client runs (tens of peers; the leases spread ≤ a few hundred
// experts), yet a full book is ~2048 × (1000 B bytes + ~1 KB parsed) ≈ 4 MB, and records() (called
// on every record event by the node) stays a cheap copy.
constexpr std::size_t kMaxRecordKeys = 2048;
// 30 min: peers announce at every round boundary, and rounds take seconds to minutes (the deadline
// maximum is 10 min by default); a record that has not advanced for three such maxima belongs to a
// peer that left or is stuck, and "silent peers own nothing" already applies to it.
constexpr std::int64_t kRecordExpiryMs = 30 * 60 * 1000;
// A second seq at least a minute after the first: an honest peer re-announces within a round; a
// flooder must keep each key alive over time (not just sign twice at once) to earn protection.
constexpr std::int64_t kProvenAfterMs = 60 * 1000;
constexpr std::size_t kMaxDropSenders = 1024;           // senders counted one by one (ip:port strings)
constexpr std::size_t kMaxBannedKeys = 1024;            // equivocators remembered, with both proofs (≤ 2 KB)
constexpr std::size_t kMaxTombstones = kMaxRecordKeys;  // expired keys whose old seq is refused
constexpr const char* kOtherSenders = "(other senders)";
// Two records per key of a full book (≤ 1000 B each: ≤ 4 MB): the current one and the one before.
constexpr std::size_t kMaxJudgedRecords = 2 * kMaxRecordKeys;

enum class OfferOutcome {
  Accepted,   // new pk, or higher seq than stored: stored, should be relayed
  Duplicate,  // exactly the stored bytes again (normal in gossip; not counted)
  Stale,      // seq lower than stored: a replay (counted)
  Conflict,   // same seq as stored but different bytes: equivocation, the key is banned (counted)
  Rejected,   // parseRecord refused it (counted; see rejection)
  Banned,     // a valid record of a key banned for equivocation (not counted: honest relays send it)
  Expired,    // seq at or below an expired record's: old bytes still circulating (not counted)
  Full,       // a new key, and every slot holds a proven or pinned record (not counted per sender)
};
const char* offerOutcomeName(OfferOutcome outcome);

struct OfferResult {
  OfferOutcome outcome;
  std::optional<RecordRejection> rejection;  // set when Rejected
  std::optional<PublicKey> evicted;          // Accepted: the unproven record it pushed out
  bool counted() const {
    return outcome == OfferOutcome::Stale || outcome == OfferOutcome::Conflict || outcome == OfferOutcome::Rejected;
  }
};

struct Equivocation {
  std::string first, second;  // the two signed records with one seq: the proof
};

class RecordBook {
 public:
  // `minWorkBits`: the identity work every record's key must carry (the run's identity_work_bits).
  explicit RecordBook(std::string runId, int minWorkBits = 0);
  int minWorkBits() const { return minWorkBits_; }

  // `sender`: who handed us the bytes (a peer id, or "ip:port"); refusals are counted against it.
  OfferResult offer(std::string_view bytes, const std::string& sender, const PublicKey* expectedKey = nullptr,
                    std::int64_t nowMs = 0);
  // Removes records whose seq has not advanced for kRecordExpiryMs (pinned ones stay); returns their keys.
  std::vector<PublicKey> expire(std::int64_t nowMs);
  // A live key (our own): never evicted, never expired.
  void pin(const PublicKey& key) { pinned_.insert(key); }

  std::optional<PeerRecord> find(const PublicKey& key) const;
  std::optional<std::string> wireBytes(const PublicKey& key) const;  // for relaying
  std::vector<PeerRecord> records() const;                           // sorted by pk
  std::size_t size() const { return entries_.size(); }
  bool isProven(const PublicKey& key) const;
  // Up to `max` keys to poll on BEP44, round-robin over the book (from after the last batch).
  std::vector<PublicKey> nextPollBatch(std::size_t max, const PublicKey& skip);

  int dropsFrom(const std::string& sender) const;
  int totalDrops() const { return totalDrops_; }
  const std::map<std::string, int>& dropsBySender() const { return drops_; }
  const std::map<PublicKey, Equivocation>& bannedKeys() const { return banned_; }
  bool isBanned(const PublicKey& key) const { return banned_.count(key) > 0; }
  std::size_t tombstones() const { return tombstones_.size(); }
  int refusedFull() const { return refusedFull_; }
  // Offers that reached the parser and its signature check (a replay of bytes already judged does not).
  std::uint64_t parses() const { return parses_; }
  int evictions() const { return evictions_; }

 private:
  struct Entry {
    PeerRecord record;
    std::string bytes;
    std::int64_t firstSeenMs = 0;
    std::int64_t advancedMs = 0;  // when its seq last went up (or it arrived)
    std::uint64_t order = 0;      // arrival order: eviction takes the oldest unproven first
    bool proven = false;
  };
  struct Tombstone {
    std::int64_t seq;
    std::uint64_t order;
  };
  struct Judged {  // bytes that parsed and verified: whose, and which seq
    PublicKey key;
    std::int64_t seq = 0;
  };
  using JudgedMap = std::map<std::string, Judged, std::less<>>;
  std::optional<OfferResult> answerReplay(std::string_view bytes, const PublicKey* expectedKey) const;
  void remember(std::string_view bytes, const PublicKey& key, std::int64_t seq);
  OfferResult store(ParsedRecord parsed, std::string_view bytes, std::int64_t nowMs);
  bool makeRoom(OfferResult& result);
  void ban(const PublicKey& key, std::string first, std::string second);
  void count(const std::string& sender);
  void bury(const PublicKey& key, std::int64_t seq);

  std::string runId_;
  int minWorkBits_ = 0;
  std::map<PublicKey, Entry> entries_;
  std::set<std::pair<std::uint64_t, PublicKey>> unproven_;  // (order, key): eviction candidates
  std::set<PublicKey> pinned_;
  std::map<PublicKey, Equivocation> banned_;
  std::map<PublicKey, Tombstone> tombstones_;
  std::map<std::string, int> drops_;
  std::optional<PublicKey> pollCursor_;
  std::uint64_t nextOrder_ = 0;
  int totalDrops_ = 0;
  int refusedFull_ = 0;
  int evictions_ = 0;
  std::uint64_t parses_ = 0;
  JudgedMap judged_;
  std::deque<JudgedMap::iterator> judgedOrder_;  // oldest first
};

}  // namespace es::p2p
