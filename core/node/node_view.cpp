// Node: donor controls (pause, pause after the round) and the view of the swarm for the GUI.
#include "core/node/node.h"

#include <map>

namespace es::node {

void Node::setPaused(bool paused) {
  pauseAfterRound_ = false;
  if (!worker_) {  // before the claims are decided: applied when the trainer starts
    if (paused_ != paused) {
      paused_ = paused;
      Q_EMIT pausedChanged(paused);
    }
    return;
  }
  QMetaObject::invokeMethod(
      worker_, [w = worker_, paused] { w->setPaused(paused); }, Qt::QueuedConnection);
}

void Node::setTrainTokens(std::shared_ptr<const std::vector<std::uint16_t>> tokens) {
  train_ = tokens;  // what a trainer started later gets
  if (worker_)
    QMetaObject::invokeMethod(
        worker_, [w = worker_, tokens] { w->setTrainTokens(tokens); }, Qt::QueuedConnection);
}

void Node::finishRoundThenPause() {
  if (!worker_) {
    pauseAfterRound_ = true;
    return;
  }
  QMetaObject::invokeMethod(
      worker_, [w = worker_] { w->pauseAfterRound(); }, Qt::QueuedConnection);
}

namespace {

// Whose content each transfer is: our own publications, or what the peers' records announce.
using KnownContent = std::map<ContentId, TransferView>;

void note(KnownContent& known, const ContentId& id, const PeerId& peer, const char* kind, std::int64_t round,
          bool ours) {
  auto& t = known[id];
  t.peer = peer.str();
  t.kind = kind;
  t.round = round;
  t.ours = ours;
}

PeerView peerViewOf(const SwarmPeer& p, bool banned) {
  PeerView peer;
  const Announcement& a = p.announced;
  peer.id = p.id.str();
  peer.banned = banned;
  peer.round = a.round;
  peer.claims = a.claims;
  peer.leaseUntil = a.leaseUntil;
  peer.steps = a.steps;
  peer.loss = a.loss;
  peer.tokensPerSecond = a.tokensPerSecond;
  return peer;
}

TransferView transferViewOf(const SwarmTransfer& t, const KnownContent& known) {
  TransferView out;
  if (auto it = known.find(t.contentId); it != known.end())
    out = it->second;
  else
    out.kind = "other";
  out.contentId = t.contentId.str();
  out.totalBytes = t.totalBytes;
  out.doneBytes = t.doneBytes;
  out.uploadedBytes = t.uploadedBytes;
  out.downloadedBytes = t.downloadedBytes;
  out.connections = t.connections;
  out.finished = t.finished;
  return out;
}

}  // namespace

SwarmView Node::view() const {
  SwarmView v;
  v.runId = swarm_.runId();
  v.selfId = swarm_.selfId().str();
  v.round = own_.round;
  v.nExperts = config_.nExperts;
  v.nLayers = config_.peer.trainer.model.nLayers;
  v.paused = paused_;
  PeerView self;
  self.id = v.selfId;
  self.self = true;
  self.round = own_.round;
  self.claims = stopping_ ? std::vector<int>{} : own_.claims;
  self.leaseUntil = own_.claims.empty() ? 0 : own_.round + config_.policy.leaseRounds;
  self.steps = own_.steps;
  self.loss = trainerSteps_.last().loss;
  self.tokensPerSecond = trainerSteps_.last().tokensPerSecond;
  v.peers.push_back(self);
  KnownContent known;
  for (const auto& [round, id] : own_.contrib) note(known, id, swarm_.selfId(), "contribution", round, true);
  for (const auto& [round, id] : own_.snapshots) note(known, id, swarm_.selfId(), "snapshot", round, true);
  for (const auto& p : swarm_.peers()) {
    v.peers.push_back(peerViewOf(p, peers_.isBanned(p.id)));
    for (const auto& [round, id] : p.announced.contrib)
      if (!known.count(id)) note(known, id, p.id, "contribution", round, false);
    for (const auto& [round, id] : p.announced.snapshot)
      if (!known.count(id)) note(known, id, p.id, "snapshot", round, false);
  }
  const auto traffic = swarm_.traffic();
  for (const auto& t : traffic.transfers) v.transfers.push_back(transferViewOf(t, known));
  v.bytesSent = traffic.bytesSent;
  v.bytesReceived = traffic.bytesReceived;
  v.connections = swarm_.connections();
  v.diskUsedBytes = folder_.usedBytes();
  v.diskQuotaBytes = config_.diskQuotaBytes;
  v.diskQuotaReached = folder_.quotaReached();
  return v;
}

}  // namespace es::node
