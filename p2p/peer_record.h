// The signed peer record of the swarm protocol (docs/ARCHITECTURE.md, "Swarm protocol"): what a peer
// says about itself — its claims, lease, published contributions and snapshots, and stats.
//
// Wire form: a bencoded dictionary (canonical: keys sorted, integers only) with keys
//   v (4), run (run id, bytes), pk (32 bytes), seq, round, claims (list of ints, sorted, unique),
//   lease (last round the claims hold), contrib / snapshot (dict: decimal round → info-hash: its
//   20 or 32 bytes; hex in PeerRecord),
//   merged (dict: decimal round → fingerprint hex of the state the peer merged for that round),
//   sets (dict: decimal round → digest hex of the contributions that state was merged from),
//   outputs (dict: decimal round → info-hash of the reducer's output index of that round,
//   core/node/reducer_index.h: a sharded round's merged shards this peer reduced and seeds),
//   stats (dict: steps, tokens, loss_e4 = loss·10⁴ rounded, tps = tokens/s rounded),
//   mem (free accelerator memory, bytes), work (the key's identity-work nonce, p2p/identity_work.h),
//   sig (64 bytes).
// sig is ed25519 over the canonical bencoding of the same dictionary without `sig`. The whole
// record is at most 1000 bytes so it also fits a BEP44 mutable item.
#pragma once

#include "core/common/expected.h"
#include "p2p/types.h"

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace es::p2p {

class Identity;

constexpr std::size_t kMaxRecordBytes = 1000;
// 2: `merged` (a split is seen in the round it happens); 3: `sets` (a split is repaired by
// merging the majority's set of contributions, without a snapshot); 4: `work` (a key costs CPU);
// 5: `outputs` (a reducer names what it reduced, issue 38), info-hashes as bytes (room for it).
constexpr std::int64_t kRecordVersion = 5;

struct RecordStats {
  std::int64_t steps = 0;
  std::int64_t tokens = 0;
  std::int64_t lossE4 = 0;  // loss × 10⁴, rounded (bencode has no floats)
  std::int64_t tokensPerSecond = 0;
};

struct PeerRecord {
  std::string run;  // run id (hex of the run torrent's info-hash)
  PublicKey pk{};
  std::int64_t seq = 0;                          // strictly increasing per pk
  std::int64_t round = 0;                        // the round the peer is in
  std::vector<int> claims;                       // expert ids, sorted, unique
  std::int64_t leaseUntil = 0;                   // claims hold through this round
  std::map<std::int64_t, std::string> contrib;   // round → info-hash (hex)
  std::map<std::int64_t, std::string> snapshot;  // round → info-hash (hex)
  std::map<std::int64_t, std::string> merged;    // round → state fingerprint (16–64 hex digits)
  std::map<std::int64_t, std::string> sets;      // round → merged-set digest (16–64 hex digits)
  std::map<std::int64_t, std::string> outputs;   // round → the reducer index's info-hash (hex)
  RecordStats stats;
  std::int64_t freeMemory = 0;  // bytes
  std::int64_t work = 0;        // identity-work nonce: the key's proof of work (p2p/identity_work.h)

  bool operator==(const PeerRecord& o) const;
};

// Why a record was refused. Every refusal is counted against whoever handed it to us.
enum class RecordError {
  Garbage,       // not bencode, not a dict, trailing bytes, wrong types, missing fields, bad values
  Oversize,      // more than kMaxRecordBytes
  BadVersion,    // v is not kRecordVersion
  WrongRun,      // run differs from ours
  WrongKey,      // pk is not the key it was published under (BEP44) / announced with
  BadSignature,  // sig does not verify against pk
  NotCanonical,  // decodes, but is not the canonical encoding of what it says (malleability)
  LittleWork,    // the key's identity work has fewer bits than the run asks (checked before sig)
};
const char* recordErrorName(RecordError error);

struct RecordRejection {
  RecordError error;
  std::string detail;  // human-readable, quotes the offending field
};

// Canonical bencoding of the record without `sig`: the bytes that are signed.
std::string recordPayload(const PeerRecord& record);

// The signed wire bytes. Fails when record.pk is not the identity's key or the result would
// exceed kMaxRecordBytes (the caller must shed old contrib/snapshot entries).
Expected<std::string> signRecord(const PeerRecord& record, const Identity& identity);

// Parses and verifies wire bytes. `expectedRun`: the run we are in; `expectedKey`: when the
// bytes came under a known key (BEP44 item key), the record's pk must equal it. `minWorkBits`:
// the run's swarm.identity_work_bits.
struct ParsedRecord {
  bool ok = false;
  PeerRecord record;          // valid when ok
  RecordRejection rejection;  // valid when !ok
};
ParsedRecord parseRecord(std::string_view bytes, std::string_view expectedRun, const PublicKey* expectedKey = nullptr,
                         int minWorkBits = 0);

}  // namespace es::p2p
