// Node: a sharded round from its close to its merge (issue 38; docs/ARCHITECTURE.md, "Sharded
// reduction"). The round's contributions are folders of shard files (the trainer writes one when
// the round's topology says so); each peer fetched of every sender only the files of the shards it
// reduces. At close the trainer reduces those shards, we publish the merged files and our index
// and name it in our record; an OutputGather fetches the other reducers' indexes and the outputs
// to apply, and the trainer applies one merged file per shard — the same state, bit for bit, as
// the all-to-all merge of the set (tst_sharded_round). A shard whose outputs disagree, or whose
// reducers did not deliver by the outputs' deadline, is recomputed here from its inputs.
#include "core/node/node.h"
#include "core/node/node_util.h"
#include "core/node/output_publisher.h"
#include "core/node/rules/audit_draw.h"
#include "core/node/rules/shard_refusals.h"
#include "core/node/sharded_fetch.h"

#include <QDir>
#include <QPointer>

#include <algorithm>
#include <random>

namespace es::node {

using detail::joinedIds;
using detail::q;

std::vector<std::string> Node::shardsWeReduce(const sync::RoundTopology& topology) const {
  return topology.shardsReducedBy(swarm_.selfId().str(), config_.peer.reduction.replicas);
}

// What a sender's folder of a sharded round must list, and the files of it we fetch: the figures
// file and the shards we reduce (`extra`: and these, to recompute them).
FetchLimits Node::shardedContributionSizes(const RoundTrained& trained, const PeerId& sender,
                                           const std::set<int>& claims, const std::vector<std::string>& extra) const {
  const sync::ContributionHeader header{runIdForFiles(), trained.round, sender.str(), trained.contribution.baseHash,
                                        config_.peer.codec};
  auto wanted = shardsWeReduce(*trained.topology);
  wanted.insert(wanted.end(), extra.begin(), extra.end());
  return shardedContributionLimits(trained.topology->plan, claims, header, {wanted.begin(), wanted.end()});
}

// Protocol step 7: the run's `audits` shards we do not reduce, drawn once a round from this
// process's own entropy (no reducer can know who audits it); their files are fetched with ours.
std::vector<std::string> Node::drawAuditShards(const RoundTrained& trained) {
  auto& drawn = audits_[trained.round];
  if (!drawn.empty() || config_.peer.reduction.audits <= 0) return drawn;
  const auto& plan = trained.topology->plan;
  const auto mine = shardsWeReduce(*trained.topology);
  std::set<std::size_t> reduced;
  for (std::size_t s = 0; s < plan.size(); ++s)
    if (std::find(mine.begin(), mine.end(), plan[s].id) != mine.end()) reduced.insert(s);
  std::random_device entropy;
  const std::uint64_t seed = (std::uint64_t(entropy()) << 32) ^ entropy();
  for (const auto s : drawAudits(plan.size(), reduced, config_.peer.reduction.audits, seed))
    drawn.push_back(plan[s].id);
  return drawn;
}

QString Node::ownOutputDir(qint64 round) const {
  return QDir(config_.contribDir).filePath(QStringLiteral("outputs-%1").arg(round));
}

void Node::closeSharded(const std::vector<IncomingContribution>& list) {
  ShardedClose& c = sharded_.emplace();
  c.round = gather_->round();
  c.topology = gather_->own().topology;
  c.spec.round = c.round;
  c.spec.shardElements = c.topology->shardElements;
  const auto contentOf = gather_->contentOf();
  for (const auto& in : list) {
    c.spec.senders.push_back({in.sender, in.path, in.claims});
    if (const auto id = contentOf.find(in.sender); id != contentOf.end()) c.inputs[in.sender.str()] = id->second;
  }
  c.spec.inputDigest = inputDigest(c.inputs, {});
  const auto takeOver = replaceAbsentReducers(c, list);
  Q_EMIT message(QStringLiteral("Round %1: sharded over %2 shards; reducing %3 of them from %4 contributions")
                     .arg(c.round)
                     .arg(c.topology->plan.size())
                     .arg(c.mine.size())
                     .arg(list.size()));
  Q_EMIT noted(QStringLiteral("sharded"), {{"round", qint64(c.round)},
                                           {"shards", int(c.topology->plan.size())},
                                           {"reducing", int(c.mine.size())},
                                           {"contributions", int(list.size())}});
  c.outputDir = ownOutputDir(c.round).toStdString();
  QDir().mkpath(ownOutputDir(c.round));
  // Half the round's shortest deadline: the peers whose outputs came merge that much sooner, and
  // their next round waits for ours at least the whole of it.
  outputDeadline_.start(static_cast<int>(config_.policy.deadlineMinSeconds * 1000 / 2));
  if (!takeOver.empty()) return takeOverShards(takeOver);
  reduceOn(sharded_->reduced(), QString::fromStdString(sharded_->outputDir));
}

void Node::reduceOn(const std::vector<std::string>& shards, const QString& dir) {
  QMetaObject::invokeMethod(
      worker_,
      [w = worker_, r = sharded_->round, spec = sharded_->spec, shards, dir] { w->reduceShards(r, spec, shards, dir); },
      Qt::QueuedConnection);
}

void Node::onShardsReduced(qint64 round, const std::vector<ReducedShard>& reduced, const QString& error) {
  if (!sharded_ || sharded_->round != round) return;
  if (!error.isEmpty()) return Q_EMIT failed(QStringLiteral("reducing round %1's shards: %2").arg(round).arg(error));
  for (const auto& r : reduced) {
    sharded_->ownPaths[r.shard] = r.path;
    sharded_->refusedHere.insert(r.refused.begin(), r.refused.end());
  }
  if (sharded_->phase == ShardedClose::Phase::Recomputing) {
    sharded_->phase = ShardedClose::Phase::Gathering;
    verifyOwn(sharded_->recomputing);
    return passOutputs();
  }
  sharded_->phase = ShardedClose::Phase::Publishing;
  verifyOwn(sharded_->audits);
  std::vector<std::pair<std::string, std::string>> files;  // ours to publish: the audited are not
  for (const auto& r : reduced)
    if (std::find(sharded_->mine.begin(), sharded_->mine.end(), r.shard) != sharded_->mine.end())
      files.emplace_back(r.shard, r.path);
  const ReducerIndexKey key{runIdForFiles(), round, gather_->own().contribution.baseHash, swarm_.selfId()};
  const QPointer<Node> self(this);
  publishOutputs(swarm_, key, sharded_->spec.inputDigest, files, sharded_->planShards(), sharded_->outputDir,
                 [self, round](Expected<PublishedOutputs> published) {
                   if (self) self->onOutputsPublished(round, std::move(published));
                 });
}

void Node::onOutputsPublished(qint64 round, Expected<PublishedOutputs> published) {
  if (!published)
    return Q_EMIT failed(QStringLiteral("publishing round %1's outputs: %2").arg(round).arg(q(published.error())));
  auto& ours = ownOutputs_[round];
  ours.insert(ours.end(), published->contents.begin(), published->contents.end());
  if (!sharded_ || sharded_->round != round) return;
  own_.outputs[round] = published->indexContent;
  announce();
  Q_EMIT message(QStringLiteral("Round %1: our merged shards published (%2 of them)")
                     .arg(round)
                     .arg(published->index.outputs.size()));
  OutputGather::Spec spec;
  spec.key = published->index.key;
  spec.inputDigest = sharded_->spec.inputDigest;
  for (const auto& s : sharded_->spec.senders)  // a second pass's outputs name the set without the refused
    if (!sharded_->spec.out.count(s.sender)) spec.inputs[s.sender.str()] = s.claims;
  spec.plan = sharded_->topology->plan;
  spec.orders = sharded_->topology->orders;
  spec.replicas = config_.peer.reduction.replicas;
  sharded_->outputs.emplace(swarm_, QDir(config_.fetchDir).filePath(QString::number(round)).toStdString(), spec);
  sharded_->outputs->ownOutputs(published->index, published->pathsByShard);
  for (const auto& [shard, root] : sharded_->ownRoots) sharded_->outputs->ownCopy(root, sharded_->ownPaths.at(shard));
  sharded_->phase = ShardedClose::Phase::Gathering;
  passOutputs();
}

void Node::passOutputs() {
  if (!sharded_ || sharded_->phase != ShardedClose::Phase::Gathering) return;
  auto& outputs = *sharded_->outputs;
  outputs.pass(swarm_.peers());
  for (const auto& [reducer, why] : outputs.refusedReducers())
    if (!peers_.isBanned(PeerId(reducer)))
      banSender(PeerId(reducer), "its outputs of round " + std::to_string(sharded_->round) + ": " + why);
  std::vector<std::string> recompute;  // a shard we reduced ourselves is what we would recompute
  for (const auto& shard : outputs.toRecompute())
    if (!sharded_->ownPaths.count(shard)) recompute.push_back(shard);
  if (!recompute.empty()) return recomputeShards(recompute);
  applySharded();  // once every shard's file is here
}

// Past the outputs' first deadline (half the round's shortest), the reducers still awaited that
// named no index are given up (and every replacement after them: a replacement reduces nothing
// unless it was asked, which is not built yet), so each shard they left is recomputed here; those
// whose named index is on its way get a second half, after which everything still missing —
// indexes and chosen outputs — is given up and recomputed (nothing after close waits longer).
void Node::onOutputDeadline() {
  const double half = config_.policy.deadlineMinSeconds / 2;
  if (sharded_ && sharded_->phase == ShardedClose::Phase::Refetching)
    return giveUpRecomputing(QStringLiteral("their inputs did not come again in %1 s").arg(half));
  if (!sharded_ || sharded_->phase != ShardedClose::Phase::Gathering) return;
  const bool last = ++sharded_->outputDeadlines >= 2;
  const auto waiting = sharded_->outputs->waitingOn();
  const auto gaveUp = sharded_->outputs->giveUpOnUndelivered(last);
  const int abandoned = last ? sharded_->outputs->abandonUnarrived() : 0;
  std::vector<std::string> silent;
  for (const auto& reducer : waiting)
    if (gaveUp.count(reducer)) silent.push_back(reducer);
  if (!silent.empty() || abandoned > 0) {
    QStringList what;
    if (!silent.empty())
      what << QStringLiteral("reducers %1 delivered no outputs (%2 given up with their replacements)")
                  .arg(joinedIds(silent))
                  .arg(gaveUp.size());
    if (abandoned > 0) what << QStringLiteral("%1 chosen outputs did not arrive").arg(abandoned);
    Q_EMIT message(QStringLiteral("Round %1, %2 s after its close: %3; recomputing their shards")
                       .arg(sharded_->round)
                       .arg(last ? 2 * half : half)
                       .arg(what.join(QStringLiteral(", "))));
    Q_EMIT noted(QStringLiteral("reducersGivenUp"), {{"round", qint64(sharded_->round)},
                                                     {"reducers", int(silent.size())},
                                                     {"withReplacements", int(gaveUp.size())},
                                                     {"outputsAbandoned", abandoned},
                                                     {"last", last}});
  }
  if (!last) outputDeadline_.start(static_cast<int>(half * 1000));  // the named indexes' second half
  passOutputs();
}

// What we computed ourselves of shards we do not reduce (audited, recomputed) is hashed as the
// swarm names content — and seeded: it is the shard's output — so the reducers whose signed
// output differs can be told (banLiars).
void Node::verifyOwn(const std::vector<std::string>& shards) {
  const QPointer<Node> self(this);
  for (const auto& shard : shards) {
    ++sharded_->verifying;
    swarm_.publish(sharded_->ownPaths.at(shard),
                   [self, round = sharded_->round, pass = sharded_->pass, shard](Expected<ContentId> id) {
                     if (!self || !self->sharded_ || self->sharded_->round != round || self->sharded_->pass != pass)
                       return;
                     auto& c = *self->sharded_;
                     --c.verifying;
                     if (id) {
                       c.ownRoots[shard] = *id;
                       self->ownOutputs_[round].push_back(*id);  // retired with our outputs
                       if (c.outputs) c.outputs->ownCopy(*id, c.ownPaths.at(shard));
                     }
                     self->passOutputs();
                   });
  }
}

// Protocol steps 4 and 7: a reducer whose signed output of a shard we computed ourselves is not
// ours lied (or reduced another set than it signed); its index, named by its record, is the
// proof anyone can check by the same computation.
void Node::banLiars() {
  for (const auto& [shard, root] : sharded_->ownRoots)
    for (const auto& liar : sharded_->outputs->liarsAgainst(shard, root.str())) {
      if (liar == swarm_.selfId().str() || peers_.isBanned(PeerId(liar))) continue;
      banSender(PeerId(liar), "its merged shard " + shard + " of round " + std::to_string(sharded_->round) +
                                  " is not what the shard's inputs give (recomputed here)");
      Q_EMIT noted(QStringLiteral("outputLiar"),
                   {{"round", qint64(sharded_->round)}, {"peer", q(liar)}, {"shard", q(shard)}});
    }
}

// One merged file per shard, plan order: ours where we reduced or recomputed it, else the output
// the rule chose — once all are here.
void Node::applySharded() {
  if (sharded_->verifying > 0) return;        // passOutputs comes again when they are hashed
  for (const auto& shard : sharded_->audits)  // an audit checks the reducers: their word first
    if (!sharded_->outputs->decided(shard)) return;
  std::vector<std::string> paths;
  for (std::size_t s = 0; s < sharded_->topology->plan.size(); ++s) {
    const auto& id = sharded_->topology->plan[s].id;
    const auto own = sharded_->ownPaths.find(id);
    const std::string path = own != sharded_->ownPaths.end() ? own->second : sharded_->outputs->appliedPath(s);
    if (path.empty()) return;  // still on its way
    paths.push_back(path);
  }
  outputDeadline_.stop();
  banLiars();
  sharded_->phase = ShardedClose::Phase::Applying;
  QMetaObject::invokeMethod(
      worker_,
      [w = worker_, r = sharded_->round, spec = sharded_->spec, paths, claims = nextClaims_] {
        w->applyShards(r, spec, paths, claims);
      },
      Qt::QueuedConnection);
}

// The outputs the rule chose cannot be applied (one moves a weight past the ceiling: reducers that
// agreed on a wrong shard): every shard we did not reduce is recomputed from its inputs, once.
void Node::onShardsRefused(qint64 round, const QString& error) {
  Q_EMIT message(QStringLiteral("Round %1: the merged shards cannot be applied: %2").arg(round).arg(error));
  Q_EMIT noted(QStringLiteral("shardsRefused"), {{"round", round}, {"error", error}});
  if (!sharded_ || sharded_->round != round || sharded_->recomputedAll) return;
  sharded_->recomputedAll = true;
  std::vector<std::string> rest;
  const auto mine = std::set<std::string>(sharded_->mine.begin(), sharded_->mine.end());
  for (const auto& shard : sharded_->topology->plan)
    if (!mine.count(shard.id)) rest.push_back(shard.id);
  recomputeShards(rest);
}

// Merged files that refuse senders of the set (ours, or outputs the rule chose): the refusals
// are gathered over every shard (shard_refusals.h) and the round is reduced again without them —
// a second pass, at most: a shard's own findings do not depend on who else is in.
void Node::onShardsNameRefused(qint64 round, const ShardRefusals& refusals) {
  if (!sharded_ || sharded_->round != round) return;
  std::set<std::string> out;
  for (const auto& id : sharded_->spec.out) out.insert(id.str());
  std::map<std::string, AppliedShard> applied;
  for (const auto& [shard, refused] : refusals) applied[shard] = {sharded_->spec.inputDigest, refused};
  const auto verdict = gatherRefusals(sharded_->inputs, out, sharded_->planShards(), applied);
  if (verdict.pass != RoundPass::Again || sharded_->pass >= 2)
    return onShardsRefused(round, QStringLiteral("merged shards refuse senders, and no pass without them is left"));
  QStringList names;
  for (const auto& id : verdict.refused) names << q(id).left(16);
  Q_EMIT message(QStringLiteral("Round %1: reducers refused %2; reducing every shard again without them")
                     .arg(round)
                     .arg(names.join(", ")));
  Q_EMIT noted(QStringLiteral("secondPass"), {{"round", round}, {"refused", int(verdict.refused.size())}});
  sharded_->pass = 2;
  sharded_->spec.out.clear();
  for (const auto& id : verdict.refused) sharded_->spec.out.insert(PeerId(id));
  sharded_->spec.inputDigest = verdict.digest;
  for (const auto& id : sharded_->outputs->contents()) fetchedOutputs_[round].push_back(id);  // retireOldContent
  sharded_->outputs.reset();
  sharded_->ownPaths.clear();
  sharded_->recomputing.clear();
  sharded_->recomputedAll = false;
  sharded_->phase = ShardedClose::Phase::Reducing;
  sharded_->ownRoots.clear();
  sharded_->verifying = 0;
  sharded_->outputDeadlines = 0;
  sharded_->outputDir = QDir(ownOutputDir(round)).filePath("pass-2").toStdString();
  QDir().mkpath(QString::fromStdString(sharded_->outputDir));
  outputDeadline_.start(static_cast<int>(config_.policy.deadlineMinSeconds * 1000 / 2));
  reduceOn(sharded_->reduced(), QString::fromStdString(sharded_->outputDir));
}

// The round merged: what we fetched of its outputs is retired with our own (retireOldContent).
void Node::finishSharded() {
  if (!sharded_) return;
  outputDeadline_.stop();
  audits_.erase(audits_.begin(), audits_.upper_bound(sharded_->round));
  if (sharded_->outputs)
    for (const auto& id : sharded_->outputs->contents()) fetchedOutputs_[sharded_->round].push_back(id);
  sharded_.reset();
}

}  // namespace es::node
