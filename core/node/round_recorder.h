// The ledger's side of the round (docs/ARCHITECTURE.md, "The round's objects"). A round's rows
// are captured from what the round closed with — the claims and content ids that held for *that*
// round, of the senders it merged — and written once the round's state folder is durable
// (persisted), which comes after the next round's claims are already in force: reading them at
// write time recorded round N with round N+1's claims (issue 13, item 3; tst_node_rounds checks
// the rows). So the ledger is never ahead of the files, and a crash loses at most the round in
// progress. It alone holds the rounds not yet written. Engine thread only.
#pragma once

#include "core/node/node_reports.h"
#include "core/store/ledger.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace es::node {

// What the ledger records of a merged round, captured at merge time.
struct UnrecordedRound {
  RoundSummary summary;
  std::int64_t step = 0;
  std::map<PeerId, ContentId> contentOf;        // sender → its contribution
  std::map<PeerId, std::vector<int>> claimsOf;  // sender → its claims in that round
  double loss = 0, lr = 0;                      // the last step's, at the merge
  std::optional<GpuReading> gpu;                // the last step's reading, if it had one
};

// A step's GPU reading as the ledger keeps it (memory in MiB).
std::optional<store::GpuMetric> gpuMetricOf(const std::optional<GpuReading>& reading);

class RoundRecorder {
 public:
  // `ledger` may be null (no history kept: every call does nothing).
  RoundRecorder(store::Ledger* ledger, std::string runId, std::string stateDir);

  // The round is merged (or merged again by a repair): its rows wait for its state to be durable.
  void merged(UnrecordedRound round);
  void repaired(std::int64_t round, int contributions, int accepted, const std::string& sharedFingerprint);
  // A contribution of `round` refused before download (it broke its limits): its row at once.
  void refused(std::int64_t round, const PeerId& sender, const ContentId& content, const std::string& why);
  // The state after `round` is durable (or failed to be: its rows are dropped). Writes the rows.
  void persisted(std::int64_t round, bool ok);

 private:
  void record(const UnrecordedRound& round);

  store::Ledger* ledger_ = nullptr;
  std::string runId_, stateDir_;
  std::map<std::int64_t, UnrecordedRound> unrecorded_;  // merged, state not yet durable
  std::map<std::int64_t, store::RoundRow> repaired_;    // a repaired round's row, once its state is durable
};

}  // namespace es::node
