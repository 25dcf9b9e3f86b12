// Issue 14, item 4: the state folder's round directories survive a kill at any moment, and a
// damaged newest round falls back to the one before it (core/checkpoint/round_dirs.h). First the
// commit protocol on plain files, each crash window laid out by hand; then the real SpesPeer
// (a tiny model) resuming past a damaged newest round.
#include "core/checkpoint/round_dirs.h"
#include "core/spes/spes_peer.h"
#include "core/train/corpus_prep.h"
#include "support/tiny_node.h"

#include <QDir>
#include <QFile>
#include <QTemporaryDir>
#include <QtTest>

using namespace es::node;

namespace {

// A round folder as commit() writes it: one file holding the round's "content".
es::Status writeMarker(const std::string& dir, const std::string& content) {
  QFile f(QString::fromStdString(dir + "/marker"));
  if (!f.open(QIODevice::WriteOnly) || f.write(content.data(), qint64(content.size())) != qint64(content.size()))
    return es::makeError("cannot write the marker");
  return {};
}

QByteArray markerOf(const std::string& dir) {
  QFile f(QString::fromStdString(dir + "/marker"));
  return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
}

std::vector<std::int64_t> roundsIn(const std::string& stateDir) {
  std::vector<std::int64_t> out;
  for (const auto& d : round_dirs::complete(stateDir)) out.push_back(d.round);
  return out;
}

}  // namespace

class RoundDirsTest : public QObject {
  Q_OBJECT
  QTemporaryDir dir_;
  std::unique_ptr<es::train::RunData> data_;

  std::string freshStateDir(const QString& name) const {
    QDir().mkpath(dir_.filePath(name));
    return dir_.filePath(name).toStdString();
  }

 private Q_SLOTS:
  void initTestCase() {
    auto data = es::test::bundledRunData(dir_.filePath("run"));
    QVERIFY2(data.ok(), data ? "" : data.error().c_str());
    data_ = std::make_unique<es::train::RunData>(std::move(*data));
  }

  // The newest two complete rounds stay; older ones and the in-between ".partial" go.
  void theTwoNewestRoundsAreKept() {
    const auto state = freshStateDir("keep");
    QVERIFY(QDir().mkpath(QString::fromStdString(state + "/round-00000009.partial")));  // a kill's leftover
    for (std::int64_t r : {1, 2, 3})
      QVERIFY(round_dirs::commit(state, r, [r](const std::string& d) {
                return writeMarker(d, "r" + std::to_string(r));
              }).ok());
    QCOMPARE(roundsIn(state), (std::vector<std::int64_t>{3, 2}));
    QCOMPARE(QDir(QString::fromStdString(state)).entryList(QDir::Dirs | QDir::NoDotAndDotDot),
             (QStringList{"round-00000002", "round-00000003"}));
  }

  // A failed write leaves every complete round as it was, and its ".partial" is never loaded.
  void aFailedWriteChangesNothing() {
    const auto state = freshStateDir("fail");
    QVERIFY(round_dirs::commit(state, 4, [](const std::string& d) { return writeMarker(d, "four"); }).ok());
    const auto failed = round_dirs::commit(state, 5, [](const std::string& d) {
      (void)writeMarker(d, "half");
      return es::Status(es::makeError("disk full"));
    });
    QVERIFY(!failed.ok());
    QCOMPARE(roundsIn(state), (std::vector<std::int64_t>{4}));
    QCOMPARE(markerOf(state + "/round-00000004"), QByteArray("four"));
  }

  // The same round written again (a snapshot of the round we merged): the old copy is moved
  // aside, not removed, so the kill between the two renames still finds it (".old" loads).
  void theSameRoundWrittenAgainIsNeverMissing() {
    const auto state = freshStateDir("again");
    QVERIFY(round_dirs::commit(state, 7, [](const std::string& d) { return writeMarker(d, "first"); }).ok());
    QVERIFY(round_dirs::commit(state, 7, [](const std::string& d) { return writeMarker(d, "second"); }).ok());
    QCOMPARE(roundsIn(state), (std::vector<std::int64_t>{7}));
    QCOMPARE(markerOf(state + "/round-00000007"), QByteArray("second"));
    // The crash window laid out: round-7 renamed to round-7.old, round-7.partial not yet in place.
    QDir d(QString::fromStdString(state));
    QVERIFY(d.rename("round-00000007", "round-00000007.old"));
    QVERIFY(d.mkdir("round-00000007.partial"));
    std::vector<std::string> skipped;
    std::string loadedFrom;
    auto loaded = round_dirs::loadNewest(
        state,
        [&](const round_dirs::RoundDir& r) {
          loadedFrom = r.path;
          return es::Status();
        },
        skipped);
    QVERIFY(loaded.ok() && loaded->has_value());
    QCOMPARE(**loaded, std::int64_t(7));
    QVERIFY(QString::fromStdString(loadedFrom).endsWith("round-00000007.old"));
    // The next commit of that round cleans both up.
    QVERIFY(round_dirs::commit(state, 7, [](const std::string& dd) { return writeMarker(dd, "third"); }).ok());
    QCOMPARE(d.entryList(QDir::Dirs | QDir::NoDotAndDotDot), QStringList{"round-00000007"});
  }

  // Rounds compare as numbers (a 9-digit round is newer than an 8-digit one); strangers' names
  // are not rounds.
  void namesAreParsedStrictly() {
    const auto state = freshStateDir("names");
    QDir d(QString::fromStdString(state));
    for (const char* name : {"round-99999999", "round-100000000", "round-", "round-12x", "round-5.partial", "round-+5",
                             "round-1234567890123456789012", "rounds-3", "round-6.old.old"})
      QVERIFY(d.mkdir(name));
    QCOMPARE(roundsIn(state), (std::vector<std::int64_t>{100000000, 99999999}));
  }

  // Newest first; a damaged one is passed over with a line that says so; all damaged: an error
  // (nothing removed); none at all: no round.
  void loadingFallsBackPastDamage() {
    const auto state = freshStateDir("fallback");
    std::vector<std::string> skipped;
    auto none = round_dirs::loadNewest(
        state, [](const round_dirs::RoundDir&) { return es::Status(); }, skipped);
    QVERIFY(none.ok() && !none->has_value());
    for (std::int64_t r : {8, 9})
      QVERIFY(round_dirs::commit(state, r, [r](const std::string& d) {
                return writeMarker(d, r == 9 ? "damaged" : "good");
              }).ok());
    const auto loadGood = [](const round_dirs::RoundDir& r) {
      return markerOf(r.path) == "good" ? es::Status() : es::Status(es::makeError("bad marker"));
    };
    auto loaded = round_dirs::loadNewest(state, loadGood, skipped);
    QVERIFY(loaded.ok() && loaded->has_value());
    QCOMPARE(**loaded, std::int64_t(8));
    QCOMPARE(int(skipped.size()), 1);
    QVERIFY(QString::fromStdString(skipped.front()).contains("round-00000009"));
    skipped.clear();
    auto failed = round_dirs::loadNewest(
        state, [](const round_dirs::RoundDir&) { return es::Status(es::makeError("bad")); }, skipped);
    QVERIFY(!failed.ok());
    QCOMPARE(int(skipped.size()), 2);
    QCOMPARE(roundsIn(state), (std::vector<std::int64_t>{9, 8}));  // nothing removed
  }

  void aPeerResumesFromTheRoundBeforeADamagedOne();
};

// The real thing: a tiny SpesPeer merges rounds 1 and 2 alone (its own contribution), its newest
// training state is truncated, and a new peer on that folder resumes from round 1 and says why.
void RoundDirsTest::aPeerResumesFromTheRoundBeforeADamagedOne() {
  auto config = es::test::tinyNodeConfig(*data_, dir_.path(), "peer").peer;
  config.syncEvery = 2;
  {
    auto peer = SpesPeer::create(config, data_->train, data_->val);
    QVERIFY2(peer.ok(), peer ? "" : peer.error().c_str());
    const auto experts = (*peer)->localExperts();
    for (std::int64_t round : {1, 2}) {
      for (int s = 0; s < config.syncEvery; ++s) (*peer)->step();
      const auto path = dir_.filePath(QString("contrib-%1.bin").arg(round)).toStdString();
      QVERIFY((*peer)->writeContribution(round, path).ok());
      auto merged =
          (*peer)->merge(round, {{es::PeerId(config.selfId), path, std::set<int>(experts.begin(), experts.end())}});
      QVERIFY2(merged.ok() && merged->accepted == 1, merged ? "rejected" : merged.error().c_str());
      (*peer)->waitForWrites();
    }
  }
  QCOMPARE(roundsIn(config.stateDir), (std::vector<std::int64_t>{2, 1}));
  QFile newest(QString::fromStdString(config.stateDir + "/round-00000002/training-state.safetensors"));
  QVERIFY(newest.resize(newest.size() / 2));  // a torn write the file system did not protect
  auto resumed = SpesPeer::create(config, data_->train, data_->val);
  QVERIFY2(resumed.ok(), resumed ? "" : resumed.error().c_str());
  QVERIFY((*resumed)->resumed());
  QCOMPARE((*resumed)->mergedRound(), std::int64_t(1));
  QCOMPARE((*resumed)->stepCount(), std::int64_t(config.syncEvery));
  QVERIFY(QString::fromStdString((*resumed)->resumeNote()).contains("round-00000002"));
}

QTEST_GUILESS_MAIN(RoundDirsTest)
#include "tst_round_dirs.moc"
