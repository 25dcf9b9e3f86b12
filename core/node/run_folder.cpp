#include "core/node/run_folder.h"

#include "core/checkpoint/round_dirs.h"
#include "core/node/node_util.h"

#include <QCoreApplication>
#include <QDir>
#include <QDirIterator>
#include <QFile>
#include <QFileInfo>

namespace es::node {

using detail::q;

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

RunFolder::RunFolder(Swarm& swarm, const NodeConfig& config, const NodeLog& log)
    : swarm_(swarm), config_(config), log_(log) {}

std::int64_t RunFolder::runFolderBytes() const {
  return folderBytes(config_.runDir.isEmpty() ? QFileInfo(config_.fetchDir).absolutePath() : config_.runDir);
}

bool RunFolder::allows(std::int64_t bytes, std::int64_t coming, const QString& what, std::int64_t round) {
  if (config_.diskQuotaBytes <= 0) return true;
  diskUsed_ = runFolderBytes();
  const std::int64_t reserve = ownGrowthReserve(config_);
  if (diskUsed_ + reserve + coming + bytes <= config_.diskQuotaBytes) return true;
  quotaReached_ = true;
  if (quotaReportedRound_ != round) {
    quotaReportedRound_ = round;
    log_.say(QStringLiteral("Disk quota reached: the run folder holds %1 MiB (%2 MiB more on its way, %3 MiB "
                            "kept for our own next state) of its %4 MiB quota; not fetching %5 (%6 MiB). "
                            "Training goes on; raise the quota in the settings.")
                 .arg(mib(diskUsed_), mib(coming), mib(reserve), mib(config_.diskQuotaBytes), what, mib(bytes)));
    log_.note(QStringLiteral("quota"), {{"round", qint64(round)},
                                        {"usedBytes", qint64(diskUsed_)},
                                        {"quotaBytes", qint64(config_.diskQuotaBytes)},
                                        {"wantedBytes", qint64(bytes)}});
  }
  return false;
}

std::string RunFolder::contributionFolder(std::int64_t round, const ContentId& id) {
  fetched_[round].insert(id);
  return QDir(config_.fetchDir).filePath(QString::number(round) + "/" + q(id)).toStdString();
}

std::string RunFolder::snapshotFolder(const ContentId& id) {
  snapshotFetches_.insert(id);
  return QDir(config_.fetchDir).filePath("snapshots/" + q(id)).toStdString();
}

void RunFolder::retireFetchedBefore(std::int64_t mergedRound) {
  for (auto it = fetched_.begin(); it != fetched_.end() && it->first + 2 <= mergedRound;) {
    for (const auto& id : it->second) {
      swarm_.retire(id, true);
      fetchRetries_.erase(id);
    }
    it = fetched_.erase(it);
  }
}

// The temp files: atomic_file.cpp's "*.tmp-<pid>", identity.cpp's "*.tmp-<pid>-<nonce>".
void RunFolder::clean(bool atStart, std::int64_t mergedRound, const ContentId& keepSnapshot) {
  if (config_.fetchDir.isEmpty()) return;  // QDir("") is the working directory
  QDir incoming(config_.fetchDir);
  if (atStart) incoming.removeRecursively();
  for (const auto& name : incoming.entryList(QDir::Dirs | QDir::NoDotAndDotDot)) {
    bool numeric = false;
    const qint64 r = name.toLongLong(&numeric);
    if (numeric && r + 2 <= mergedRound && !fetched_.count(r)) QDir(incoming.filePath(name)).removeRecursively();
  }
  for (auto it = snapshotFetches_.begin(); it != snapshotFetches_.end();) {
    if (*it == keepSnapshot) {
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
