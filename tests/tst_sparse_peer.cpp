// A sparse run's peer (issue 39; SpesPeer with codec "sparse/<keep>/<chunk>"): its contributions
// are the predicted size and a few per cent of f32, two peers that merge the same files hold the
// same state, and the error feedback is training state — a peer killed after round 2 and
// resumed writes round 3 and 4 byte for byte as one that ran straight through, while one whose
// saved residual is lost writes another round 3; a repair rewrites from the residual before the
// pending write; a snapshot drops the residual.
#include "core/spes/spes_peer.h"
#include "core/sync/contribution_file.h"
#include "core/sync/fetch_size.h"
#include "core/train/corpus_prep.h"
#include "support/tiny_node.h"

#include <QCryptographicHash>
#include <QDir>
#include <QFile>
#include <QTemporaryDir>
#include <QtTest>

#include <cmath>
#include <memory>

using es::node::IncomingContribution;
using es::node::SpesPeer;

namespace {

const char* const kCodec = "sparse/16/256";

QByteArray digestOf(const std::string& path) {
  QFile file(QString::fromStdString(path));
  if (!file.open(QIODevice::ReadOnly)) return {};
  return QCryptographicHash::hash(file.readAll(), QCryptographicHash::Sha256).toHex();
}

}  // namespace

class SparsePeerTest : public QObject {
  Q_OBJECT
  QTemporaryDir dir_;
  std::unique_ptr<es::train::RunData> data_;

  es::node::SpesPeerConfig configFor(const QString& world, const QString& name, std::vector<int> experts) {
    auto config = es::test::tinyNodeConfig(*data_, dir_.filePath(world), name).peer;
    config.syncEvery = 2;
    config.codec = kCodec;
    config.feedbackDecay = 0.9;
    config.trainer.localExperts = std::move(experts);
    return config;
  }

  std::unique_ptr<SpesPeer> makePeer(const QString& world, const QString& name, std::vector<int> experts) {
    auto peer = SpesPeer::create(configFor(world, name, std::move(experts)), data_->train, data_->val);
    if (!peer) qFatal("SpesPeer::create: %s", peer.error().c_str());
    return std::move(*peer);
  }

  // Rounds [from, to] of peers a and b in `world`; returns each round's digest of b's file.
  std::vector<QByteArray> runRounds(const QString& world, SpesPeer& a, SpesPeer& b, std::int64_t from,
                                    std::int64_t to) {
    std::vector<QByteArray> digests;
    for (std::int64_t round = from; round <= to; ++round) {
      const auto fromA = es::test::trainRound(a, dir_.filePath(world), "peer-a", round);
      const auto fromB = es::test::trainRound(b, dir_.filePath(world), "peer-b", round);
      auto mergedA = a.merge(round, {fromA, fromB});
      auto mergedB = b.merge(round, {fromA, fromB});
      if (!mergedA || !mergedB || mergedA->accepted != 2 || mergedB->accepted != 2 ||
          mergedA->fingerprint != mergedB->fingerprint) {
        qWarning("round %lld not merged whole and alike: %s", static_cast<long long>(round),
                 !mergedA   ? mergedA.error().c_str()
                 : !mergedB ? mergedB.error().c_str()
                            : "");
        for (const auto& v : mergedA ? mergedA->verdicts : std::vector<es::node::ContributionVerdict>{})
          qWarning("  %s: %s", v.sender.str().c_str(), v.reason.c_str());
        return {};
      }
      digests.push_back(digestOf(fromB.path));
    }
    return digests;
  }

 private Q_SLOTS:
  void initTestCase() {
    auto data = es::test::bundledRunData(dir_.filePath("run"));
    QVERIFY2(data.ok(), data ? "" : data.error().c_str());
    data_ = std::make_unique<es::train::RunData>(std::move(*data));
  }

  void contributionsAreSmallPredictedAndMergedAlike() {
    auto a = makePeer("small", "peer-a", {0, 1});
    auto b = makePeer("small", "peer-b", {2, 3});
    QVERIFY(!runRounds("small", *a, *b, 1, 2).empty());
    const auto config = configFor("small", "peer-b", {2, 3});
    const auto path = dir_.filePath("small/peer-b-round-2.safetensors");
    const auto read = es::sync::readContributionHeader(path.toStdString());
    QVERIFY2(read.ok(), read ? "" : read.error().c_str());
    const es::sync::ContributionHeader header = *read;
    QCOMPARE(header.codec, std::string(kCodec));
    const auto sizes = es::sync::contributionSizes(config.trainer.model, {2, 3}, header);
    const qint64 bytes = QFileInfo(path).size();
    QVERIFY2(std::find(sizes.begin(), sizes.end(), bytes) != sizes.end(), "not a predicted size");
    auto f32 = header;
    f32.codec = "f32";
    const double ratio = double(bytes) / double(es::sync::contributionBytes(config.trainer.model, {2, 3}, f32));
    qInfo("sparse/16/256 contribution: %lld bytes, %.4f of f32", static_cast<long long>(bytes), ratio);
    QVERIFY(ratio < 0.08);  // 16 of 256 at 3 bytes each (4.7 %), plus scales, shapes and the header
  }

  void aResumedPeerWritesWhatAStraightOneWrites() {
    auto a1 = makePeer("straight", "peer-a", {0, 1});
    auto b1 = makePeer("straight", "peer-b", {2, 3});
    const auto straight = runRounds("straight", *a1, *b1, 1, 4);
    QCOMPARE(int(straight.size()), 4);

    for (const bool keepResidual : {true, false}) {
      const QString world = keepResidual ? "resumed" : "lost";
      auto a = makePeer(world, "peer-a", {0, 1});
      auto b = makePeer(world, "peer-b", {2, 3});
      const auto first = runRounds(world, *a, *b, 1, 2);
      QCOMPARE(int(first.size()), 2);
      QCOMPARE(first[1], straight[1]);
      b.reset();  // joins the background write of round 2
      const auto state = QString::fromStdString(configFor(world, "peer-b", {2, 3}).stateDir);
      const QString feedback = state + "/round-00000002/feedback.safetensors";
      QVERIFY2(QFile::exists(feedback), "round 2's folder holds no residual");
      if (!keepResidual) QVERIFY(QFile::remove(feedback));
      b = makePeer(world, "peer-b", {2, 3});
      QVERIFY(b->resumed());
      const auto second = runRounds(world, *a, *b, 3, 4);
      QCOMPARE(int(second.size()), 2);
      if (keepResidual) {
        QCOMPARE(second[0], straight[2]);
        QCOMPARE(second[1], straight[3]);
      } else {
        QVERIFY2(second[0] != straight[2], "the residual made no difference: the test shows nothing");
      }
    }
  }

  // A repair (SpesPeer::remerge) writes the pending contribution again on the majority's state:
  // from the residual as it was before that contribution was first written, so the rewrite
  // carries what the first file carried (the same deltas, up to rounding) — were the residual
  // fed in twice, the rewrite would send last round's unsent movement once more.
  void aRepairRewritesFromTheResidualBeforeThePendingWrite() {
    auto a = makePeer("repair", "peer-a", {0, 1});
    auto b = makePeer("repair", "peer-b", {2, 3});
    const auto fromA = es::test::trainRound(*a, dir_.filePath("repair"), "peer-a", 1);
    const auto fromB = es::test::trainRound(*b, dir_.filePath("repair"), "peer-b", 1);
    auto full = a->merge(1, {fromA, fromB});
    QVERIFY(full.ok() && full->accepted == 2);
    QVERIFY(b->merge(1, {fromB}).ok());  // B's deadline: A's contribution had not arrived
    const auto first = es::test::trainRound(*b, dir_.filePath("repair"), "peer-b", 2);
    const auto rewrite = dir_.filePath("repair/peer-b-round-2-again.safetensors").toStdString();
    auto repaired = b->remerge(1, {fromA, fromB}, full->fingerprint, rewrite);
    QVERIFY2(repaired.ok(), repaired ? "" : repaired.error().c_str());
    QCOMPARE(b->baseFingerprint(), a->baseFingerprint());
    const auto once = es::sync::loadContribution(first.path), again = es::sync::loadContribution(rewrite);
    QVERIFY(once.ok() && again.ok());
    double diff = 0, norm = 0;
    for (std::size_t i = 0; i < once->deltas.size(); ++i) {
      diff += (once->deltas[i].second - again->deltas[i].second).pow(2).sum().item<double>();
      norm += once->deltas[i].second.pow(2).sum().item<double>();
    }
    qInfo("the rewrite differs from the first write by %.2e of its norm", std::sqrt(diff / norm));
    QVERIFY(std::sqrt(diff / norm) < 1e-2);
    // And A merges the rewrite with its own round 2.
    const auto fromA2 = es::test::trainRound(*a, dir_.filePath("repair"), "peer-a", 2);
    IncomingContribution fromB2 = first;
    fromB2.path = rewrite;
    auto round2 = a->merge(2, {fromA2, fromB2});
    QVERIFY2(round2.ok() && round2->accepted == 2, round2 ? "rejected" : round2.error().c_str());
  }

  void aSnapshotDropsTheResidual() {
    auto a = makePeer("snap", "peer-a", {0, 1});
    auto b = makePeer("snap", "peer-b", {2, 3});
    QVERIFY(!runRounds("snap", *a, *b, 1, 2).empty());
    const auto snapshot = a->writeSnapshot(dir_.filePath("snap/snapshots").toStdString());
    QVERIFY2(snapshot.ok(), snapshot ? "" : snapshot.error().c_str());
    QVERIFY(b->adoptSnapshot(*snapshot, 2).ok());
    b->waitForWrites();
    const auto state = QString::fromStdString(configFor("snap", "peer-b", {2, 3}).stateDir);
    QVERIFY(QFile::exists(state + "/round-00000002/base.safetensors"));
    QVERIFY2(!QFile::exists(state + "/round-00000002/feedback.safetensors"), "the residual outlived the snapshot");
  }
};

QTEST_GUILESS_MAIN(SparsePeerTest)
#include "tst_sparse_peer.moc"
