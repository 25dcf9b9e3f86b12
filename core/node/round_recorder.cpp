#include "core/node/round_recorder.h"

#include <QDateTime>

namespace es::node {

std::optional<store::GpuMetric> gpuMetricOf(const std::optional<GpuReading>& r) {
  if (!r) return std::nullopt;
  return store::GpuMetric{double(r->utilizationPercent), double(r->memoryUsedBytes) / double(1 << 20),
                          double(r->temperatureC), r->powerWatts};
}

RoundRecorder::RoundRecorder(store::Ledger* ledger, std::string runId, std::string stateDir)
    : ledger_(ledger), runId_(std::move(runId)), stateDir_(std::move(stateDir)) {}

void RoundRecorder::merged(UnrecordedRound round) {
  const auto r = round.summary.round;
  unrecorded_[r] = std::move(round);
}

// The round's row names the state the round ended in (its contribution rows keep what we judged
// at the first merge).
void RoundRecorder::repaired(std::int64_t round, int contributions, int accepted,
                             const std::string& sharedFingerprint) {
  repaired_[round] = {round, 0, contributions, contributions, accepted, sharedFingerprint, stateDir_};
}

void RoundRecorder::refused(std::int64_t round, const PeerId& sender, const ContentId& content,
                            const std::string& why) {
  if (ledger_) ledger_->addContribution(runId_, {round, sender.str(), content.str(), 0, "rejected", why});
}

void RoundRecorder::persisted(std::int64_t round, bool ok) {
  auto it = unrecorded_.find(round);
  if (!ok) {
    if (it != unrecorded_.end()) unrecorded_.erase(it);
    repaired_.erase(round);
    return;
  }
  if (auto repaired = repaired_.find(round); it == unrecorded_.end() && repaired != repaired_.end()) {
    repaired->second.closedAt = QDateTime::currentMSecsSinceEpoch();
    if (ledger_) ledger_->commitRound(runId_, repaired->second);
    repaired_.erase(repaired);
    return;
  }
  if (it == unrecorded_.end()) return;  // a snapshot adoption, or a round recorded already
  record(it->second);
  unrecorded_.erase(it);
}

void RoundRecorder::record(const UnrecordedRound& u) {
  if (!ledger_) return;
  const auto now = QDateTime::currentMSecsSinceEpoch();
  const RoundSummary& s = u.summary;
  for (const auto& v : s.verdicts) {
    const char* verdict = v.accepted ? "accepted"
                          : v.stale  ? "stale"
                          : v.lost   ? "lost"
                          : v.noWork ? "no work"
                                     : "rejected";
    const auto content = u.contentOf.find(v.sender);
    ledger_->addContribution(
        runId_, {s.round, v.sender.str(), content == u.contentOf.end() ? std::string() : content->second.str(), v.bytes,
                 verdict, v.reason});
    const auto claims = u.claimsOf.find(v.sender);
    ledger_->setClaims(runId_, s.round, v.sender.str(),
                       claims == u.claimsOf.end() ? std::vector<int>{} : claims->second);
  }
  // The step's own row, completed with the round's validation loss (its GPU reading kept).
  ledger_->addMetric(runId_, {u.step, s.round, u.loss, s.valLoss, u.lr, s.tokensPerSecond, now, gpuMetricOf(u.gpu)});
  if (s.sample) ledger_->addSample(runId_, {s.round, s.sample->prompt, s.sample->text, s.valLoss, now});
  ledger_->commitRound(
      runId_, {s.round, now, s.expected, static_cast<int>(s.verdicts.size()), s.peers, s.sharedFingerprint, stateDir_});
}

}  // namespace es::node
