// Specification of the node's rules about other peers (core/node/rules/peer_rules.h, bans.h,
// first_round.h; issue 15 items 2 and 6, issue 37): leases that cannot run forever, tie-breaks no
// id wins every round, banned and silent peers owning nothing, bans that outlive a restart and then
// expire, and how much of its first round a peer that took a snapshot trains.
#include "core/common/lease_terms.h"
#include "core/node/rules/bans.h"
#include "core/node/rules/first_round.h"
#include "core/node/rules/merged_set.h"
#include "core/node/rules/peer_rules.h"
#include "core/node/rules/round_claims.h"
#include "core/store/ledger.h"
#include "core/store/migrations.h"
#include "core/store/sqlite_db.h"
#include "support/id_literals.h"

#include <QTemporaryDir>
#include <QTest>

#include <limits>

using namespace es::node;
using es::ContentId;
using es::PeerId;
using es::test::operator""_peer;
using es::test::operator""_content;

namespace {

constexpr int kLease = 3;
const std::string kMigrations = std::string(ES_SHARE_DIR) + "/sql";

// An honest peer in `round`: its lease is round + lease_rounds, it published every round so far.
SwarmPeer peer(const std::string& id, std::vector<int> claims, std::int64_t round) {
  SwarmPeer p;
  p.id = PeerId(id);
  p.announced.round = round;
  p.announced.claims = std::move(claims);
  p.announced.leaseUntil = round + kLease;
  for (std::int64_t r = std::max<std::int64_t>(1, round - 2); r < round; ++r)
    p.announced.contrib[r] = ContentId(id + "-" + std::to_string(r));
  return p;
}

std::vector<std::string> idsOf(const std::vector<SwarmPeer>& peers) {
  std::vector<std::string> ids;
  for (const auto& p : peers) ids.push_back(p.id.str());
  return ids;
}

ClaimPlanInput planFor(const std::string& self, std::vector<int> claims, std::vector<SwarmPeer> live,
                       std::int64_t round) {
  return {PeerId(self), std::move(claims), std::move(live), round, 4, 1, 0};
}

}  // namespace

class PeerRulesTest : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  // A contribution of round R is sized with the claims its sender's record stated in R, kept for
  // the last kRoundsKept rounds of each peer still in the record book.
  void claimsAreKeptPerRound() {
    es::node::RoundClaims claims;
    claims.note("a"_peer, 3, {2, 3});
    claims.note("a"_peer, 4, {2, 3, 4, 5});  // re-balanced after a leave
    QCOMPARE(*claims.of("a"_peer, 3), (std::set<int>{2, 3}));
    QCOMPARE(*claims.of("a"_peer, 4), (std::set<int>{2, 3, 4, 5}));
    QVERIFY(!claims.of("a"_peer, 2));  // never seen: a guess would be needed
    QVERIFY(!claims.of("b"_peer, 3));
    claims.note("a"_peer, 4, {5});  // a round's last word wins
    QCOMPARE(*claims.of("a"_peer, 4), (std::set<int>{5}));
    for (int r = 5; r < 5 + es::node::RoundClaims::kRoundsKept; ++r) claims.note("a"_peer, r, {1});
    QVERIFY(!claims.of("a"_peer, 4));  // bounded per peer
    QVERIFY(claims.of("a"_peer, 5 + es::node::RoundClaims::kRoundsKept - 1));
    claims.note("b"_peer, 1, {0});
    claims.keepOnly({"b"_peer});  // "a" left the record book
    QCOMPARE(claims.peerCount(), std::size_t(1));
    QVERIFY(!claims.of("a"_peer, 5));
  }

  void aLeaseHoldsOnlyWithinItsRoundPlusLeaseRoundsPlusSlack() {
    QVERIFY(es::leaseHolds(5, 5 + kLease, 5, kLease));           // honest
    QVERIFY(es::leaseHolds(6, 6 + kLease, 5, kLease));           // one round ahead: the slack
    QVERIFY(!es::leaseHolds(7, 7 + kLease, 5, kLease));          // two rounds ahead
    QVERIFY(es::leaseHolds(4, 4 + kLease, 4 + kLease, kLease));  // through its last round
    QVERIFY(!es::leaseHolds(4, 4 + kLease, 5 + kLease, kLease));
    QVERIFY(!es::leaseHolds(5, std::int64_t{1} << 62, 5, kLease));  // "until 2^62": nothing
    QVERIFY(!es::leaseHolds(5, 5 + kLease + es::kLeaseSlackRounds + 1, 5, kLease));
    constexpr auto max = std::numeric_limits<std::int64_t>::max();
    QVERIFY(!es::leaseHolds(max, max, 5, kLease));
    QVERIFY(!es::leaseHolds(std::numeric_limits<std::int64_t>::min(), max, 5, kLease));
  }

  void anEndlessLeaseIsNotLiveAndItsExpertsAreDealt() {
    SwarmPeer endless = peer("peer-x", {2, 3}, 5);
    endless.announced.leaseUntil = std::int64_t{1} << 62;
    std::map<PeerId, std::int64_t> since{{"peer-x"_peer, 1}, {"peer-b"_peer, 1}};
    const auto live = livePeersOf({endless, peer("peer-b", {1}, 5)}, 5, kLease, {}, 0, since);
    QCOMPARE(idsOf(live), std::vector<std::string>{"peer-b"});
    const auto next = planClaims(planFor("peer-a", {0}, live, 6));
    QVERIFY2(
        std::find(next.begin(), next.end(), 2) != next.end() || std::find(next.begin(), next.end(), 3) != next.end(),
        "no orphan of the endless lease was dealt to us");
  }

  // Two peers holding the same four experts, each above its share: the one first in the round's
  // order keeps them, the other sheds two. Over 20 rounds the smaller id must not always keep.
  void theReplicaKeeperIsDrawnByRoundNotBySmallestId() {
    int smallerKept = 0;
    for (std::int64_t round = 1; round <= 20; ++round) {
      const auto a = planClaims(planFor("peer-a", {0, 1, 2, 3}, {peer("peer-b", {0, 1, 2, 3}, round)}, round));
      const auto b = planClaims(planFor("peer-b", {0, 1, 2, 3}, {peer("peer-a", {0, 1, 2, 3}, round)}, round));
      QCOMPARE(int(a.size() + b.size()), 6);  // exactly one of them shed two, both computed the same
      QCOMPARE(a.size() == 4, ranksBefore(round, "peer-a"_peer, "peer-b"_peer));
      smallerKept += a.size() == 4 ? 1 : 0;
    }
    QVERIFY2(smallerKept > 0 && smallerKept < 20,
             qPrintable(QString("peer-a kept in %1 of 20 rounds").arg(smallerKept)));
  }

  // A replica is shed only to an owner whose work was merged: the same two peers, peer-b never
  // merged (a newcomer out of step, a fresh key claiming to make owners shed), so peer-a keeps all
  // four every round; once peer-b's work counts, the draw decides again.
  void aReplicaIsNeverShedToAnOwnerWithoutMergedWork() {
    int keptWhenProven = 0;
    for (std::int64_t round = 1; round <= 20; ++round) {
      auto in = planFor("peer-a", {0, 1, 2, 3}, {peer("peer-b", {0, 1, 2, 3}, round)}, round);
      in.provenOwner = [](const PeerId& id) { return id != "peer-b"_peer; };
      QCOMPARE(planClaims(in).size(), std::size_t(4));
      in.provenOwner = [](const PeerId&) { return true; };
      keptWhenProven += planClaims(in).size() == 4 ? 1 : 0;
    }
    QVERIFY(keptWhenProven > 0 && keptWhenProven < 20);
  }

  void orphansGoToPeersRankedByClaimsThenRoundRank() {
    int selfFirst = 0;
    for (std::int64_t round = 1; round <= 20; ++round) {
      // Experts 2 and 3 are orphans; both peers hold one: the first in round order gets expert 2.
      const auto a = planClaims(planFor("peer-a", {0}, {peer("peer-b", {1}, round)}, round));
      const auto b = planClaims(planFor("peer-b", {1}, {peer("peer-a", {0}, round)}, round));
      const bool aFirst = ranksBefore(round, "peer-a"_peer, "peer-b"_peer);
      QCOMPARE(a, aFirst ? (std::vector<int>{0, 2}) : (std::vector<int>{0, 3}));
      QCOMPARE(b, aFirst ? (std::vector<int>{1, 3}) : (std::vector<int>{1, 2}));
      selfFirst += aFirst ? 1 : 0;
    }
    QVERIFY(selfFirst > 0 && selfFirst < 20);
  }

  void aBannedPeerIsNotLiveAndItsExpertsBecomeClaimable() {
    const Bans bans{{"peer-x"_peer, {1000, "norm 3e6 > bound 4"}}};
    std::map<PeerId, std::int64_t> since;
    const std::vector<SwarmPeer> peers{peer("peer-x", {2, 3}, 5), peer("peer-b", {1}, 5)};
    const auto live = livePeersOf(peers, 5, kLease, bans, 2000, since);
    QCOMPARE(idsOf(live), std::vector<std::string>{"peer-b"});
    const auto next = planClaims(planFor("peer-a", {0}, live, 6));
    QVERIFY(std::find(next.begin(), next.end(), 2) != next.end() ||
            std::find(next.begin(), next.end(), 3) != next.end());
    // An expired ban no longer excludes it.
    QCOMPARE(idsOf(livePeersOf(peers, 5, kLease, bans, 1000 + kBanExpiryMs, since)),
             (std::vector<std::string>{"peer-x", "peer-b"}));
  }

  // A claimer that stops publishing after round 4 is live through round 6 and not in round 7:
  // two rounds (5, 6) without a contribution. Its experts are dealt in the plan for round 7.
  void aSilentClaimerStopsBeingLiveAfterTwoRounds() {
    std::map<PeerId, std::int64_t> since{{"peer-s"_peer, 1}, {"peer-b"_peer, 1}};  // both claiming since round 1
    SwarmPeer silent = peer("peer-s", {2, 3}, 5);                                  // contributions for 3 and 4
    for (std::int64_t round = 5; round <= 7; ++round) {
      silent.announced.round = round;
      silent.announced.leaseUntil = round + kLease;  // it keeps renewing its lease
      const auto live = livePeersOf({silent, peer("peer-b", {1}, round)}, round, kLease, {}, 0, since);
      const auto ids = idsOf(live);
      const bool silentLive = std::find(ids.begin(), ids.end(), "peer-s") != ids.end();
      QCOMPARE(silentLive, round < 7);
      const auto next = planClaims(planFor("peer-a", {0}, live, round));
      const auto& b = live.back();
      const auto bNext = planClaims(planFor("peer-b", b.announced.claims, {peer("peer-a", {0}, round)}, round));
      // Once it is silent, experts 2 and 3 are dealt between peer-a and peer-b, one each.
      if (round == 7) {
        std::vector<int> all = next;
        all.insert(all.end(), bNext.begin(), bNext.end());
        std::sort(all.begin(), all.end());
        QCOMPARE(all, (std::vector<int>{0, 1, 2, 3}));
      } else {
        QCOMPARE(next, std::vector<int>{0});
      }
    }
    // Publishing again makes it live at once (its contribution is then gathered).
    silent.announced.contrib[7] = "peer-s-7"_content;
    QCOMPARE(livePeersOf({silent}, 7, kLease, {}, 0, since).size(), std::size_t{1});
  }

  void aNewcomerGetsTheSameRoundsToPublish() {
    std::map<PeerId, std::int64_t> since;
    SwarmPeer newcomer = peer("peer-n", {2}, 10);
    newcomer.announced.contrib.clear();
    QCOMPARE(livePeersOf({newcomer}, 10, kLease, {}, 0, since).size(), std::size_t{1});  // first seen in 10
    newcomer.announced.round = 12;
    newcomer.announced.leaseUntil = 12 + kLease;
    QCOMPARE(livePeersOf({newcomer}, 12, kLease, {}, 0, since).size(), std::size_t{0});  // 10, 11, 12: nothing
    QVERIFY(!silentAt(newcomer, 2, 0));  // the first rounds of a swarm: nobody is silent yet
  }

  void theSwarmRoundIsTheMedianOfThePeersRounds() {
    std::vector<SwarmPeer> peers{peer("a", {0}, 9), peer("b", {0}, 10), peer("c", {0}, 10)};
    peers.push_back(peer("x", {0}, std::int64_t{1} << 62));
    SwarmPeer joining = peer("n", {1}, 0);  // a newcomer before its trainer is ready
    peers.push_back(joining);
    peers.push_back(joining);
    QCOMPARE(swarmRound(peers), std::int64_t{10});
    QCOMPARE(swarmRound({joining}), std::int64_t{0});
    QCOMPARE(swarmRound({}), std::int64_t{0});
  }

  // Item 6: bans made before a restart come back from the ledger file with their reason and time;
  // one older than kBanExpiryMs does not, nor one of another run.
  // The set a majority merged is found among the contributions we know by its digest: all of
  // them, or all but one or two (those reached us, not them), larger sets first; a digest of a
  // set we do not know (a contribution we never saw) finds nothing.
  void theMajoritysMergedSetIsFoundByItsDigest() {
    using es::node::findMergedSet;
    using es::node::mergedSetDigest;
    const std::set<ContentId> known{"a1"_content, "b2"_content, "c3"_content, "d4"_content, "e5"_content, "f6"_content};
    QCOMPARE(mergedSetDigest({"b2"_content, "a1"_content}),
             mergedSetDigest({"a1"_content, "b2"_content}));                                      // a set, not an order
    QVERIFY(mergedSetDigest({"a1"_content, "b2"_content}) != mergedSetDigest({"a1b2"_content}));  // ids stay apart
    QCOMPARE(mergedSetDigest({"a1"_content}).size(), std::size_t(16));
    QCOMPARE(*findMergedSet(known, mergedSetDigest(known)), known);
    const std::set<ContentId> lessOne{"a1"_content, "b2"_content, "c3"_content, "e5"_content, "f6"_content},
        lessTwo{"a1"_content, "c3"_content, "d4"_content, "e5"_content};
    QCOMPARE(*findMergedSet(known, mergedSetDigest(lessOne)), lessOne);
    QCOMPARE(*findMergedSet(known, mergedSetDigest(lessTwo)), lessTwo);
    QVERIFY(!findMergedSet(
        known, mergedSetDigest({"a1"_content, "b2"_content, "c3"_content})));  // three missing: not searched
    QVERIFY(!findMergedSet(
        known, mergedSetDigest({"a1"_content, "b2"_content, "c3"_content, "zz"_content})));  // one we never saw
    QVERIFY(!findMergedSet(known, "0123456789abcdef"));
    std::set<ContentId> many;
    for (int i = 0; i < 65; ++i) many.insert(ContentId("id" + std::to_string(i)));
    QVERIFY(!findMergedSet(many, mergedSetDigest(many)));  // bounded: no search over 64 candidates
  }

  void bansSurviveARestartAndExpire() {
    QTemporaryDir dir;
    const std::string path = dir.filePath("expertswarm.db").toStdString();
    const std::int64_t before = es::store::nowMs();
    {
      auto ledger = es::store::Ledger::open(path, kMigrations);
      QVERIFY2(ledger.ok(), ledger.ok() ? "" : ledger.error().c_str());
      (*ledger)->joinRun("run-1", "default");
      (*ledger)->joinRun("run-2", "other");
      (*ledger)->banPeer("run-1", "peer-bad", "norm 3.1e6 > bound 4.2");
      (*ledger)->banPeer("run-1", "peer-old", "claimed expert 9");
      (*ledger)->banPeer("run-2", "peer-elsewhere", "stale");
      QVERIFY((*ledger)->flush().ok());
    }
    {  // peer-old's ban was made eight days ago
      auto db = es::store::Db::open(path, SQLITE_OPEN_READWRITE);
      QVERIFY(db.ok());
      const std::int64_t old = before - kBanExpiryMs - 24LL * 3600 * 1000;
      QVERIFY(db->exec("UPDATE peers SET banned_at = " + std::to_string(old) + " WHERE peer_id = 'peer-old'").ok());
    }
    auto ledger = es::store::Ledger::open(path, kMigrations);  // the restart
    QVERIFY(ledger.ok());
    const std::int64_t now = es::store::nowMs();
    auto bans = loadBans((*ledger)->path(), "run-1", now);
    QVERIFY2(bans.ok(), bans.ok() ? "" : bans.error().c_str());
    QCOMPARE(bans->size(), std::size_t{1});
    const Ban& ban = bans->at("peer-bad"_peer);
    QCOMPARE(ban.reason, std::string("norm 3.1e6 > bound 4.2"));
    QVERIFY(ban.at >= before && ban.at <= now);
    QVERIFY(banInForce(ban, now));
    QVERIFY(!banInForce(ban, ban.at + kBanExpiryMs));
    // At a later time the same ledger holds no ban in force.
    QVERIFY(loadBans(path, "run-1", ban.at + kBanExpiryMs)->empty());
  }

  // A peer that adopted the snapshot of round r trains only what is left of round r+1 (issue 37):
  // the others train 10 steps of 1 s (1000 tokens a step at 1000 tok/s).
  void aSnapshotTakerTrainsWhatIsLeftOfTheSwarmsRound() {
    FirstRoundPace pace{10, 1000, 4.0, {1000.0, 1000.0, 1000.0}, 1.0};
    QCOMPARE(firstRoundStepsToSkip(pace), 4);  // 6 s left: 6 of our 1 s steps
    pace.ownSecondsPerStep = 2.0;
    QCOMPARE(firstRoundStepsToSkip(pace), 7);  // twice as slow: 3 steps fit
    pace.ownSecondsPerStep = 0;                // not measured yet: their pace
    QCOMPARE(firstRoundStepsToSkip(pace), 4);
    pace.secondsSinceSwarmBegan = 0;
    QCOMPARE(firstRoundStepsToSkip(pace), 0);  // the round just began: all of it
    pace.secondsSinceSwarmBegan = 30;
    QCOMPARE(firstRoundStepsToSkip(pace), 9);  // they are done: one step, never none
    // The median rate: one liar announcing 10^9 tok/s among three does not move it.
    pace = {10, 1000, 4.0, {1000.0, 1e9, 1000.0}, 1.0};
    QCOMPARE(firstRoundStepsToSkip(pace), 4);
    // Most of them published round r+1 already: one step, whatever the clock says (their records
    // were here before we started, so we heard them "just now").
    pace = {10, 1000, 0.5, {1000.0, 1000.0, 1000.0}, 1.0, true};
    QCOMPARE(firstRoundStepsToSkip(pace), 9);
    // Nothing to go by: the whole round, as before.
    QCOMPARE(firstRoundStepsToSkip({10, 1000, 4.0, {}, 1.0}), 0);
    QCOMPARE(firstRoundStepsToSkip({10, 1000, 4.0, {0.0, -5.0}, 1.0}), 0);
    QCOMPARE(firstRoundStepsToSkip({1, 1000, 4.0, {1000.0}, 1.0}), 0);
  }
};

QTEST_APPLESS_MAIN(PeerRulesTest)
#include "tst_peer_rules.moc"
