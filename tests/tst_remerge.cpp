// SpesPeer::remerge, the trainer's half of repairing a split (docs/ARCHITECTURE.md, "Repair before
// snapshot"): two tiny peers from the same seed train round 1; A merges both contributions, B only
// its own (as after a deadline that closed before A's arrived). B merges round 1 again with A's
// set and lands on A's state bit for bit; its round-2 contribution, written before the repair on
// its odd state, is written again on the repaired base, and A merges it (not stale).
#include "core/spes/spes_peer.h"
#include "core/train/corpus_prep.h"
#include "support/tiny_node.h"

#include <QTemporaryDir>
#include <QtTest>

#include <memory>

using es::node::IncomingContribution;
using es::node::SpesPeer;

class RemergeTest : public QObject {
  Q_OBJECT
  QTemporaryDir dir_;
  std::unique_ptr<es::train::RunData> data_;

  std::unique_ptr<SpesPeer> makePeer(const QString& name, std::vector<int> experts) {
    auto config = es::test::tinyNodeConfig(*data_, dir_.path(), name).peer;
    config.syncEvery = 2;
    config.trainer.localExperts = std::move(experts);
    auto peer = SpesPeer::create(config, data_->train, data_->val);
    if (!peer) qFatal("SpesPeer::create: %s", peer.error().c_str());
    return std::move(*peer);
  }

  IncomingContribution trainRound(SpesPeer& peer, const QString& name, std::int64_t round) {
    return es::test::trainRound(peer, dir_.path(), name, round);
  }

 private Q_SLOTS:
  void initTestCase() {
    auto data = es::test::bundledRunData(dir_.filePath("run"));
    QVERIFY2(data.ok(), data ? "" : data.error().c_str());
    data_ = std::make_unique<es::train::RunData>(std::move(*data));
  }

  void aRoundMergedAgainWithTheMajoritysSetLandsOnItsState() {
    auto a = makePeer("peer-a", {0, 1});
    auto b = makePeer("peer-b", {2, 3});
    QCOMPARE(a->baseFingerprint(), b->baseFingerprint());  // the same seeded start
    const auto fromA = trainRound(*a, "peer-a", 1);
    const auto fromB = trainRound(*b, "peer-b", 1);
    auto mergedA = a->merge(1, {fromA, fromB});
    QVERIFY2(mergedA.ok() && mergedA->accepted == 2, mergedA ? "rejected" : mergedA.error().c_str());
    auto mergedB = b->merge(1, {fromB});  // B's deadline: A's contribution had not arrived
    QVERIFY(mergedB.ok());
    QVERIFY(mergedB->fingerprint != mergedA->fingerprint);
    const auto oddState = b->baseFingerprint();

    // B trains on and writes round 2 on its odd state before it learns of the split.
    const auto fromBRound2 = trainRound(*b, "peer-b", 2);

    // The wrong set (or a forged digest) gives another state: refused, nothing changes.
    const auto rewrite = dir_.filePath("peer-b-round-2-again.safetensors").toStdString();
    auto wrong = b->remerge(1, {fromB}, mergedA->fingerprint, rewrite);
    QVERIFY(!wrong.ok());
    QVERIFY2(QString::fromStdString(wrong.error()).contains("not the majority's"), wrong.error().c_str());
    QCOMPARE(b->baseFingerprint(), oddState);
    QVERIFY(!QFile::exists(QString::fromStdString(rewrite)));

    auto repaired = b->remerge(1, {fromA, fromB}, mergedA->fingerprint, rewrite);
    QVERIFY2(repaired.ok(), repaired ? "" : repaired.error().c_str());
    QCOMPARE(repaired->fingerprint, mergedA->fingerprint);
    QCOMPARE(b->baseFingerprint(), a->baseFingerprint());  // A's state, bit for bit
    QCOMPARE(repaired->accepted, 2);
    QCOMPARE(repaired->rewritten.round, std::int64_t(2));
    QCOMPARE(repaired->rewritten.baseHash, mergedA->fingerprint);
    QVERIFY(repaired->rewritten.baseHash != oddState);

    // Round 2: A merges B's rewritten contribution (built on the base A holds) and its own; B's
    // first round-2 file names the odd base and would be stale.
    const auto fromARound2 = trainRound(*a, "peer-a", 2);
    IncomingContribution again = fromBRound2;
    again.path = repaired->rewritten.path;
    auto round2 = a->merge(2, {fromARound2, again});
    QVERIFY2(round2.ok() && round2->accepted == 2, round2 ? "rejected" : round2.error().c_str());
    auto stale = b->merge(2, {fromARound2, fromBRound2});  // B's merge of its own old file
    QVERIFY(stale.ok());
    bool oldFileStale = false;
    for (const auto& v : stale->verdicts) oldFileStale = oldFileStale || (v.sender.str() == "peer-b" && v.stale);
    QVERIFY2(oldFileStale, "the round-2 file written on the odd state was not stale");
  }

  // A contribution whose file is gone from our disk (removed under its transfer) is lost, not
  // judged: neither accepted nor rejected, so the node bans nobody for it (Node::onMerged); one
  // whose bytes are there and wrong is rejected as before.
  void aContributionFileGoneFromOurDiskIsLostNotRejected() {
    auto a = makePeer("peer-d", {0, 1});
    auto b = makePeer("peer-e", {2, 3});
    const auto fromA = trainRound(*a, "peer-d", 1);
    auto gone = trainRound(*b, "peer-e", 1);
    QVERIFY(QFile::remove(QString::fromStdString(gone.path)));
    auto merged = a->merge(1, {fromA, gone});
    QVERIFY2(merged.ok(), merged ? "" : merged.error().c_str());
    QCOMPARE(merged->accepted, 1);
    bool lost = false;
    for (const auto& v : merged->verdicts)
      if (v.sender.str() == "peer-e") lost = v.lost && !v.accepted && !v.stale;
    QVERIFY2(lost, "the missing file was not reported lost");
  }

  // Only the round just merged, and only with the base it was merged from: after a resume there
  // is none (nothing is guessed).
  void onlyTheNewestRoundFromItsOwnBase() {
    auto a = makePeer("peer-c", {0, 1});
    const auto fromA = trainRound(*a, "peer-c", 1);
    QVERIFY(a->remerge(1, {fromA}, "0123456789abcdef", dir_.filePath("x").toStdString())
                .error()
                .find("cannot be merged again") != std::string::npos);  // nothing merged yet
    QVERIFY(a->merge(1, {fromA}).ok());
    QVERIFY(!a->remerge(2, {fromA}, "0123456789abcdef", dir_.filePath("y").toStdString()).ok());
  }
};

QTEST_GUILESS_MAIN(RemergeTest)
#include "tst_remerge.moc"
