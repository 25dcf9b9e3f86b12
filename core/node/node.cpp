#include "core/node/node.h"

#include <QDateTime>
#include <QDir>

#include <algorithm>
#include <cmath>

namespace es::node {
namespace {

QString q(const std::string& s) { return QString::fromStdString(s); }

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

QString joinInts(const std::vector<int>& values) {
  QStringList parts;
  for (int v : values) parts << QString::number(v);
  return parts.join(',');
}

}  // namespace

Node::Node(Swarm& swarm, NodeConfig config, std::shared_ptr<const std::vector<std::uint16_t>> train,
           std::shared_ptr<const std::vector<std::uint16_t>> val, store::Ledger* ledger, QObject* parent)
    : QObject(parent), swarm_(swarm), config_(std::move(config)), ledger_(ledger), train_(std::move(train)), val_(std::move(val)) {
  deadline_.setSingleShot(true);
  joinWindow_.setSingleShot(true);
  connect(&deadline_, &QTimer::timeout, this, [this] { closeRound(true); });
  connect(&joinWindow_, &QTimer::timeout, this, [this] { decideClaims(); });
}

Node::~Node() {
  if (worker_) {
    QMetaObject::invokeMethod(worker_, [w = worker_] { w->stop(); }, Qt::BlockingQueuedConnection);
    worker_->deleteLater();
  }
  trainerThread_.quit();
  trainerThread_.wait();
}

void Node::start() {
  if (ledger_) ledger_->joinRun(swarm_.runId(), config_.runName);
  SwarmEvents events;
  events.peersChanged = [this] {
    if (ledger_) {
      const auto now = QDateTime::currentMSecsSinceEpoch();
      for (const auto& p : swarm_.peers()) ledger_->seePeer(swarm_.runId(), p.id, p.publicKey, now);
    }
    gather();
  };
  events.fetched = [this](const std::string& id, const std::string& path) {
    if (!gather_) return;
    auto it = gather_->fetching.find(id);
    if (it == gather_->fetching.end()) return;
    const auto sender = it->second;
    std::set<int> claims;
    for (const auto& p : swarm_.peers())
      if (p.id == sender) claims.insert(p.claims.begin(), p.claims.end());
    gather_->arrived[sender] = {sender, path, claims};
    gather();
  };
  events.fetchFailed = [this](const std::string& id, const std::string& reason) {
    Q_EMIT message(QStringLiteral("Fetch failed. Content: \"%1\". Reason: \"%2\"").arg(q(id).left(16), q(reason)));
  };
  swarm_.setEvents(std::move(events));
  announce();  // present ourselves (no claims yet) so others count us before they claim
  Q_EMIT message(QStringLiteral("Joined run %1 as peer %2; listening for peers for %3 s")
                     .arg(q(swarm_.runId()).left(16), q(swarm_.selfId()).left(16)).arg(config_.policy.joinWindowMs / 1000.0));
  joinWindow_.start(config_.policy.joinWindowMs);
}

// Experts to train. In a running swarm: the least-owned ones (p2p/leases.h). At a fresh start,
// every peer that is still unclaimed computes the same split from the same sorted list of ids,
// so simultaneous starters do not pick the same experts.
void Node::decideClaims() {
  const int e = config_.nExperts;
  const auto peers = swarm_.peers();
  std::vector<std::string> fresh{swarm_.selfId()};
  bool running = false;
  for (const auto& p : peers) {
    if (!p.claims.empty() && p.leaseUntil >= p.round) running = true;
    else fresh.push_back(p.id);
  }
  if (running) {
    // Joining a running swarm: at least our share of the experts, the least-owned first.
    const int share = (e + static_cast<int>(peers.size())) / (static_cast<int>(peers.size()) + 1);
    claims_ = swarm_.chooseClaims(round_ + 1, e, std::max(config_.policy.expertsPerPeer, share));
  } else {
    std::sort(fresh.begin(), fresh.end());
    const int n = static_cast<int>(fresh.size());
    const int index = static_cast<int>(std::find(fresh.begin(), fresh.end(), swarm_.selfId()) - fresh.begin());
    const int k = std::min(e, std::max(config_.policy.expertsPerPeer, (e + n - 1) / n));
    for (int j = 0; j < k; ++j) claims_.push_back((index * k + j) % e);
    std::sort(claims_.begin(), claims_.end());
    claims_.erase(std::unique(claims_.begin(), claims_.end()), claims_.end());
  }
  if (peers.empty()) Q_EMIT message(QStringLiteral("No other peers found: training alone, all experts of this peer's claim"));
  Q_EMIT message(QStringLiteral("Claimed experts %1 (%2 other peers seen)").arg(joinInts(claims_)).arg(peers.size()));

  auto peerConfig = config_.peer;
  peerConfig.trainer.localExperts = claims_;
  worker_ = new TrainerWorker(peerConfig, train_, val_, config_.contribDir);
  worker_->moveToThread(&trainerThread_);
  connect(worker_, &TrainerWorker::ready, this, &Node::onReady);
  connect(worker_, &TrainerWorker::failed, this, [this](const QString& e) { Q_EMIT failed(e); });
  connect(worker_, &TrainerWorker::stepped, this, [this](const StepReport& r) {
    steps_ = r.step;
    lastStep_ = r;
    if (ledger_)
      ledger_->addMetric(swarm_.runId(), {r.step, round_, r.loss, std::nullopt, r.lr, r.tokensPerSecond,
                                          QDateTime::currentMSecsSinceEpoch()});
    Q_EMIT stepped(r);
  });
  connect(worker_, &TrainerWorker::roundTrained, this, &Node::onRoundTrained);
  connect(worker_, &TrainerWorker::merged, this, &Node::onMerged);
  trainerThread_.start();
  QMetaObject::invokeMethod(worker_, [w = worker_] { w->start(); }, Qt::QueuedConnection);
}

void Node::onReady(qint64 mergedRound, qint64 step, bool resumed) {
  round_ = mergedRound + 1;
  steps_ = step;
  if (resumed) Q_EMIT message(QStringLiteral("Resumed after round %1 (step %2)").arg(mergedRound).arg(step));
  announce();
}

void Node::announce() {
  Announcement a;
  a.round = round_;
  a.claims = stopping_ ? std::vector<int>{} : claims_;
  a.leaseUntil = stopping_ || claims_.empty() ? 0 : round_ + config_.policy.leaseRounds;
  for (auto it = contrib_.rbegin(); it != contrib_.rend() && a.contrib.size() < 3; ++it) a.contrib.insert(*it);
  a.steps = steps_;
  a.loss = lastLoss_;
  a.tokensPerSecond = lastTokensPerSecond_;
  if (auto s = swarm_.announce(a); !s) Q_EMIT message(QStringLiteral("Announce failed: %1").arg(q(s.error())));
}

std::vector<SwarmPeer> Node::livePeers(qint64 round) const {
  std::vector<SwarmPeer> live;
  for (const auto& p : swarm_.peers())
    if (!p.claims.empty() && p.leaseUntil >= round && !banned_.count(p.id)) live.push_back(p);
  return live;
}

void Node::onRoundTrained(const RoundTrained& trained) {
  lastLoss_ = trained.meanLoss;
  lastTokensPerSecond_ = trained.tokensPerSecond;
  auto id = swarm_.publish(trained.contribution.path);
  if (!id) return Q_EMIT failed(QStringLiteral("publishing round %1: %2").arg(trained.round).arg(q(id.error())));
  contrib_[trained.round] = *id;
  round_ = trained.round;
  announce();
  gather_.emplace();
  gather_->round = trained.round;
  gather_->own = trained;
  gather_->arrived[swarm_.selfId()] = {swarm_.selfId(), trained.contribution.path,
                                       std::set<int>(claims_.begin(), claims_.end())};
  gather_->clock.start();
  const double seconds = std::clamp(config_.policy.deadlineFactor * median(gatherSeconds_),
                                    config_.policy.deadlineMinSeconds, config_.policy.deadlineMaxSeconds);
  deadline_.start(static_cast<int>(seconds * 1000));
  gather();
}

void Node::gather() {
  if (!gather_ || gather_->closing) return;
  const qint64 r = gather_->round;
  const QString dir = QDir(config_.fetchDir).filePath(QString::number(r));
  gather_->expected = {swarm_.selfId()};
  for (const auto& p : livePeers(r)) {
    gather_->expected.insert(p.id);
    auto c = p.contrib.find(r);
    if (c == p.contrib.end() || gather_->arrived.count(p.id) || gather_->fetching.count(c->second)) continue;
    gather_->fetching[c->second] = p.id;
    if (auto s = swarm_.fetch(c->second, dir.toStdString()); !s)
      Q_EMIT message(QStringLiteral("Cannot fetch from %1: %2").arg(q(p.id).left(16), q(s.error())));
  }
  for (const auto& id : gather_->expected)
    if (!gather_->arrived.count(id)) return;
  closeRound(false);
}

void Node::closeRound(bool deadline) {
  if (!gather_ || gather_->closing) return;
  gather_->closing = true;
  deadline_.stop();
  const double seconds = gather_->clock.elapsed() / 1000.0;
  if (!deadline) gatherSeconds_.push_back(seconds);
  if (gatherSeconds_.size() > 8) gatherSeconds_.erase(gatherSeconds_.begin());
  if (deadline)
    Q_EMIT message(QStringLiteral("Round %1 closed by its deadline after %2 s with %3 of %4 contributions")
                       .arg(gather_->round).arg(seconds, 0, 'f', 1).arg(gather_->arrived.size()).arg(gather_->expected.size()));
  std::vector<IncomingContribution> list;
  for (const auto& [sender, c] : gather_->arrived) list.push_back(c);
  contentOf_.clear();
  for (const auto& [id, sender] : gather_->fetching) contentOf_[sender] = id;
  contentOf_[swarm_.selfId()] = contrib_[gather_->round];
  const qint64 r = gather_->round;
  QMetaObject::invokeMethod(worker_, [w = worker_, r, list] { w->merge(r, list); }, Qt::QueuedConnection);
  gather_->gatherSecondsHint = seconds;
  gather_->deadlineHit = deadline;
}

void Node::onMerged(const RoundMerged& merged) {
  RoundSummary s;
  s.round = merged.result.round;
  s.peers = merged.result.accepted;
  s.valLoss = merged.valLoss;
  s.merge = merged.result;
  if (gather_) {
    s.expected = static_cast<int>(gather_->expected.size());
    s.loss = gather_->own.meanLoss;
    s.tokensPerSecond = gather_->own.tokensPerSecond;
    s.gatherSeconds = gather_->gatherSecondsHint;
    s.deadlineHit = gather_->deadlineHit;
  }
  for (const auto& v : merged.result.verdicts) {
    if (v.accepted || v.stale || v.sender == swarm_.selfId()) continue;
    banned_.insert(v.sender);
    if (ledger_) ledger_->banPeer(swarm_.runId(), v.sender, v.reason);
    Q_EMIT message(QStringLiteral("Contribution rejected, peer banned. Peer: \"%1\". Reason: \"%2\"").arg(q(v.sender).left(16), q(v.reason)));
  }
  recordRound(s, merged.step);
  gather_.reset();
  // Keep our last two contributions seeding for late fetchers; older ones are retired.
  for (auto it = contrib_.begin(); it != contrib_.end() && it->first + 2 <= s.round;) {
    swarm_.retire(it->second, true);
    it = contrib_.erase(it);
  }
  round_ = s.round + 1;
  announce();
  Q_EMIT roundClosed(s);
  if (config_.maxRounds > 0 && s.round >= config_.maxRounds) stop();
}

Status Node::exportModel(const QString& path) {
  if (!worker_) return makeError("no model yet: the node never started training");
  Status result = makeError("export did not run");
  QMetaObject::invokeMethod(worker_, [&] { result = worker_->exportTo(path); }, Qt::BlockingQueuedConnection);
  return result;
}

// The merge returned only after the state files were durable (SpesPeer::merge), so the round can
// be committed now: a crash loses at most the round in progress.
void Node::recordRound(const RoundSummary& s, qint64 step) {
  if (!ledger_) return;
  const auto run = swarm_.runId();
  const auto now = QDateTime::currentMSecsSinceEpoch();
  std::map<std::string, std::vector<int>> claimsOf{{swarm_.selfId(), claims_}};
  for (const auto& p : swarm_.peers()) claimsOf[p.id] = p.claims;
  for (const auto& v : s.merge.verdicts) {
    const char* verdict = v.accepted ? "accepted" : v.stale ? "stale" : "rejected";
    ledger_->addContribution(run, {s.round, v.sender, contentOf_[v.sender], v.bytes, verdict, v.reason});
    ledger_->setClaims(run, s.round, v.sender, claimsOf[v.sender]);
  }
  ledger_->addMetric(run, {step, s.round, lastStep_.loss, s.valLoss, lastStep_.lr, s.tokensPerSecond, now});
  ledger_->commitRound(run, {s.round, now, s.expected, static_cast<int>(s.merge.verdicts.size()), s.merge.accepted,
                             s.merge.sharedFingerprint, config_.peer.stateDir});
}

void Node::stop() {
  if (stopping_) return;
  stopping_ = true;
  deadline_.stop();
  joinWindow_.stop();
  if (worker_) QMetaObject::invokeMethod(worker_, [w = worker_] { w->stop(); }, Qt::BlockingQueuedConnection);
  announce();  // claims released: others re-claim our experts without waiting for the lease
  Q_EMIT finished();
}

}  // namespace es::node
