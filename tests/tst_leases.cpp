// Specification of expert leases (p2p/leases.h): the ownership map every peer derives from the
// same records, and the experts a peer chooses to claim.
#include "p2p/identity.h"
#include "p2p/leases.h"

#include <QTest>

#include <algorithm>
#include <limits>
#include <random>
#include <set>

using es::p2p::Identity;
using es::p2p::PeerRecord;
using es::p2p::PublicKey;

namespace {

PublicKey keyOf(std::uint8_t fill) {
  std::array<std::uint8_t, 32> seed{};
  seed.fill(fill);
  return Identity::fromSeed(seed).publicKey();
}

constexpr int kLeaseRounds = 3;  // the run's lease_rounds in these tests

// An honest record: its lease is its round + lease_rounds.
PeerRecord claiming(const PublicKey& key, std::vector<int> claims, std::int64_t leaseUntil = kLeaseRounds) {
  PeerRecord r;
  r.pk = key;
  r.round = leaseUntil - kLeaseRounds;
  r.claims = std::move(claims);
  r.leaseUntil = leaseUntil;
  return r;
}

}  // namespace

class LeasesTest : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void ownershipMapDoesNotDependOnRecordOrder() {
    std::vector<PeerRecord> records;
    std::mt19937 rng(7);
    for (std::uint8_t i = 1; i <= 8; ++i) {
      std::set<int> claims;
      for (int k = 0; k < 4; ++k) claims.insert(static_cast<int>(rng() % 12));
      records.push_back(claiming(keyOf(i), {claims.begin(), claims.end()}));
    }
    const auto reference = es::p2p::ownershipMap(records, 1, 12, kLeaseRounds);
    QCOMPARE(reference.owners.size(), std::size_t(12));
    for (const auto& owners : reference.owners) QVERIFY(std::is_sorted(owners.begin(), owners.end()));
    for (int trial = 0; trial < 20; ++trial) {
      std::shuffle(records.begin(), records.end(), rng);
      QVERIFY(es::p2p::ownershipMap(records, 1, 12, kLeaseRounds) == reference);
    }
  }

  void aLeaseHoldsThroughItsLastRoundThenFreesTheExpert() {
    const std::vector<PeerRecord> records = {claiming(keyOf(1), {0, 1}, 5), claiming(keyOf(2), {1}, 4)};
    const auto atFour = es::p2p::ownershipMap(records, 4, 3, kLeaseRounds);
    QCOMPARE(atFour.ownerCount(0), 1);
    QCOMPARE(atFour.ownerCount(1), 2);
    const auto atFive = es::p2p::ownershipMap(records, 5, 3, kLeaseRounds);
    QCOMPARE(atFive.ownerCount(1), 1);
    QCOMPARE(atFive.owners[1], std::vector<PublicKey>{keyOf(1)});
    const auto atSix = es::p2p::ownershipMap(records, 6, 3, kLeaseRounds);
    QCOMPARE(atSix.ownerCount(0), 0);
    QCOMPARE(atSix.ownerCount(1), 0);
  }

  void claimsOutsideTheExpertRangeAreIgnored() {
    const auto map = es::p2p::ownershipMap({claiming(keyOf(1), {-1, 2, 8, 100})}, 0, 8, kLeaseRounds);
    QCOMPARE(map.owners.size(), std::size_t(8));
    for (int e = 0; e < 8; ++e) QCOMPARE(map.ownerCount(e), e == 2 ? 1 : 0);
    QVERIFY(es::p2p::ownershipMap({claiming(keyOf(1), {0})}, 0, 0, kLeaseRounds).owners.empty());
  }

  void aNewcomerTakesTheUnownedExperts() {
    const std::vector<PeerRecord> records = {claiming(keyOf(1), {0, 1}), claiming(keyOf(2), {2, 3}),
                                             claiming(keyOf(3), {4, 5})};
    QCOMPARE(es::p2p::chooseClaims(records, keyOf(4), 3, 8, 2, kLeaseRounds), (std::vector<int>{6, 7}));
  }

  void chooseClaimsIgnoresTheChoosersOwnRecord() {
    // Re-claiming is stable: self's current lease on 6 and 7 does not count against them.
    const std::vector<PeerRecord> records = {claiming(keyOf(1), {0, 1}), claiming(keyOf(2), {2, 3}),
                                             claiming(keyOf(3), {4, 5}), claiming(keyOf(4), {6, 7})};
    QCOMPARE(es::p2p::chooseClaims(records, keyOf(4), 3, 8, 2, kLeaseRounds), (std::vector<int>{6, 7}));
  }

  void chooseClaimsTakesTheLeastOwnedExpertsDeterministically() {
    std::mt19937 rng(11);
    std::vector<PeerRecord> records;
    for (std::uint8_t i = 1; i <= 10; ++i) {
      std::set<int> claims;
      for (int k = 0; k < 3; ++k) claims.insert(static_cast<int>(rng() % 16));
      records.push_back(claiming(keyOf(i), {claims.begin(), claims.end()}));
    }
    const auto map = es::p2p::ownershipMap(records, 0, 16, kLeaseRounds);
    for (std::uint8_t chooser = 50; chooser < 56; ++chooser) {
      const PublicKey self = keyOf(chooser);
      for (int count = 1; count <= 16; ++count) {
        const std::vector<int> chosen = es::p2p::chooseClaims(records, self, 0, 16, count, kLeaseRounds);
        QCOMPARE(chosen.size(), std::size_t(count));
        QVERIFY(std::adjacent_find(chosen.begin(), chosen.end(), std::greater_equal<int>()) == chosen.end());
        int worstChosen = 0;
        for (const int e : chosen) worstChosen = std::max(worstChosen, map.ownerCount(e));
        for (int e = 0; e < 16; ++e) {
          if (!std::binary_search(chosen.begin(), chosen.end(), e)) QVERIFY(map.ownerCount(e) >= worstChosen);
        }
        std::vector<PeerRecord> shuffled = records;
        std::shuffle(shuffled.begin(), shuffled.end(), rng);
        QCOMPARE(es::p2p::chooseClaims(shuffled, self, 0, 16, count, kLeaseRounds), chosen);
      }
    }
  }

  void peersBreakTiesDifferently() {
    std::set<std::vector<int>> choices;
    for (std::uint8_t i = 1; i <= 8; ++i) choices.insert(es::p2p::chooseClaims({}, keyOf(i), 0, 16, 2, kLeaseRounds));
    QVERIFY2(choices.size() >= 4, "eight peers facing sixteen free experts should mostly pick different ones");
  }

  // The tie-break is BLAKE2b-256(pk ‖ expert as 4 big-endian bytes) ascending; the expected order
  // for the RFC 8032 test key was computed with Python's hashlib, so other clients can agree.
  void tieBreakFollowsTheStatedHash() {
    const auto key = es::p2p::publicKeyFromHex("d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a");
    QVERIFY(key);
    // Hash order of experts 0..15: 2 12 4 11 15 8 1 0 ...
    QCOMPARE(es::p2p::chooseClaims({}, *key, 0, 16, 3, kLeaseRounds), (std::vector<int>{2, 4, 12}));
    // Owned experts go last whatever their hash.
    QCOMPARE(es::p2p::chooseClaims({claiming(keyOf(1), {2})}, *key, 0, 16, 3, kLeaseRounds),
             (std::vector<int>{4, 11, 12}));
  }

  // Issue 15 item 2: a lease longer than the record's round + lease_rounds + 1 (slack) owns
  // nothing, however far it reaches; so does one that holds from a far-future round.
  void anEndlessLeaseOwnsNothing() {
    PeerRecord endless = claiming(keyOf(1), {0, 1, 2, 3});
    endless.round = 5;
    endless.leaseUntil = std::int64_t{1} << 62;
    PeerRecord future = claiming(keyOf(2), {0, 1});
    future.round = std::int64_t{1} << 62;
    future.leaseUntil = future.round + kLeaseRounds;
    PeerRecord overflow = claiming(keyOf(3), {2});
    overflow.round = std::numeric_limits<std::int64_t>::max() - 1;
    overflow.leaseUntil = std::numeric_limits<std::int64_t>::max();
    const auto map = es::p2p::ownershipMap({endless, future, overflow}, 5, 4, kLeaseRounds);
    for (int e = 0; e < 4; ++e) QCOMPARE(map.ownerCount(e), 0);
    // One round more than honest (lease_rounds + 1) is the slack for a peer a round ahead; two is not.
    endless.leaseUntil = endless.round + kLeaseRounds + 1;
    QCOMPARE(es::p2p::ownershipMap({endless}, 5, 4, kLeaseRounds).ownerCount(0), 1);
    endless.leaseUntil = endless.round + kLeaseRounds + 2;
    QCOMPARE(es::p2p::ownershipMap({endless}, 5, 4, kLeaseRounds).ownerCount(0), 0);
    // A record one round ahead of the judge holds; two rounds ahead reaches past round + lease + slack.
    QCOMPARE(es::p2p::ownershipMap({claiming(keyOf(4), {1}, 6 + kLeaseRounds)}, 5, 4, kLeaseRounds).ownerCount(1), 1);
    QCOMPARE(es::p2p::ownershipMap({claiming(keyOf(4), {1}, 7 + kLeaseRounds)}, 5, 4, kLeaseRounds).ownerCount(1), 0);
  }

  // A newcomer takes the experts of peers it excludes (banned, silent) as if they had no owner.
  void excludedPeersOwnNothing() {
    const std::vector<PeerRecord> records = {claiming(keyOf(1), {0, 1}, 5), claiming(keyOf(2), {0, 1}, 5),
                                             claiming(keyOf(3), {2, 3}, 5)};
    QCOMPARE(es::p2p::chooseClaims(records, keyOf(4), 3, 4, 2, kLeaseRounds), (std::vector<int>{2, 3}));
    QCOMPARE(es::p2p::chooseClaims(records, keyOf(4), 3, 4, 2, kLeaseRounds, {keyOf(1), keyOf(2)}),
             (std::vector<int>{0, 1}));
  }

  void chooseClaimsCapsTheCountAtTheExperts() {
    QCOMPARE(es::p2p::chooseClaims({}, keyOf(1), 0, 4, 10, kLeaseRounds), (std::vector<int>{0, 1, 2, 3}));
    QVERIFY(es::p2p::chooseClaims({}, keyOf(1), 0, 4, 0, kLeaseRounds).empty());
    QVERIFY(es::p2p::chooseClaims({}, keyOf(1), 0, 0, 3, kLeaseRounds).empty());
    QVERIFY(es::p2p::chooseClaims({}, keyOf(1), 0, 4, -2, kLeaseRounds).empty());
  }

  void claimBudgetIsWhatFitsWithinItsBounds() {
    constexpr std::int64_t GiB = 1LL << 30;
    QCOMPARE(es::p2p::claimBudget(3 * GiB + GiB / 2, GiB, 1, 8), 3);
    QCOMPARE(es::p2p::claimBudget(100 * GiB, GiB, 1, 8), 8);
    QCOMPARE(es::p2p::claimBudget(0, GiB, 1, 8), 1);
    QCOMPARE(es::p2p::claimBudget(0, GiB, 0, 8), 0);
    QCOMPARE(es::p2p::claimBudget(-GiB, GiB, 2, 8), 2);
    QCOMPARE(es::p2p::claimBudget(0, GiB, 12, 8), 8);
    QCOMPARE(es::p2p::claimBudget(GiB, 0, 1, 8), 8);
    QCOMPARE(es::p2p::claimBudget(std::numeric_limits<std::int64_t>::max(), 1, 1, 64), 64);
  }
};

QTEST_APPLESS_MAIN(LeasesTest)
#include "tst_leases.moc"
