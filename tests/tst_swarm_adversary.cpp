// Issue 15, "the proof": hostile peers in one run, all at once, against real clients on 127.0.0.1.
// Three honest `expertswarm --no-gui` peers train 6 rounds; beside them
//  - a client whose every contribution carries its shared update turned around and scaled by 10
//    (`--test-poison reverse`: at the norm bound, for the robust aggregate to absorb or validation
//    to refuse),
//  - a client whose every contribution names a random base (`--test-poison stale`: what a peer
//    that merged another set would send — stale, never a ban),
//  - two Sybil keys (swarm_probe, with the run's identity work paid) that every round claim every
//    expert with a lease to 2^62, announce a contribution nobody seeds and a snapshot of round 10^9,
//  - a flooder that pushes 20,000 records of fresh keys (no identity work) into the gossip and
//    signs two records with one seq (equivocation),
//  - and a newcomer that joins after round 2, in the middle of it all.
// Asserted: the honest peers and the newcomer finish; every round they merged has one fingerprint
// among them; nobody fetches the far-future snapshot and the newcomer starts from an honest round;
// every round closes well before the 90 s maximum the ghosts would hold it to; the experts merged
// each round cover the whole model (the endless leases own nothing); the equivocator is banned;
// the ledgers stay small (20,000 keys leave no trace); the honest validation loss still falls; the
// random-base sender is never banned, never pushes an honest peer into a resync (one state per
// round), and is not waited for nor counted as an owner after kStaleRounds (2) stale rounds: its
// experts are the honest peers' in the last round.
// Measured here: the reverse peer is refused at the per-tensor norm bound (10 × the median) and
// banned in round 1; the newcomer's first round may merge its own late contribution that the
// others closed without — then it repairs that round (merge again, no snapshot).
// Not here: the validation-loss ratio against a run without attackers (too slow for CI on two
// cores: bench/adversary_quality).
#include "core/store/ledger.h"
#include "core/train/run_manifest.h"
#include "support/swarm_clients.h"
#include "support/swarm_probes.h"

#include <QCryptographicHash>
#include <QDirIterator>
#include <QElapsedTimer>
#include <QTemporaryDir>

#include <algorithm>
#include <set>

using namespace es::test;

class SwarmAdversary : public QObject {
  Q_OBJECT

  static constexpr int kRounds = 6;
  static constexpr int kExperts = 8;
  static constexpr double kMaxSeconds = 90;
  QTemporaryDir dir_;
  std::vector<std::unique_ptr<SwarmClient>> honest_;  // 0–2 from the start, 3 the newcomer
  std::unique_ptr<SwarmClient> reverse_, stale_;
  std::vector<std::unique_ptr<Probe>> sybils_;
  std::unique_ptr<Probe> flooder_;
  QString runDir_;
  qint64 seq_ = 1;
  int attacked_ = 0;            // the last round the Sybils announced for
  int newcomerInStepFrom_ = 0;  // the round after the one it trained on its last snapshot
  qint64 peakRssMiB_ = 0;       // the largest resident set of an honest client, sampled while it runs
  int equivocations_ = 0, equivocatedInRound_ = -1;  // the seq of the last equivocation, and its round
  bool flooded_ = false;

  QStringList args(int i, const QString& run, const QString& bootstrap) const {
    return swarmPeerArgs(run, dir_.filePath(QString("peer%1").arg(i)), i, bootstrap, 4, kRounds);
  }
  static qint64 rssMiB(qint64 pid) {
    QFile status(QString("/proc/%1/status").arg(pid));
    if (!pid || !status.open(QIODevice::ReadOnly)) return 0;
    static const QRegularExpression vmRss(QStringLiteral("VmRSS:\\s+(\\d+) kB"));
    return vmRss.match(QString::fromLatin1(status.readAll())).captured(1).toLongLong() / 1024;
  }
  static QString ghost(const QString& who, int round) {
    return QCryptographicHash::hash((who + QString::number(round)).toUtf8(), QCryptographicHash::Sha256).toHex();
  }
  std::unique_ptr<Probe> probe(const QString& name, const QString& bootstrap) {
    QDir().mkpath(dir_.filePath(name));
    QFile::copy(runDir_ + "/run.json", dir_.filePath(name + "/run.json"));
    const QString bits = QString::number(es::train::SwarmPolicy{}.identityWorkBits);
    return std::make_unique<Probe>(
        name, QStringList{"--listen", "127.0.0.1:0", "--bootstrap", bootstrap, "--key", dir_.filePath(name + ".key"),
                          "--run", runDir_ + "/run.torrent", "--run-dir", dir_.filePath(name), "--work-bits", bits});
  }
  bool joinAttackers(const QString& bootstrap);
  void attack(int round);
  void driveAttacks(int round);
  bool allDone() const;
  bool equivocationBanned() const;
  void checkOneStatePerRound();
  void checkNoHonestPeerBanned();
  void checkRoundTimes(const std::map<int, qint64>& closedAtMs);
  void checkRoundsAndExperts(const QString& runId, bool baseline);
  void checkExpertsMerged(const QString& name, es::store::LedgerReader& ledger, const std::string& run, bool baseline);
  void checkStaleJudged(const QString& name, es::store::LedgerReader& ledger, const std::string& run);

 private Q_SLOTS:
  void honestPeersHoldAgainstEveryAttackAtOnce();
};

// The probes join with peer 0's run torrent, once it made it (the Sybils paid the identity work).
bool SwarmAdversary::joinAttackers(const QString& bootstrap) {
  const bool made = waitUntil(
      [&] {
        QDirIterator it(dir_.filePath("peer0/runs"), {"run.torrent"}, QDir::Files, QDirIterator::Subdirectories);
        if (it.hasNext()) runDir_ = QFileInfo(it.next()).absolutePath();
        return !runDir_.isEmpty();
      },
      120000);
  if (!made) return false;
  for (const QString name : {"sybil-a", "sybil-b"}) sybils_.push_back(probe(name, bootstrap));
  flooder_ = probe("flooder", bootstrap);
  for (auto* p : {sybils_[0].get(), sybils_[1].get(), flooder_.get()})
    if (!waitUntil([p] { return !p->find([](auto& e) { return isEvent(e, "ready"); }).isEmpty(); }, 60000))
      return false;
  return true;
}

// One round of the Sybils: every expert to 2^62, a ghost contribution of the round, a snapshot of
// round 10^9 (a real file, published: any bytes).
void SwarmAdversary::attack(int round) {
  QStringList everyExpert;
  for (int e = 0; e < kExperts; ++e) everyExpert << QString::number(e);
  ++seq_;
  for (std::size_t i = 0; i < sybils_.size(); ++i) {
    const QString name = i ? "sybil-b" : "sybil-a";
    sybils_[i]->send(QString("record %1 %2 %3 %4 %5=%6 1000000000=%7")
                         .arg(seq_)
                         .arg(round)
                         .arg(everyExpert.join(','))
                         .arg(Q_INT64_C(4611686018427387904))
                         .arg(round)
                         .arg(ghost(name, round), ghost(name + "-snapshot", 0)));
  }
}

// The Sybils' round, once per round; an equivocation (two records of one seq) once the flooder
// hears records, and again with the next seq each round until an honest peer banned the key: it
// reaches only the peers the flooder has gossip connections with — most likely none of the honest
// ones in the one run that ended "nobody banned the equivocator" (its records can come through the
// DHT too). The flood after the first (it spends the gossip's rate allowance), from round 2.
void SwarmAdversary::driveAttacks(int round) {
  if (round + 1 > attacked_ && round < kRounds) attack(attacked_ = round + 1);
  if (!equivocationBanned() && round > equivocatedInRound_ &&
      flooder_->count([](auto& e) { return isEvent(e, "record"); }) >= 3) {
    flooder_->send(QString("equivocate %1").arg(++equivocations_));
    equivocatedInRound_ = round;
  }
  if (equivocations_ > 0 && !flooded_ && round >= 2) {
    flooder_->send("flood keys 20000");
    flooded_ = true;
  }
}

bool SwarmAdversary::equivocationBanned() const {
  for (const auto& p : honest_)
    for (const auto& ban : p->events("ban"))
      if (ban.value("reason").toString().startsWith("equivocation")) return true;
  return false;
}

bool SwarmAdversary::allDone() const {
  for (const auto& p : honest_)
    if (p->running()) return false;
  return true;
}

// ES_ADVERSARY_BASELINE=1: the same run without any attacker (bench/adversary_quality compares
// the final validation losses of both); the attack-only checks are skipped then.
void SwarmAdversary::honestPeersHoldAgainstEveryAttackAtOnce() {
  const bool baseline = qEnvironmentVariableIsSet("ES_ADVERSARY_BASELINE");
  const auto run = customRun(
      dir_.filePath("run"),
      {{"snapshot_every", 1},
       {"identity_work_bits", es::train::SwarmPolicy{}.identityWorkBits},  // the Sybils pay what a real run asks
       {"deadline", QJsonObject{{"factor", 2.0}, {"min_seconds", 10}, {"max_seconds", kMaxSeconds}}}});
  QVERIFY(!run.isEmpty());
  const QString bootstrap = QString("127.0.0.1:%1").arg(freeLoopbackPort());
  for (int i = 0; i < 3; ++i)
    honest_.push_back(std::make_unique<SwarmClient>(QString("honest%1").arg(i), args(i, run, bootstrap)));
  if (!baseline) {
    reverse_ = std::make_unique<SwarmClient>("reverse", args(4, run, bootstrap) << "--test-poison"
                                                                                << "reverse");
    stale_ = std::make_unique<SwarmClient>("stale", args(5, run, bootstrap) << "--test-poison"
                                                                            << "stale");
    QVERIFY2(joinAttackers(bootstrap), "the attackers could not join");
  }
  QElapsedTimer clock;
  clock.start();
  std::map<int, qint64> closedAtMs;  // honest0's rounds, as the test saw them close
  const bool done = waitUntil(
      [&] {
        const int round = honest_[0]->rounds().empty() ? 0 : honest_[0]->rounds().rbegin()->first;
        if (round && !closedAtMs.count(round)) closedAtMs[round] = clock.elapsed();
        for (const auto& p : honest_) peakRssMiB_ = std::max(peakRssMiB_, rssMiB(p->pid()));
        if (!baseline) driveAttacks(round);
        if (round >= 2 && honest_.size() == 3)
          honest_.push_back(std::make_unique<SwarmClient>("newcomer", args(3, run, bootstrap)));
        return honest_.size() == 4 && allDone();
      },
      900000);
  for (const auto& p : honest_)
    qInfo().noquote()
        << p->name() << p->exitState()
        << p->log().filter(QRegularExpression("closed|snapshot|Snapshot|banned|Claim|never|ailed")).join("\n  ");
  if (reverse_)
    qInfo().noquote() << "reverse:" << reverse_->log().filter(QRegularExpression("reject|banned")).join("\n  ");
  if (stale_)  // what it claimed and merged: a stale peer that stops claiming is judged no more
    qInfo().noquote() << "stale:" << stale_->exitState()
                      << stale_->log().filter(QRegularExpression("closed|napshot|Claim|never|ailed")).join("\n  ");
  for (const auto& p : honest_)
    if (p->rounds().count(kRounds) && p->rounds().at(kRounds).valLoss)
      qInfo("final val_loss %s %.4f", qPrintable(p->name()), *p->rounds().at(kRounds).valLoss);
  QVERIFY2(done, "the honest peers did not finish");
  for (const auto& p : honest_) QVERIFY2(p->finishedWith(0), qPrintable(p->name() + ": " + p->exitState()));
  checkRoundTimes(closedAtMs);
  // Nothing the attackers send grows an honest client: its largest resident set, sampled every
  // wait step, stays within what it needs to train (~1 GiB measured; 20,000 records held would add
  // ~40 MB, and a leak per attack round more).
  qInfo("largest honest client: %lld MiB resident", peakRssMiB_);
  QVERIFY2(peakRssMiB_ > 0 && peakRssMiB_ < 2048, qPrintable(QString::number(peakRssMiB_)));
  checkNoHonestPeerBanned();
  checkOneStatePerRound();
  checkRoundsAndExperts(honest_[0]->runId(), baseline);
  if (QTest::currentTestFailed())  // the honest peers' whole timelines, to see why (CI runs are seen once)
    for (const auto& p : honest_) qInfo().noquote() << p->name() << "\n  " << p->timedLog().join("\n  ");
}

// Honest work is never a reason to ban, a newcomer's included: a ban of an honest peer splits the
// swarm for good (the banned peer's contributions are never merged again, so it merges its own).
void SwarmAdversary::checkNoHonestPeerBanned() {
  std::map<QString, QString> honestNames;  // peer id → name
  for (const auto& p : honest_) honestNames[p->peerId()] = p->name();
  for (const auto& p : honest_)
    for (const auto& ban : p->events("ban")) {
      const auto banned = honestNames.find(ban.value("peer").toString());
      if (banned != honestNames.end())
        QFAIL(qPrintable(QString("%1 banned %2: %3").arg(p->name(), banned->second, ban.value("reason").toString())));
    }
}

// Every round closes well before the maximum that ghosts and endless claims would hold it to.
void SwarmAdversary::checkRoundTimes(const std::map<int, qint64>& closedAtMs) {
  QVERIFY(!closedAtMs.empty());
  for (auto it = std::next(closedAtMs.begin()); it != closedAtMs.end(); ++it) {
    const double seconds = (it->second - std::prev(it)->second) / 1000.0;
    qInfo("round %d took %.1f s", it->first, seconds);
    QVERIFY2(seconds < kMaxSeconds * 2 / 3, qPrintable(QString("round %1 took %2 s").arg(it->first).arg(seconds)));
  }
}

// One merged state per round among the honest peers; the newcomer's first state is an honest
// round's snapshot, never the Sybils' round 10^9, and from the round after the last snapshot it
// took it merges what they merge. (Before that a round it merged may be its own — its late
// contribution in, or a snapshot fetch that failed: "v1 and v2 hashes do not describe the same
// data" from libtorrent, 2 of 11 runs here — which it repairs or leaves by a newer snapshot.)
void SwarmAdversary::checkOneStatePerRound() {
  int first = 0, last = 0;
  for (const auto& snapshot : honest_[3]->events("snapshot")) {
    last = snapshot.value("round").toInt();
    first = first ? first : last;
  }
  QVERIFY2(first >= 1 && last <= kRounds, "the newcomer did not start from an honest round's snapshot");
  QVERIFY2(last < kRounds && honest_[3]->rounds().count(kRounds), "the newcomer never merged with the others");
  for (const auto& p : honest_) {
    for (const auto& resync : p->events("resync"))  // every snapshot fetch it started
      QVERIFY2(resync.value("round").toInteger() <= kRounds, qPrintable(p->name() + " fetched the snapshot of round " +
                                                                        resync.value("round").toVariant().toString()));
    const bool catchingUp = p == honest_[3];
    for (const auto& [round, line] : p->rounds())
      QVERIFY2((catchingUp && round <= last) || line.merged == honest_[0]->rounds().at(round).merged,
               qPrintable(QString("%1 merged round %2 into another state").arg(p->name()).arg(round)));
  }
  qInfo("the newcomer took the snapshots of rounds %d to %d", first, last);
  newcomerInStepFrom_ = last + 2;
}

// The experts merged in a round: those an accepted contribution's sender claimed in it (the
// ledger's verdicts and claims). The reverse peer's are missing from the round its contribution
// was refused and the next (trained on the claims before the ban): from round 3 on the honest peers
// hold them. The stale peer's own experts are merged by nobody while it holds them; each honest
// peer stops counting it as an owner once it saw 2 of its stale rounds — from the plan for round 4
// on (measured once: every expert merged in rounds 4 to 6); a peer that joined late (the newcomer,
// from round 3) or was out of step in round 1 or 2 plans a round or two later, and an orphan the
// others deal to it may then stay unmerged for those rounds (measured once: 7 of 8 in rounds 4
// and 5), and its own first contribution, trained on the snapshot it just took, may miss the
// others' close (measured: 7 of 8 in round 3 under load). Asserted: from round 3 on every expert
// is merged, held by the stale peer, or (before the newcomer is in step) by the newcomer; every
// expert merged in the last round. That the liar does not win its experts back is
// tst_fetch_limits aStalePeerCopyingOurStateDoesNotWinItsExpertsBack.
// The experts `p` claimed for round `r`: its first claim, then each change from its round on.
static std::set<int> claimsIn(const SwarmClient& p, int r) {
  std::set<int> out;
  for (const auto& e : p.events("claims")) {
    if (e.value("change").toBool() && e.value("round").toInt() > r) break;
    out.clear();
    for (const auto& x : e.value("experts").toArray()) out.insert(x.toInt());
  }
  return out;
}

void SwarmAdversary::checkExpertsMerged(const QString& name, es::store::LedgerReader& ledger, const std::string& run,
                                        bool baseline) {
  const std::string staleId = baseline ? std::string() : stale_->peerId().toStdString();
  const std::string newcomerId = honest_[3]->peerId().toStdString();
  for (int r = 3; r <= kRounds; ++r) {
    const auto claims = ledger.claims(run, r);
    const auto verdicts = ledger.contributions(run, r);
    QVERIFY(claims.ok() && verdicts.ok());
    std::set<std::string> accepted;
    for (const auto& v : *verdicts) {
      if (v.verdict == "accepted") accepted.insert(v.peerId);
    }
    // Held by the stale peer: what it claimed for the round (its own "claims" events: its record's
    // lease) — not only what the ledger holds of its contribution, which a round that closed
    // before it arrived does not record (it is not waited for once stale twice, and rounds held
    // by the Sybil claimers close at factor × the typical round from their start: README run at
    // 2cf377b, round 3).
    std::set<int> merged, hostage = baseline ? std::set<int>{} : claimsIn(*stale_, r), catchingUp;
    for (const auto& c : *claims) {
      if (accepted.count(c.peerId)) merged.insert(c.expert);
      if (c.peerId == staleId) hostage.insert(c.expert);
      if (c.peerId == newcomerId && r < newcomerInStepFrom_) catchingUp.insert(c.expert);
    }
    std::set<int> covered = merged;
    if (r < kRounds) {
      covered.insert(hostage.begin(), hostage.end());
      covered.insert(catchingUp.begin(), catchingUp.end());
    }
    qInfo("%s round %d: %d experts merged, %d held by the stale peer", qPrintable(name), r, int(merged.size()),
          int(hostage.size()));
    QVERIFY2(int(covered.size()) == kExperts,
             qPrintable(QString("%1 round %2 merged %3 of %4 experts (%5 held by the stale peer)")
                            .arg(name)
                            .arg(r)
                            .arg(merged.size())
                            .arg(kExperts)
                            .arg(hostage.size())));
  }
}

// The random-base sender's contributions: judged stale, never anything else, in at least
// kStaleRounds rounds of the run — any rounds: an honest peer that judged it stale in rounds 1
// and 2 stops counting it as an owner and need not fetch it again (CI at ee21b2c, under the
// suite's load: under 2 verdicts in rounds 3 to 6, none of its claims counted from round 4).
void SwarmAdversary::checkStaleJudged(const QString& name, es::store::LedgerReader& ledger, const std::string& run) {
  const std::string staleId = stale_->peerId().toStdString();
  QStringList staleRounds;
  for (int r = 1; r <= kRounds; ++r) {
    const auto verdicts = ledger.contributions(run, r);
    QVERIFY(verdicts.ok());
    for (const auto& v : *verdicts) {
      if (v.peerId != staleId) continue;
      QVERIFY2(v.verdict == "stale", qPrintable(name + ": the stale peer's contribution was " + v.verdict.c_str()));
      staleRounds << QString::number(r);
    }
  }
  qInfo("%s judged the stale peer's contributions of rounds %s", qPrintable(name), qPrintable(staleRounds.join(',')));
  QVERIFY2(staleRounds.size() >= 2, qPrintable(name + ": the stale peer's contributions were not judged"));
}

// Each honest ledger: rounds closed well before the maximum the ghosts would hold them to; the
// contributions merged each round cover every expert; a few peers only; the loss falls.
void SwarmAdversary::checkRoundsAndExperts(const QString& runId, bool baseline) {
  QVERIFY(!runId.isEmpty());
  // The equivocation reaches the peers the flooder is connected to (a peer that banned the key
  // relays neither record again): at least one bans it.
  int banned = 0;
  for (const auto& p : honest_) {
    const auto bans = p->events("ban");
    banned += std::any_of(bans.begin(), bans.end(),
                          [](auto& b) { return b.value("reason").toString().startsWith("equivocation"); });
  }
  QVERIFY2(baseline || banned >= 1, "nobody banned the equivocator");
  for (const auto& p : honest_)  // what a peer on another base sends is no proof of a lie
    for (const auto& ban : p->events("ban"))
      QVERIFY2(baseline || ban.value("peer").toString() != stale_->peerId(),
               qPrintable(p->name() + " banned the stale peer: " + ban.value("reason").toString()));
  for (int i = 0; i < 3; ++i) {
    const auto& p = *honest_[static_cast<std::size_t>(i)];
    for (const auto& closed : p.events("deadline"))
      QVERIFY2(closed.value("seconds").toDouble() < kMaxSeconds * 2 / 3,
               qPrintable(QString("%1: round %2 closed by its deadline after %3 s")
                              .arg(p.name())
                              .arg(closed.value("round").toInt())
                              .arg(closed.value("seconds").toDouble())));
    auto reader = es::store::LedgerReader::open(dir_.filePath(QString("peer%1/expertswarm.db").arg(i)).toStdString());
    QVERIFY(reader.ok());
    checkExpertsMerged(p.name(), **reader, runId.toStdString(), baseline);
    if (!baseline) checkStaleJudged(p.name(), **reader, runId.toStdString());
    const auto peers = (*reader)->peers(runId.toStdString());
    QVERIFY(peers.ok());
    qInfo("%s's ledger: %d peers", qPrintable(p.name()), int(peers->size()));
    QVERIFY2(peers->size() <= 8, "the flood's keys reached the ledger");
    // Every round evaluates, but a round repaired afterwards reports no val_loss (it was measured
    // on the state the repair left): the first and last measured rounds, at least 3 rounds apart.
    std::vector<std::pair<int, double>> measured;
    for (const auto& [r, line] : p.rounds())
      if (line.valLoss) measured.emplace_back(r, *line.valLoss);
    QVERIFY2(measured.size() >= 2 && measured.back().first - measured.front().first >= 3,
             qPrintable(QString("%1: val_loss measured in %2 rounds").arg(p.name()).arg(measured.size())));
    QVERIFY2(measured.back().second < measured.front().second, qPrintable(QString("%1: round %2 %3 -> round %4 %5")
                                                                              .arg(p.name())
                                                                              .arg(measured.front().first)
                                                                              .arg(measured.front().second)
                                                                              .arg(measured.back().first)
                                                                              .arg(measured.back().second)));
  }
}

QTEST_GUILESS_MAIN(SwarmAdversary)
#include "tst_swarm_adversary.moc"
