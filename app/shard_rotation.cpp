#include "app/shard_rotation.h"

#include "core/train/corpus_prep.h"
#include "core/train/prepared_run.h"
#include "core/train/shard_assignment.h"

#include <QThread>
#include <QVariantList>

#include <algorithm>
#include <iterator>
#include <memory>

namespace es::app {
namespace {

QVariantList listOf(const std::vector<int>& shards) {
  QVariantList out;
  for (const int i : shards) out << i;
  return out;
}

std::vector<int> minus(const std::vector<int>& a, const std::vector<int>& b) {
  std::vector<int> out;
  std::set_difference(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(out));
  return out;
}

}  // namespace

ShardRotation::ShardRotation(ShardRotationSetup setup, std::vector<int> held, p2p::SwarmSession& session,
                             node::Node& node)
    : s_(std::move(setup)), session_(session), node_(node), held_(std::move(held)) {
  std::sort(held_.begin(), held_.end());
  poll_.setInterval(500);
  connect(&poll_, &QTimer::timeout, this, &ShardRotation::checkFetched);
}

std::set<std::string> ShardRotation::filesOf(const std::vector<int>& shards, bool withSmallFiles) const {
  std::set<std::string> files;
  if (withSmallFiles) files = {"run.json", "tokenizer.json", "data/val.bin"};
  for (const int i : shards) files.insert("data/" + train::trainShardName(i));
  return files;
}

void ShardRotation::onStep(std::int64_t step) {
  if (poll_.isActive() || reading_ || step * s_.tokensPerStep < nextLookTokens_)
    return;  // a move under way finishes first
  // The first move goes to where the run's step says; later ones one window at a time, so that a
  // peer whose moves lag behind its steps still walks through every window (every shard).
  auto epoch = train::epochAtTokens(s_.peerId, s_.runId, s_.shardTokens, s_.budgetBytes, step * s_.tokensPerStep);
  if (epoch_ >= 0 && epoch > epoch_) epoch = epoch_ + 1;
  nextLookTokens_ = train::tokensAtEpochEnd(s_.peerId, s_.runId, s_.shardTokens, s_.budgetBytes, epoch);
  if (epoch == epoch_) return;
  target_ = train::assignShards(s_.peerId, s_.runId, epoch, s_.shardTokens, s_.budgetBytes);
  targetEpoch_ = epoch;
  if (target_ == held_) {
    epoch_ = epoch;
    return;
  }
  // Held and wanted both, until the new ones are here: training goes on meanwhile.
  std::vector<int> both;
  std::set_union(held_.begin(), held_.end(), target_.begin(), target_.end(), std::back_inserter(both));
  if (auto s = session_.setRunFiles(filesOf(both, true)); !s) {
    Q_EMIT message(QStringLiteral("Shards: %1").arg(QString::fromStdString(s.error())));
    return;
  }
  Q_EMIT message(QStringLiteral("Epoch %1 of this peer's shards: fetching %2 of them")
                     .arg(epoch)
                     .arg(minus(target_, held_).size()));
  poll_.start();
  checkFetched();
}

void ShardRotation::checkFetched() {
  if (reading_ || !session_.runFilesComplete(filesOf(target_, false))) return;
  poll_.stop();
  reading_ = true;
  // The read takes copies, never `this`: a rotation destroyed meanwhile only loses the result
  // (the connection to it goes with it).
  auto result = std::make_shared<Expected<train::TokenBuffer>>(makeError("not read"));
  QThread* reader = QThread::create([result, folder = s_.folder.toStdString(), target = target_, vocab = s_.vocabSize] {
    *result = train::readTrainShards(folder, target, vocab);
  });
  connect(reader, &QThread::finished, this, [this, result] {
    reading_ = false;
    onShardsRead(*result);
  });
  connect(reader, &QThread::finished, reader, &QObject::deleteLater);
  reader->start();
}

void ShardRotation::onShardsRead(const Expected<train::TokenBuffer>& tokens) {
  if (!tokens) {
    Q_EMIT message(QStringLiteral("Shards of epoch %1 unreadable: %2; keeping the old ones")
                       .arg(targetEpoch_)
                       .arg(QString::fromStdString(tokens.error())));
    epoch_ = targetEpoch_;  // not tried again this epoch
    return;
  }
  node_.setTrainTokens(*tokens);
  const auto fetched = minus(target_, held_), dropped = minus(held_, target_);
  auto kept = session_.setRunFiles(filesOf(target_, true));
  if (kept) kept = session_.dropRunFiles(filesOf(dropped, false));
  if (!kept) Q_EMIT message(QStringLiteral("Shards: %1").arg(QString::fromStdString(kept.error())));
  held_ = target_;
  epoch_ = targetEpoch_;
  const auto onDisk = train::presentShardsIn(s_.folder.toStdString(), int(s_.shardTokens.size()));
  Q_EMIT noted(QStringLiteral("shards"), {{"epoch", qint64(epoch_)},
                                          {"held", listOf(held_)},
                                          {"fetched", listOf(fetched)},
                                          {"dropped", listOf(dropped)},
                                          {"on_disk", listOf(onDisk)}});
  Q_EMIT message(QStringLiteral("Epoch %1 of this peer's shards: training on %2 shards (%3 fetched, %4 deleted)")
                     .arg(epoch_)
                     .arg(held_.size())
                     .arg(fetched.size())
                     .arg(dropped.size()));
}

}  // namespace es::app
