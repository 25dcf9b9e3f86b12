// Issue 38's adversaries, at the level of the round's functions and rules (no processes yet: the
// node does not run sharded rounds): six reducers, R = 3 per shard in an order fixed for the round;
// r1 publishes a wrong merged shard wherever it reduces, r2 withholds, r3 and r4 collude (the same
// wrong shard everywhere). A peer applies each shard by shard_outputs.h's rule — waits, gives up on the
// silent one and takes the next in the order, recomputes from the inputs when outputs differ and
// names the reducers whose signed output is not the recomputation — and its state is mergeRound's
// bit for bit, the liars named, the withholder not. Then what the rule cannot see: colluders that
// lie only where they are every waited-for reducer (R = 2, the shards whose order starts r3, r4)
// and are honest elsewhere — their wrong shards are applied and the state is wrong; the audit of
// those shards (recompute, compare) names both and restores the state. A wrong shard that moves a
// weight past the run's ceiling is refused on arrival, whoever published it. A "root" here is a hash of the
// merged-shard file's bytes: the info-hash's stand-in (core/ has no SHA-256).
#ifndef Q_MOC_RUN  // moc need not parse LibTorch
#include "core/node/rules/shard_outputs.h"
#include "core/node/rules/shard_refusals.h"
#include "core/sync/merged_shard_file.h"
#include "core/sync/shard_figures_file.h"
#include "core/sync/sharded_merge.h"

#include "support/sharded_round_inputs.h"
#endif

#include <QTemporaryDir>
#include <QtTest>

#include <fstream>
#include <functional>
#include <iterator>
#include <optional>

using namespace es;
using namespace es::sync;
using es::test::kRun;

namespace {

const std::vector<std::string> kReducers = {"r0", "r1", "r2", "r3", "r4", "r5"};

// One round as every reducer and peer sees it: the senders' figures, the scale, the set's digest.
struct Round {
  test::ShardedRoundInputs in;
  std::vector<ShardedSender> known;
  ShardedScale scale;
  std::string digest;
  std::string outputs;  // where merged-shard files are written
};

std::string fileRoot(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  return std::to_string(std::hash<std::string>{}(std::string(std::istreambuf_iterator<char>(file), {})));
}

// The honest merged shard of `shard`, as any reducer (or a peer recomputing) makes it.
MergedShard honest(const Round& r, const Shard& shard) {
  const ShardRowsReader read = [&](const ShardedSender& s, const Shard& sh) -> Expected<NamedTensors> {
    const auto& sender =
        *std::find_if(r.in.senders.begin(), r.in.senders.end(), [&](const auto& x) { return x.id == s.header.sender; });
    auto file = loadContributionShard(sender.folder + "/" + shardFileName(sh), s.header, sh);
    if (!file) return file.failure();
    return piecesAsRows(sh, file->pieces);
  };
  BaseMaxAbs maxAbs;
  const MergedShardKey key{kRun, r.in.context.round, r.in.context.baseHash, shard.id, r.digest};
  auto merged = reduceRoundShard(shard, r.in.base, r.known, r.scale, r.in.ledger, r.in.policy, key, read, maxAbs);
  if (!merged) throw std::runtime_error(merged.error());
  return *merged;
}

// The round's senders that carry `shard` (what a merged shard's file must name).
std::set<std::string> carriers(const Round& r, const Shard& shard) {
  std::set<std::string> ids;
  for (const auto& s : r.known)
    if (shard.expert < 0 || s.claims.count(shard.expert)) ids.insert(s.header.sender);
  return ids;
}

// The round's order of reducers for the k-th shard: a rotation of the six.
std::vector<std::string> orderOf(std::size_t k) {
  std::vector<std::string> order;
  for (std::size_t j = 0; j < kReducers.size(); ++j) order.push_back(kReducers[(k + j) % kReducers.size()]);
  return order;
}

// Writes `merged` as `who`'s file of its shard; its root.
std::string publish(const Round& r, const std::string& who, const Shard& shard, const MergedShard& merged) {
  const std::string path = r.outputs + "/" + who + "-" + shard.id;
  if (!saveMergedShard(path, shard, merged)) throw std::runtime_error("cannot write " + path);
  return fileRoot(path);
}

MergedShard wrong(MergedShard m, float by) {
  m.rows[0].second = m.rows[0].second + by;
  return m;
}

// What each reducer publishes for a shard (nothing: withheld).
using Behaviour = std::function<std::optional<node::ShardOutput>(const std::string& who, const Shard& shard)>;

struct Applied {
  std::vector<MergedShard> merged;  // plan order
  std::set<std::string> named;      // the reducers named liars
  int recomputed = 0;
};

// A peer's apply of every shard: decideShard over the active reducers' outputs, giving up on the
// silent ones (their deadline passed), recomputing on disagreement.
Applied applyAll(const Round& r, int replicas, const Behaviour& behave) {
  Applied out;
  for (std::size_t k = 0; k < r.in.shards.size(); ++k) {
    const Shard& shard = r.in.shards[k];
    const auto order = orderOf(k);
    std::set<std::string> gaveUp;
    std::map<std::string, MergedShard> byRoot;
    for (;;) {
      std::vector<node::ShardOutput> heard;
      for (const auto& who : node::activeReducers(order, replicas, gaveUp))
        if (auto o = behave(who, shard)) heard.push_back(*o);
      const auto d = node::decideShard(order, replicas, gaveUp, heard, r.digest);
      if (d.verdict == node::ShardVerdict::Wait) {
        gaveUp.insert(d.waitingOn.begin(), d.waitingOn.end());
        continue;
      }
      if (d.verdict == node::ShardVerdict::Apply) {
        auto path = r.outputs + "/" + heard.front().reducer + "-" + shard.id;  // every waited-for one agrees
        auto read =
            loadMergedShard(path, {kRun, 5, r.in.context.baseHash, shard.id, r.digest}, shard, carriers(r, shard));
        if (!read) throw std::runtime_error(read.error());
        out.merged.push_back(*read);
        break;
      }
      const MergedShard mine = honest(r, shard);
      const std::string root = publish(r, "self", shard, mine);
      for (const auto& liar : node::outputLiars(order, heard, r.digest, root)) out.named.insert(liar);
      out.merged.push_back(mine);
      ++out.recomputed;
      break;
    }
  }
  return out;
}

}  // namespace

class ShardedAdversariesTest : public QObject {
  Q_OBJECT

  QTemporaryDir dir_;
  Round r_;
  RoundMerge truth_;

  Expected<RoundMerge> applied(const std::vector<MergedShard>& merged) const {
    return applyMergedShards(r_.in.base, r_.in.context, r_.in.shards, merged, r_.scale, r_.in.policy, 30, r_.in.config,
                             r_.in.momentum, r_.in.ledger);
  }

 private Q_SLOTS:
  void initTestCase() {
    r_.in = test::makeShardedRound(dir_.filePath("senders").toStdString(), false);
    std::map<std::string, ContentId> inputs;
    for (const auto& s : r_.in.senders) {
      const ContributionHeader header{kRun, 5, s.id, r_.in.context.baseHash, "int8"};
      auto figures = loadShardFigures(s.folder + "/" + kFiguresFileName, header, r_.in.shards, s.claims);
      QVERIFY(figures.ok());
      r_.known.push_back({header, s.claims, *figures});
      inputs.emplace(s.id, ContentId(std::string(63, '0') + std::to_string(inputs.size())));
    }
    r_.scale = shardedScale(r_.known, {}, r_.in.ledger, r_.in.policy.validation);
    r_.digest = node::inputDigest(inputs, {});
    r_.outputs = dir_.filePath("outputs").toStdString();
    QVERIFY(QDir().mkpath(QString::fromStdString(r_.outputs)));
    auto all = mergeRound(r_.in.base, r_.in.context, r_.in.entries, r_.in.policy, 30, r_.in.config, r_.in.momentum,
                          r_.in.ledger);
    QVERIFY2(all.ok(), all.ok() ? "" : all.error().c_str());
    truth_ = *all;
  }

  void aLiarAWithholderAndTwoColludersDoNotMoveTheState() {
    const Behaviour behave = [&](const std::string& who, const Shard& shard) -> std::optional<node::ShardOutput> {
      if (who == "r2") return std::nullopt;  // withholds
      MergedShard m = honest(r_, shard);
      if (who == "r1") m = wrong(std::move(m), 1e-3f);
      if (who == "r3" || who == "r4") m = wrong(std::move(m), 2e-3f);  // the same wrong shard
      return node::ShardOutput{who, r_.digest, publish(r_, who, shard, m)};
    };
    const Applied got = applyAll(r_, 3, behave);
    QCOMPARE(got.named, (std::set<std::string>{"r1", "r3", "r4"}));  // r2 given up on, not named
    QCOMPARE(got.recomputed, int(r_.in.shards.size()));  // every waited-for three holds a liar: never applied
    const auto state = applied(got.merged);
    QVERIFY2(state.ok(), state.ok() ? "" : state.error().c_str());
    QCOMPARE(state->fingerprint, truth_.fingerprint);
  }

  void colludersHoldingEveryWaitedForSlotNeedTheAudit() {
    // R = 2. r3 and r4 lie only where they are the two waited for (the shards whose order starts at
    // r3) and are honest everywhere else: the rule never sees two outputs differ.
    const auto captured = [&](const Shard& shard) {
      const auto k = std::size_t(&shard - r_.in.shards.data());
      return orderOf(k)[0] == "r3";
    };
    const Behaviour behave = [&](const std::string& who, const Shard& shard) -> std::optional<node::ShardOutput> {
      MergedShard m = honest(r_, shard);
      if ((who == "r3" || who == "r4") && captured(shard)) m = wrong(std::move(m), 2e-3f);
      return node::ShardOutput{who, r_.digest, publish(r_, who, shard, m)};
    };
    Applied got = applyAll(r_, 2, behave);
    QVERIFY(got.named.empty());
    QCOMPARE(got.recomputed, 0);
    auto state = applied(got.merged);
    QVERIFY(state.ok());
    QVERIFY2(state->fingerprint != truth_.fingerprint,
             "the colluders' shards were not applied: the test lost its point");
    // The audits of those shards (each peer audits one a round, drawn from its own randomness):
    // recomputed, compared with what was applied, both colluders named, the state restored.
    int audited = 0;
    for (std::size_t k = 0; k < r_.in.shards.size(); ++k) {
      const Shard& shard = r_.in.shards[k];
      if (!captured(shard)) continue;
      const MergedShard mine = honest(r_, shard);
      const std::string root = publish(r_, "self", shard, mine);
      const std::vector<node::ShardOutput> heard = {*behave("r3", shard), *behave("r4", shard)};
      QCOMPARE(node::outputLiars(orderOf(k), heard, r_.digest, root), (std::vector<std::string>{"r3", "r4"}));
      got.merged[k] = mine;
      ++audited;
    }
    QVERIFY(audited > 0);
    state = applied(got.merged);
    QVERIFY(state.ok());
    QCOMPARE(state->fingerprint, truth_.fingerprint);
  }

  void aWrongShardPastTheCeilingIsRefusedOnArrival() {
    // However many reducers publish it: no honest merge moves a weight past the run's ceiling.
    std::vector<MergedShard> merged;
    for (const auto& shard : r_.in.shards) merged.push_back(honest(r_, shard));
    QVERIFY(applied(merged).ok());
    merged[1] = wrong(merged[1], 0.31f);  // the fixture's ceiling: 0.3 a weight (and a 1/128 slack)
    const auto refused = applied(merged);
    QVERIFY(!refused.ok());
    QVERIFY2(refused.error().find("past the ceiling") != std::string::npos, refused.error().c_str());
    QVERIFY2(refused.error().find(r_.in.shards[1].id) != std::string::npos, refused.error().c_str());
  }
};

QTEST_GUILESS_MAIN(ShardedAdversariesTest)
#include "tst_sharded_adversaries.moc"
