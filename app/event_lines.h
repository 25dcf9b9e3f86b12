// The headless client's machine-readable events (`--events`): one JSON object per line on stdout,
// in place of the human progress lines, for scripts and for the multi-process tests, which read
// these fields instead of the log's wording (issue 13 item 7). A field that was not measured is
// absent, never a value repeated from earlier. Every object has "event" (its kind) and "t"
// (milliseconds since the Unix epoch, when it was printed).
//
//   started  run, name, peer, listen, device, experts, layers, sync_every, merge {aggregate,
//            outer_lr, outer_momentum, outer_on}
//   round    round, peers, expected, loss, val_loss (eval rounds only), tok_s, merged (shared
//            tensors' fingerprint), state (the whole merged state's), deadline, repaired,
//            updated_experts, session_bytes_sent / _received (the session's, since it started, read
//            when the round merged)
//   summary  rounds, trainer_busy_fraction, mean_round_seconds, bytes_sent_per_round,
//            bytes_received_per_round, transfers, refused_fetches, transfer_files
//   claims, ban, deadline, resync, snapshot, resumed, outOfStep, repair, … every decision the
//            node notes, with its fields (core/node/node.h, Node::noted)
//   manifest run, state ("fetching" | "fetched" | "installed": the link's run ships with the
//            client, nothing fetched): joining by magnet link, before "started"
#pragma once

#include "app/engine.h"
#include "core/node/node_reports.h"

#include <QJsonObject>

namespace es::app {

QJsonObject startedEvent(const node::RunInfo& run);
QJsonObject roundEvent(const node::RoundSummary& summary);
QJsonObject summaryEvent(const EngineSummary& summary);
QJsonObject nodeEvent(const QString& kind, const QVariantMap& fields);
void printEvent(QJsonObject event);  // stamps "t", prints one line on stdout, flushes

}  // namespace es::app
