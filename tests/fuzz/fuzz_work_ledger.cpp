// The work ledger's reader (core/sync/work_ledger.h): every snapshot a stranger announces carries
// one, and a newcomer reads it before it weighs anyone's work with it.
#include "core/sync/work_ledger.h"
#include "fuzz_target.h"

#include <string>

ES_FUZZ_TARGET(work_ledger) {
  const std::string text(fuzzBytes(data, size));
  constexpr std::int64_t kRound = 1'000'000;  // any round the counts could name
  const auto ledger = es::sync::WorkLedger::decode(text, kRound);
  if (!ledger) return false;
  // Accepted: the canonical form, so writing it again gives the same bytes (equal ledgers must
  // fingerprint equally), within the bound a snapshot's size is checked against.
  ES_FUZZ_CHECK(ledger->encode() == text);
  ES_FUZZ_CHECK(static_cast<std::int64_t>(text.size()) <= es::sync::WorkLedger::maxEncodedBytes(kRound));
  return true;
}
