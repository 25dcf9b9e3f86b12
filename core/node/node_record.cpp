// Node: what the ledger records of a round, and when. The rows are captured from what the round
// closed with (closeRound; captureForLedger) — the claims and content ids that held for *that*
// round, of the senders it merged — and written once the round's state folder is durable
// (onPersisted), which comes after the next round's claims are already in force: reading them at
// write time recorded round N with round N+1's claims (issue 13, item 3; tst_node_rounds checks
// the rows).
#include "core/node/node.h"

#include <QDateTime>

namespace es::node {

Node::UnrecordedRound Node::captureForLedger(const RoundSummary& s, qint64 step) const {
  UnrecordedRound u{
      s, step, contentOf_, {}, lastStep_.loss, lastStep_.lr, lastStep_.step == step ? lastStep_.gpu : std::nullopt};
  u.claimsOf[swarm_.selfId()] = claims_;  // still this round's: advanceRound changes them after
  if (gather_)
    for (const auto& [sender, claims] : gather_->mergedClaims)
      if (sender != swarm_.selfId()) u.claimsOf[sender].assign(claims.begin(), claims.end());
  return u;
}

// The round's state folder is durable (written in the background after the merge): only now is
// the round committed, so the ledger is never ahead of the files and a crash loses at most the
// round in progress.
void Node::onPersisted(qint64 round, const QString& error) {
  auto it = unrecorded_.find(round);
  if (!error.isEmpty()) {
    Q_EMIT message(QStringLiteral("Saving the state of round %1 failed: %2").arg(round).arg(error));
    if (it != unrecorded_.end()) unrecorded_.erase(it);
    repairedRows_.erase(round);
    return;
  }
  if (auto repaired = repairedRows_.find(round); it == unrecorded_.end() && repaired != repairedRows_.end()) {
    repaired->second.closedAt = QDateTime::currentMSecsSinceEpoch();
    if (ledger_) ledger_->commitRound(swarm_.runId(), repaired->second);
    repairedRows_.erase(repaired);
    return;
  }
  if (it == unrecorded_.end()) return;  // a snapshot adoption, or a round recorded already
  recordRound(it->second);
  unrecorded_.erase(it);
}

std::optional<store::GpuMetric> gpuMetricOf(const std::optional<GpuReading>& r) {
  if (!r) return std::nullopt;
  return store::GpuMetric{double(r->utilizationPercent), double(r->memoryUsedBytes) / double(1 << 20),
                          double(r->temperatureC), r->powerWatts};
}

void Node::recordRound(const UnrecordedRound& u) {
  if (!ledger_) return;
  const auto run = swarm_.runId();
  const auto now = QDateTime::currentMSecsSinceEpoch();
  const RoundSummary& s = u.summary;
  for (const auto& v : s.merge.verdicts) {
    const char* verdict = v.accepted ? "accepted" : v.stale ? "stale" : v.lost ? "lost" : "rejected";
    const auto content = u.contentOf.find(v.sender);
    ledger_->addContribution(
        run, {s.round, v.sender.str(), content == u.contentOf.end() ? std::string() : content->second.str(), v.bytes,
              verdict, v.reason});
    const auto claims = u.claimsOf.find(v.sender);
    ledger_->setClaims(run, s.round, v.sender.str(), claims == u.claimsOf.end() ? std::vector<int>{} : claims->second);
  }
  // The step's own row, completed with the round's validation loss (its GPU reading kept).
  ledger_->addMetric(run, {u.step, s.round, u.loss, s.valLoss, u.lr, s.tokensPerSecond, now, gpuMetricOf(u.gpu)});
  if (s.merge.sample) ledger_->addSample(run, {s.round, s.merge.sample->prompt, s.merge.sample->text, s.valLoss, now});
  ledger_->commitRound(run, {s.round, now, s.expected, static_cast<int>(s.merge.verdicts.size()), s.merge.accepted,
                             s.merge.sharedFingerprint, config_.peer.stateDir});
}

}  // namespace es::node
