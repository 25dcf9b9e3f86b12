#include "app/event_lines.h"

#include <QDateTime>
#include <QJsonArray>
#include <QJsonDocument>

#include <cstdio>

namespace es::app {

QJsonObject startedEvent(const node::RunInfo& run) {
  return {{"event", "started"},
          {"run", QString::fromStdString(run.runId)},
          {"name", QString::fromStdString(run.runName)},
          {"peer", QString::fromStdString(run.selfId)},
          {"listen", QString::fromStdString(run.listen)},
          {"device", QString::fromStdString(run.device)},
          {"experts", run.nExperts},
          {"layers", run.nLayers},
          {"sync_every", run.syncEvery},
          {"merge", QJsonObject{{"aggregate", QString::fromStdString(run.aggregate)},
                                {"outer_lr", run.outerLr},
                                {"outer_momentum", run.outerMomentum},
                                {"outer_on", QString::fromStdString(run.outerOn)}}}};
}

QJsonObject roundEvent(const node::RoundSummary& s) {
  QJsonArray updated;
  for (const int e : s.updatedExperts) updated.append(e);
  QJsonObject event{{"event", "round"},
                    {"round", qint64(s.round)},
                    {"peers", s.peers},
                    {"expected", s.expected},
                    {"loss", s.loss},
                    {"tok_s", s.tokensPerSecond},
                    {"merged", QString::fromStdString(s.sharedFingerprint)},
                    {"state", QString::fromStdString(s.fingerprint)},
                    {"deadline", s.deadlineHit},
                    {"repaired", s.repaired},
                    {"updated_experts", updated},
                    {"session_bytes_sent", qint64(s.sessionBytesSent)},
                    {"session_bytes_received", qint64(s.sessionBytesReceived)}};
  if (s.valLoss) event.insert("val_loss", *s.valLoss);
  return event;
}

QJsonObject summaryEvent(const EngineSummary& s) {
  return {{"event", "summary"},
          {"rounds", s.rounds},
          {"trainer_busy_fraction", s.trainerBusyFraction},
          {"mean_round_seconds", s.meanRoundSeconds},
          {"bytes_sent_per_round", s.bytesSentPerRound},
          {"bytes_received_per_round", s.bytesReceivedPerRound},
          {"transfers", s.transfers},
          {"refused_fetches", s.refusedFetches},
          {"transfer_files", QJsonArray::fromStringList(s.transferFiles)}};
}

QJsonObject nodeEvent(const QString& kind, const QVariantMap& fields) {
  auto event = QJsonObject::fromVariantMap(fields);
  event.insert("event", kind);
  return event;
}

void printEvent(QJsonObject event) {
  event.insert("t", QDateTime::currentMSecsSinceEpoch());
  std::printf("%s\n", QJsonDocument(event).toJson(QJsonDocument::Compact).constData());
  std::fflush(stdout);
}

}  // namespace es::app
