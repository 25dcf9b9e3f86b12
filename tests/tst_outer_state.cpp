// The outer Nesterov rule's momentum as part of a peer's state (issue 18; core/sync/outer_step.h,
// SpesPeer): tiny peers from one seed with swarm.outer_step {lr 0.7, momentum 0.9, shared}. After
// every merge the peers that merged the same set hold the same fingerprint, which covers the
// momentum (a plain-rule peer merging the same files lands elsewhere); a resumed peer, a newcomer
// from a snapshot and a peer that merges a round again with the majority's set all hold that
// momentum and merge on bit-identically; a snapshot without the momentum is refused.
#include "core/spes/spes_peer.h"
#include "core/train/corpus_prep.h"
#include "support/tiny_node.h"

#include <QTemporaryDir>
#include <QtTest>

#include <memory>

using es::node::IncomingContribution;
using es::node::SpesPeer;

class OuterStateTest : public QObject {
  Q_OBJECT
  QTemporaryDir dir_;
  std::unique_ptr<es::train::RunData> data_;

  std::unique_ptr<SpesPeer> makePeer(const QString& name, std::vector<int> experts, bool outer = true) {
    auto config = es::test::tinyNodeConfig(*data_, dir_.path(), name).peer;
    config.syncEvery = 2;
    config.trainer.localExperts = std::move(experts);
    if (outer) {
      config.outer = {0.7, 0.9, es::sync::OuterRule::On::Shared};
    }
    auto peer = SpesPeer::create(config, data_->train, data_->val);
    if (!peer) qFatal("SpesPeer::create: %s", peer.error().c_str());
    return std::move(*peer);
  }

  IncomingContribution trainRound(SpesPeer& peer, const QString& name, std::int64_t round) {
    return es::test::trainRound(peer, dir_.path(), name, round);
  }

  static bool mergedAll(es::Expected<es::node::MergeResult>& merge, int expected) {
    return merge.ok() && merge->accepted == expected;
  }

 private Q_SLOTS:
  void initTestCase() {
    auto data = es::test::bundledRunData(dir_.filePath("run"));
    QVERIFY2(data.ok(), data ? "" : data.error().c_str());
    data_ = std::make_unique<es::train::RunData>(std::move(*data));
  }

  void theMomentumTravelsWithTheState() {
    auto a = makePeer("peer-a", {0, 1});
    auto b = makePeer("peer-b", {2, 3});
    auto plain = makePeer("peer-p", {2, 3}, false);
    IncomingContribution fromPlain;
    for (std::int64_t round = 1; round <= 2; ++round) {
      const auto fromA = trainRound(*a, "peer-a", round), fromB = trainRound(*b, "peer-b", round);
      fromPlain = trainRound(*plain, "peer-p", round);
      auto mergedA = a->merge(round, {fromA, fromB});
      auto mergedB = b->merge(round, {fromA, fromB});
      QVERIFY2(mergedAll(mergedA, 2) && mergedAll(mergedB, 2), "a round was not merged whole");
      QCOMPARE(mergedA->fingerprint, mergedB->fingerprint);
      QCOMPARE(a->baseFingerprint(), mergedA->fingerprint);
      if (round == 1) {  // the same files under the plain rule: another state
        auto mergedPlain = plain->merge(1, {fromA, fromB});
        QVERIFY(mergedAll(mergedPlain, 2));
        QVERIFY(mergedPlain->fingerprint != mergedA->fingerprint);
      }
    }

    // A newcomer takes A's snapshot: the same fingerprint (weights and momentum).
    const auto snapshot = a->writeSnapshot(dir_.filePath("snapshots").toStdString());
    QVERIFY2(snapshot.ok(), snapshot ? "" : snapshot.error().c_str());
    auto n = makePeer("peer-n", {0, 2});
    QVERIFY(n->baseFingerprint() != a->baseFingerprint());
    auto adopted = n->adoptSnapshot(*snapshot, 2);
    QVERIFY2(adopted.ok(), adopted ? "" : adopted.error().c_str());
    QCOMPARE(n->baseFingerprint(), a->baseFingerprint());
    // A plain-rule peer's snapshot has no momentum: refused by a peer of this rule.
    auto plainMerge = plain->merge(2, {fromPlain});
    QVERIFY(mergedAll(plainMerge, 1));
    const auto plainSnapshot = plain->writeSnapshot(dir_.filePath("plain-snapshots").toStdString());
    QVERIFY(plainSnapshot.ok());
    auto refused = makePeer("peer-r", {0, 1})->adoptSnapshot(*plainSnapshot, 2);
    QVERIFY(!refused.ok());
    QVERIFY2(QString::fromStdString(refused.error()).contains("momentum"), refused.error().c_str());

    // A resumes from its state folder (B's object goes away, a new one loads it).
    const auto beforeResume = b->baseFingerprint();
    b.reset();  // joins the background write of round 2
    b = makePeer("peer-b", {2, 3});
    QVERIFY(b->resumed());
    QCOMPARE(b->baseFingerprint(), beforeResume);

    // Round 3: all three merge the same three files and agree bit for bit.
    const auto fromA = trainRound(*a, "peer-a", 3), fromB = trainRound(*b, "peer-b", 3),
               fromN = trainRound(*n, "peer-n", 3);
    auto mergedA = a->merge(3, {fromA, fromB, fromN});
    auto mergedB = b->merge(3, {fromA, fromB, fromN});
    auto mergedN = n->merge(3, {fromA, fromB, fromN});
    QVERIFY2(mergedAll(mergedA, 3) && mergedAll(mergedB, 3) && mergedAll(mergedN, 3), "round 3 not merged whole");
    QCOMPARE(mergedB->fingerprint, mergedA->fingerprint);
    QCOMPARE(mergedN->fingerprint, mergedA->fingerprint);

    // Round 4: B misses A's contribution (a deadline), then merges again with A's set: A's state,
    // momentum included.
    const auto fromA4 = trainRound(*a, "peer-a", 4), fromB4 = trainRound(*b, "peer-b", 4);
    auto full = a->merge(4, {fromA4, fromB4});
    QVERIFY(mergedAll(full, 2));
    QVERIFY(b->merge(4, {fromB4}).ok());
    QVERIFY(b->baseFingerprint() != full->fingerprint);
    auto repaired = b->remerge(4, {fromA4, fromB4}, full->fingerprint, dir_.filePath("b-5.st").toStdString());
    QVERIFY2(repaired.ok(), repaired ? "" : repaired.error().c_str());
    QCOMPARE(b->baseFingerprint(), a->baseFingerprint());
  }
};

QTEST_GUILESS_MAIN(OuterStateTest)
#include "tst_outer_state.moc"
