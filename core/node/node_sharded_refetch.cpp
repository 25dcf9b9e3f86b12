// Node: a sharded round's shards whose files we did not fetch with the round (issue 38;
// docs/ARCHITECTURE.md, "Sharded reduction"): those we reduce in place of a reducer that sent
// nothing to the round (protocol step 2), and those we recompute because their reducers lied or
// did not deliver (step 4). Either way every sender's folder of the set is fetched again with
// those shards' files (v2: the files already here are checked, not fetched again), then our
// trainer reduces them.
#include "core/node/node.h"
#include "core/node/node_util.h"

#include <QDir>

#include <algorithm>

namespace es::node {

using detail::joinedIds;
using detail::q;

// Protocol step 2 at the close: each shard's reducers are the first R of its order among the
// senders of the set we closed on (RoundTopology::withReducersAmong) — a reducer killed or gone
// before it sent the round was waited for at the outputs' deadline, and its shards recomputed by
// every peer, in each of the two rounds the ledger kept it a candidate. Sets `c.mine` and
// `c.audits`; returns the shards we now reduce whose files we did not fetch with the round.
std::vector<std::string> Node::replaceAbsentReducers(ShardedClose& c, const std::vector<IncomingContribution>& list) {
  std::set<std::string> senders;
  for (const auto& in : list) senders.insert(in.sender.str());
  const auto fetched = shardsWeReduce(*c.topology);
  const auto& drawn = audits_[c.round];
  c.topology = std::make_shared<const sync::RoundTopology>(c.topology->withReducersAmong(senders));
  c.mine = shardsWeReduce(*c.topology);
  const auto in = [](const std::vector<std::string>& v, const std::string& x) {
    return std::find(v.begin(), v.end(), x) != v.end();
  };
  c.audits.clear();
  for (const auto& shard : drawn)
    if (!in(c.mine, shard)) c.audits.push_back(shard);
  std::vector<std::string> takeOver;
  for (const auto& shard : c.mine)
    if (!in(fetched, shard) && !in(drawn, shard)) takeOver.push_back(shard);
  return takeOver;
}

void Node::takeOverShards(const std::vector<std::string>& shards) {
  Q_EMIT message(QStringLiteral("Round %1: reducing shards %2 in place of reducers that sent nothing to the round; "
                                "fetching their files")
                     .arg(sharded_->round)
                     .arg(joinedIds(shards)));
  Q_EMIT noted(QStringLiteral("takeOver"), {{"round", qint64(sharded_->round)}, {"shards", int(shards.size())}});
  sharded_->takingOver = true;
  fetchShardsAgain(shards);
}

// Protocol step 4: the shards are recomputed from their inputs.
void Node::recomputeShards(const std::vector<std::string>& shards) {
  Q_EMIT message(
      QStringLiteral("Round %1: recomputing shards %2 from their inputs").arg(sharded_->round).arg(joinedIds(shards)));
  Q_EMIT noted(QStringLiteral("recompute"), {{"round", qint64(sharded_->round)}, {"shards", int(shards.size())}});
  fetchShardsAgain(shards);
}

void Node::fetchShardsAgain(const std::vector<std::string>& shards) {
  sharded_->phase = ShardedClose::Phase::Refetching;
  sharded_->recomputing = shards;
  outputDeadline_.start(static_cast<int>(config_.policy.deadlineMinSeconds * 1000 / 2));
  for (const auto& s : sharded_->spec.senders) {
    if (s.sender == swarm_.selfId()) continue;
    const ContentId id = sharded_->inputs.at(s.sender.str());
    swarm_.retire(id, false);
    if (!refetchInput(s)) return;
    sharded_->refetching.insert(id);
  }
  refetchedAll();
}

// One sender's folder asked for again with the shards being recomputed (and the audited); false
// (and said) when the swarm would not start it.
bool Node::refetchInput(const ShardedSenderFiles& sender) {
  const ContentId id = sharded_->inputs.at(sender.sender.str());
  auto extra = sharded_->recomputing;
  extra.insert(extra.end(), sharded_->audits.begin(), sharded_->audits.end());
  const auto limits = shardedContributionSizes(gather_->own(), sender.sender, sender.claims, extra);
  if (auto started = swarm_.fetch(id, folder_.contributionFolder(sharded_->round, id), limits); !started) {
    Q_EMIT message(QStringLiteral("Round %1: cannot fetch %2 again: %3")
                       .arg(sharded_->round)
                       .arg(q(id).left(16), q(started.error())));
    return false;
  }
  return true;
}

void Node::refetchedAll() {
  if (sharded_->phase != ShardedClose::Phase::Refetching || !sharded_->refetching.empty()) return;
  if (sharded_->takingOver) {  // the files are here: reduced and published as ours
    sharded_->takingOver = false;
    sharded_->recomputing.clear();
    sharded_->phase = ShardedClose::Phase::Reducing;
    return reduceOn(sharded_->reduced(), QString::fromStdString(sharded_->outputDir));
  }
  sharded_->phase = ShardedClose::Phase::Recomputing;
  reduceOn(sharded_->recomputing, QDir(QString::fromStdString(sharded_->outputDir)).filePath("recomputed"));
}

// A shard can be neither applied nor recomputed (its sender left with the only copy of its inputs:
// a reducer and sender gone mid-round): the round is the swarm's to give us, as a snapshot — the
// agreement chooses it (never keeping ours), and tookSnapshot ends this close
// (tst_node_sharded aShardThatCannotBeRecomputedEndsInTheSwarmsSnapshot).
void Node::giveUpRecomputing(const QString& why) {
  Q_EMIT message(QStringLiteral("Round %1: cannot recompute shards %2: %3; waiting for the swarm's snapshot")
                     .arg(sharded_->round)
                     .arg(joinedIds(sharded_->recomputing), why));
  Q_EMIT noted(QStringLiteral("recomputeGivenUp"), {{"round", qint64(sharded_->round)}});
  outputDeadline_.stop();
  agreement_.wantResync(true);
  agreement_.tryResync();
}

// A sharded round's transfer events: true when the content was one of its.
bool Node::shardedFetched(const ContentId& id, const std::string& path) {
  if (!sharded_) return false;
  if (sharded_->refetching.erase(id)) {
    for (auto& s : sharded_->spec.senders)
      if (sharded_->inputs.at(s.sender.str()) == id) s.folder = path;
    refetchedAll();
    return true;
  }
  if (!sharded_->outputs || !sharded_->outputs->fetched(id, path)) return false;
  passOutputs();
  return true;
}

bool Node::shardedFetchFailed(const ContentId& id, const std::string& reason, bool refused) {
  if (!sharded_) return false;
  if (sharded_->refetching.count(id)) {
    // A failed transfer (not refused) is asked once more, its files kept (v2 checks them); then,
    // or when refused, the sender no longer serves it: nothing else has those bytes.
    const auto sender = std::find_if(sharded_->spec.senders.begin(), sharded_->spec.senders.end(), [&](const auto& s) {
      const auto input = sharded_->inputs.find(s.sender.str());
      return input != sharded_->inputs.end() && input->second == id;
    });
    if (!refused && folder_.failedAgain(id) < OutputGather::kFetchTries && sender != sharded_->spec.senders.end()) {
      swarm_.retire(id, false);
      if (refetchInput(*sender)) return true;
    }
    giveUpRecomputing(QStringLiteral("fetching %1 again failed (%2)").arg(q(id).left(16), q(reason)));
    return true;
  }
  if (!sharded_->outputs || !sharded_->outputs->failed(id, reason, refused)) return false;
  passOutputs();
  return true;
}

}  // namespace es::node
