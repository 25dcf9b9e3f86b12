// The signed peer record (p2p/peer_record): bytes from the gossip and from BEP44 DHT items.
#include "fuzz_corpus_constants.h"
#include "fuzz_target.h"
#include "p2p/peer_record.h"

ES_FUZZ_TARGET(peer_record) {
  const auto parsed = es::p2p::parseRecord(fuzzBytes(data, size), es::fuzz::kRunId);
  if (!parsed.ok) return false;
  // Accepted: the bytes are exactly the canonical signed form of what was read.
  ES_FUZZ_CHECK(parsed.record.run == es::fuzz::kRunId && size <= es::p2p::kMaxRecordBytes);
  return true;
}
