// Node: what fetched content may cost (issue 14). Every byte from the network is hostile: each
// fetch gets its own folder and the exact sizes its content may have (checked by the swarm layer
// on the metadata, before the first piece), at most kMaxConcurrentFetches run at once, none
// starts past the run folder's disk quota, and whatever a round left behind is deleted.
#include "core/checkpoint/round_dirs.h"
#include "core/node/node.h"
#include "core/node/node_util.h"
#include "core/sync/fetch_size.h"

#include <QCoreApplication>
#include <QDir>
#include <QDirIterator>
#include <QFile>
#include <QFileInfo>

namespace es::node {

using detail::q;

using detail::isSafeId;

namespace {

QString mib(std::int64_t bytes) { return QString::number(double(bytes) / (1 << 20), 'f', 1); }

std::int64_t folderBytes(const QString& dir) {
  std::int64_t bytes = 0;
  QDirIterator it(dir, QDir::Files | QDir::Hidden | QDir::NoSymLinks, QDirIterator::Subdirectories);
  while (it.hasNext()) {
    it.next();
    bytes += it.fileInfo().size();
  }
  return bytes;
}

std::int64_t newestFileBytes(const QString& dir) {
  if (dir.isEmpty()) return 0;
  const auto files = QDir(dir).entryInfoList(QDir::Files | QDir::NoSymLinks, QDir::Time);
  return files.isEmpty() ? 0 : files.front().size();
}

// What our own next writes may add before the old ones go, each as large as the newest of its kind:
// a state round (round_dirs commits the new one before the oldest kept round is removed), its
// training state once more (a change of claims hands the trainer over through a file in the state
// folder), a contribution and a snapshot. The quota counts it, so our own files do not push the
// folder past the quota after a fetch was let in.
std::int64_t ownGrowthReserve(const NodeConfig& config) {
  std::int64_t reserve = 0;
  const auto rounds = round_dirs::complete(config.peer.stateDir);
  if (!rounds.empty()) {
    const QString newest = QString::fromStdString(rounds.front().path);
    reserve += folderBytes(newest) + QFileInfo(QDir(newest).filePath("training-state.safetensors")).size();
  }
  return reserve + newestFileBytes(config.contribDir) + newestFileBytes(config.snapshotDir);
}

}  // namespace

FetchLimits Node::contributionLimits(const PeerId& sender, const std::set<int>& claims, qint64 round,
                                     const std::string& baseHash) const {
  // Our own contribution of the round carries the base hash every honest one names (a stale
  // one names another base of the same length: same size).
  const std::string base = !baseHash.empty() ? baseHash : gather_ ? gather_->own.contribution.baseHash : std::string();
  const sync::ContributionHeader header{runIdForFiles(), round, sender.str(), base, config_.peer.codec};
  return {sync::contributionSizes(config_.peer.trainer.model, claims, header)};
}

FetchLimits Node::snapshotLimits(qint64 round) const {
  return {{sync::snapshotBytes(config_.peer.trainer.model, runIdForFiles(), round, config_.peer.outer)}};
}

int Node::fetchesInFlight() const { return gather_ ? static_cast<int>(gather_->inFlight.size()) : 0; }

// Starts the transfer of a contribution of `round`, or not yet: false when K fetches are in
// flight or the quota does not allow it (gather() asks again on every event; a held-back fetch
// starts when a slot frees up, a round closes or the donor raises the quota). One transfer per
// content id, whoever announced it (Gather::fetching says why), with every announcer's sizes.
bool Node::startFetch(const ContentId& id, qint64 round) {
  if (fetchesInFlight() >= kMaxConcurrentFetches) return false;
  const auto limits = limitsFor(id, round);
  const auto senders = gather_->sendersOf(id);
  const QString who = senders.empty() ? QString() : q(*senders.begin()).left(16);
  if (!quotaAllows(limits.sizes.back(), QStringLiteral("the contribution of %1 to round %2").arg(who).arg(round)))
    return false;
  gather_->transfers[id] = limits;
  gather_->inFlight[id] = limits.sizes.back();
  gather_->progress[id] = {0, gather_->clock.elapsed(), gather_->clock.elapsed()};
  fetched_[round].insert(id);
  const QString dir = QDir(config_.fetchDir).filePath(QString::number(round) + "/" + q(id));
  if (auto s = swarm_.fetch(id, dir.toStdString(), limits); !s) {
    Q_EMIT message(QStringLiteral("Cannot fetch from %1: %2").arg(who, q(s.error())));
    gather_->inFlight.erase(id);
  }
  return true;
}

// A resync's snapshot: exactly the predicted size, in its own folder, within the quota.
bool Node::startSnapshotFetch(qint64 round, const ContentId& id) {
  if (!isSafeId(id)) return false;
  const auto limits = snapshotLimits(round);
  if (!quotaAllows(limits.sizes.back(), QStringLiteral("the snapshot of round %1").arg(round))) return false;
  pendingSnapshot_ = id;
  pendingSnapshotRound_ = round;
  snapshotFetches_.insert(id);
  const QString dir = QDir(config_.fetchDir).filePath("snapshots/" + q(id));
  if (auto s = swarm_.fetch(id, dir.toStdString(), limits); !s) {
    Q_EMIT message(QStringLiteral("Cannot fetch the snapshot: %1").arg(q(s.error())));
    pendingSnapshot_ = {};
    return false;
  }
  return true;
}

std::int64_t Node::runFolderBytes() const {
  return folderBytes(config_.runDir.isEmpty() ? QFileInfo(config_.fetchDir).absolutePath() : config_.runDir);
}

// What is on disk, plus the most that the fetches in flight may still bring, plus what our own
// next writes may add, must stay within the quota: the run folder never exceeds it, whatever the
// senders send (the limits bound each file).
bool Node::quotaAllows(std::int64_t bytes, const QString& what) {
  if (config_.diskQuotaBytes <= 0) return true;
  diskUsed_ = runFolderBytes();
  std::int64_t coming = 0;
  if (gather_)
    for (const auto& [id, most] : gather_->inFlight) coming += most;
  const std::int64_t reserve = ownGrowthReserve(config_);
  if (diskUsed_ + reserve + coming + bytes <= config_.diskQuotaBytes) return true;
  quotaReached_ = true;
  if (quotaReportedRound_ != round_) {
    quotaReportedRound_ = round_;
    Q_EMIT message(QStringLiteral("Disk quota reached: the run folder holds %1 MiB (%2 MiB more on its way, %3 MiB "
                                  "kept for our own next state) of its %4 MiB quota; not fetching %5 (%6 MiB). "
                                  "Training goes on; raise the quota in the settings.")
                       .arg(mib(diskUsed_), mib(coming), mib(reserve), mib(config_.diskQuotaBytes), what, mib(bytes)));
  }
  return false;
}

void Node::onFetchFailed(const ContentId& id, const std::string& reason, bool refused) {
  Q_EMIT message(QStringLiteral("Fetch failed. Content: \"%1\". Reason: \"%2\"").arg(q(id).left(16), q(reason)));
  if (repair_ && repair_->missing.count(id))
    return abandonRepair(QStringLiteral("fetching %1 failed").arg(q(id).left(16)));
  if (refused) return refuse(id, reason);
  // A snapshot whose transfer failed (a torrent or file error, not a refusal) is started again
  // from scratch, twice at most, as a contribution is: libtorrent 2.0.8 fails a hybrid download
  // now and then with "v1 and v2 hashes do not describe the same data" (a newcomer then fell back
  // to an older round's snapshot: 2 of 11 tst_swarm_adversary runs). Then the next candidate.
  if (!pendingSnapshot_.empty() && id == pendingSnapshot_)
    return fetchSnapshotAgain(QStringLiteral("its fetch failed"));
  // Drop the transfer and its partial file; the next gather() starts it afresh — at most 3 times,
  // then the content is given up for the round (it stays in `fetching`: never started again).
  if (!gather_ || !gather_->transfers.count(id)) return;
  gather_->inFlight.erase(id);
  swarm_.retire(id, true);
  if (++fetchRetries_[id] > 3) return;  // stays in `transfers`: never started again
  gather_->transfers.erase(id);
  QTimer::singleShot(500, this, [this] { gather(); });
}

void Node::fetchSnapshotAgain(const QString& why) {
  const bool again = ++fetchRetries_[pendingSnapshot_] <= 2;
  dropPendingSnapshot(why + (again ? QStringLiteral("; trying it again") : QString()), !again);
  if (again) return void(QTimer::singleShot(500, this, [this] { tryResync(); }));
  tryResync();
}

// The content broke its limits (more files, another size): removed by the swarm layer before its
// first piece. A contribution's sender is banned (as for a rejected contribution) and the round
// stops waiting for it; a snapshot is never chosen again.
void Node::refuse(const ContentId& id, const std::string& reason) {
  if (!pendingSnapshot_.empty() && id == pendingSnapshot_) {  // never chosen again
    dropPendingSnapshot(QStringLiteral("refused: ") + q(reason), true);
    QTimer::singleShot(0, this, [this] { tryResync(); });
    return;
  }
  if (!gather_ || !gather_->transfers.count(id)) return;
  gather_->inFlight.erase(id);
  // Someone announced it after its transfer began, with other sizes: not yet conclusive (that
  // one may be the real sender, the first an impostor) — once more, with everyone's sizes.
  if (gather_->transfers[id].sizes != limitsFor(id, gather_->round).sizes) {
    gather_->transfers.erase(id);
    QTimer::singleShot(500, this, [this] { gather(); });
    return;
  }
  // Checked against every announcer's predicted sizes: none of them told the truth — unless the
  // sizes were guessed from claims newer than the round (its record of the round never seen):
  // then the round goes on without it, and nobody is banned for our guess.
  const auto senders = gather_->sendersOf(id);
  bool guessed = false;
  for (const auto& sender : senders) guessed = guessed || gather_->claimsGuessed.count(sender);
  if (guessed) {
    Q_EMIT message(QStringLiteral("Not merging the contribution of %1 to round %2: %3, and its claims of that round "
                                  "are unknown here (its record has moved on)")
                       .arg(q(*senders.begin()).left(16))
                       .arg(gather_->round)
                       .arg(q(reason)));
    gather_->givenUp.insert(senders.begin(), senders.end());
    gather();
    return;
  }
  const std::string why = "refused before download: " + reason;
  for (const auto& sender : senders) {
    if (ledger_) ledger_->addContribution(swarm_.runId(), {gather_->round, sender.str(), id.str(), 0, "rejected", why});
    banSender(sender, why);
  }
  // The bytes may still be an honest peer's that an impostor announced first with its own sizes:
  // the banned announcers are forgotten and the transfer with them, so a live announcer of the same
  // id starts it afresh with its sizes (each try bans its announcers: bounded by their number).
  for (auto it = gather_->fetching.begin(); it != gather_->fetching.end();)
    it = it->first.second == id ? gather_->fetching.erase(it) : std::next(it);
  gather_->transfers.erase(id);
  gather();
}

void Node::banSender(const PeerId& sender, const std::string& reason) {
  ban(sender, reason);
  Q_EMIT message(QStringLiteral("Contribution rejected, peer banned. Peer: \"%1\". Reason: \"%2\"")
                     .arg(q(sender).left(16), q(reason)));
}

// The round is merged: what did not arrive by now is of no use (a never-seeded torrent would
// otherwise re-announce until it is retired two rounds later). Its partial file goes with it.
void Node::retireUnarrived() {
  if (!gather_) return;
  for (const auto& [id, limits] : gather_->transfers)
    if (!gather_->fetchedPath.count(id)) swarm_.retire(id, true);
}

// At start nothing in incoming/ belongs to a transfer (the session restores none): all of it goes.
// At round close: round folders older than the retention (their torrents were just retired),
// snapshots other than the one being fetched. Both times: temp files of other processes
// (atomic_file.cpp's "*.tmp-<pid>", identity.cpp's "*.tmp-<pid>-<nonce>") in the run's folders.
void Node::cleanRunFolder(bool atStart) {
  if (config_.fetchDir.isEmpty()) return;  // QDir("") is the working directory
  QDir incoming(config_.fetchDir);
  if (atStart) incoming.removeRecursively();
  for (const auto& name : incoming.entryList(QDir::Dirs | QDir::NoDotAndDotDot)) {
    bool numeric = false;
    const qint64 r = name.toLongLong(&numeric);
    if (numeric && r + 2 <= mergedRound_ && !fetched_.count(r)) QDir(incoming.filePath(name)).removeRecursively();
  }
  for (auto it = snapshotFetches_.begin(); it != snapshotFetches_.end();) {
    if (*it == pendingSnapshot_) {
      ++it;
      continue;
    }
    swarm_.retire(*it, true);
    fetchRetries_.erase(*it);
    QDir(incoming.filePath("snapshots/" + q(*it))).removeRecursively();
    it = snapshotFetches_.erase(it);
  }
  const QString ours = QStringLiteral(".tmp-%1").arg(QCoreApplication::applicationPid());
  for (const QString& dir : {config_.fetchDir, config_.contribDir, config_.snapshotDir, q(config_.peer.stateDir)}) {
    if (dir.isEmpty()) continue;
    QDirIterator it(dir, {QStringLiteral("*.tmp-*")}, QDir::Files | QDir::Hidden, QDirIterator::Subdirectories);
    while (it.hasNext()) {
      const QString path = it.next();
      if (!QFileInfo(path).fileName().contains(ours + "-") && !path.endsWith(ours)) QFile::remove(path);
    }
  }
}

}  // namespace es::node
