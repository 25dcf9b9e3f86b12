// The node wires the round's objects (docs/ARCHITECTURE.md, "The round's objects"): it owns our
// own record, the round number, the trainer thread and the timers; PeerBook, RoundGather,
// Agreement, RunFolder and RoundRecorder own the rest. Here: construction, the swarm's events,
// start and stop.
#include "core/node/node.h"
#include "core/node/node_util.h"

#include <QDateTime>

namespace es::node {

using detail::q;

Node::Node(Swarm& swarm, NodeConfig config, std::shared_ptr<const std::vector<std::uint16_t>> train,
           std::shared_ptr<const std::vector<std::uint16_t>> val, store::Ledger* ledger, QObject* parent)
    : QObject(parent),
      swarm_(swarm),
      config_(std::move(config)),
      ledger_(ledger),
      log_{[this](const QString& line) { Q_EMIT message(line); },
           [this](const QString& kind, const QVariantMap& fields) { Q_EMIT noted(kind, fields); }},
      peers_(swarm_, ledger_, config_.policy.leaseRounds, config_.policy.anchors),
      folder_(swarm_, config_, log_),
      recorder_(ledger_, swarm_.runId(), config_.peer.stateDir),
      agreement_(*this, swarm_, peers_, folder_, own_, config_, log_),
      train_(std::move(train)),
      val_(std::move(val)) {
  deadline_.setSingleShot(true);
  joinWindow_.setSingleShot(true);
  connect(&deadline_, &QTimer::timeout, this, &Node::onDeadline);
  outputDeadline_.setSingleShot(true);
  connect(&outputDeadline_, &QTimer::timeout, this, &Node::onOutputDeadline);
  pass_.setSingleShot(true);
  connect(&pass_, &QTimer::timeout, this, [this] { gather(); });
  connect(&joinWindow_, &QTimer::timeout, this, [this] { decideClaims(); });
}

Node::~Node() {
  if (worker_) {
    QMetaObject::invokeMethod(
        worker_, [w = worker_] { w->stop(); }, Qt::BlockingQueuedConnection);
    worker_->deleteLater();
  }
  trainerThread_.quit();
  trainerThread_.wait();
}

void Node::start() {
  if (ledger_) ledger_->joinRun(swarm_.runId(), config_.runName);
  folder_.clean(true, own_.mergedRound, agreement_.pendingSnapshot());
  if (const auto loaded = peers_.load(); !loaded)
    Q_EMIT message(q(loaded.error()));
  else if (*loaded > 0)
    Q_EMIT message(QStringLiteral("Loaded %1 bans of this run from the ledger").arg(*loaded));
  SwarmEvents events;
  events.peersChanged = [this] {
    peers_.noteRecords();
    pace_.heard(swarm_.peers());
    agreement_.checkAgreement();
    if (agreement_.outOfStep() && agreement_.pendingSnapshot().empty()) agreement_.tryResync();
    gather();
    passOutputs();
  };
  events.fetched = [this](const ContentId& id, const std::string& path) {
    if (!agreement_.fetched(id, path) && !shardedFetched(id, path)) onContributionFetched(id, path);
  };
  events.fetchFailed = [this](const ContentId& id, const std::string& reason, bool refused) {
    onFetchFailed(id, reason, refused);
  };
  events.peerBanned = [this](const PeerId& id, const std::string& reason) {
    ban(id, reason);
    Q_EMIT message(QStringLiteral("Peer %1 banned: %2").arg(q(id).left(16), q(reason)));
  };
  swarm_.setEvents(std::move(events));
  peers_.noteClaims();          // the records already here
  pace_.heard(swarm_.peers());  // their merges count as heard now (SwarmPace), not at the next change
  announce();                   // present ourselves (no claims yet) so others count us before they claim
  Q_EMIT message(QStringLiteral("Joined run %1 as peer %2; listening for peers for %3 s")
                     .arg(q(swarm_.runId()).left(16), q(swarm_.selfId()).left(16))
                     .arg(config_.policy.joinWindowMs / 1000.0));
  joinWindow_.start(config_.policy.joinWindowMs);
}

void Node::ban(const PeerId& id, const std::string& reason) {
  peers_.ban(id, reason);
  Q_EMIT noted(QStringLiteral("ban"), {{"peer", q(id)}, {"reason", QString::fromStdString(reason)}});
}

void Node::banSender(const PeerId& sender, const std::string& reason) {
  ban(sender, reason);
  Q_EMIT message(QStringLiteral("Contribution rejected, peer banned. Peer: \"%1\". Reason: \"%2\"")
                     .arg(q(sender).left(16), q(reason)));
}

Status Node::exportModel(const QString& path) {
  if (!worker_) return makeError("no model yet: the node never started training");
  Status result = makeError("export did not run");
  QMetaObject::invokeMethod(
      worker_, [&] { result = worker_->exportTo(path); }, Qt::BlockingQueuedConnection);
  return result;
}

void Node::stop() {
  if (stopping_) return;
  stopping_ = true;
  deadline_.stop();
  outputDeadline_.stop();
  joinWindow_.stop();
  agreement_.stop();
  if (worker_)
    QMetaObject::invokeMethod(
        worker_, [w = worker_] { w->stop(); }, Qt::BlockingQueuedConnection);
  announce();  // claims released: others re-claim our experts without waiting for the lease
  // Queued, not emitted here: the trainer's last `persisted` reports were posted to this thread
  // while stop() waited for its writes, and they record the last rounds in the ledger first.
  QMetaObject::invokeMethod(
      this, [this] { Q_EMIT finished(); }, Qt::QueuedConnection);
}

}  // namespace es::node
