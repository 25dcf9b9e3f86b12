// Records that flood (issue 15 item 5): every byte from the network is attacker-written, so the
// record book (p2p/record_book.h), the gossip connection limits (p2p/gossip_limits.h, the hub in
// p2p/record_gossip.h; per address: issue 37 item 7) and the node's ledger writes
// (core/node/rules/peer_sightings.h) stay bounded.
#include "core/node/rules/peer_sightings.h"
#include "p2p/gossip_limits.h"
#include "p2p/identity.h"
#include "p2p/peer_record.h"
#include "p2p/record_book.h"
#include "p2p/record_gossip.h"

#include <QElapsedTimer>
#include <QTest>

#include <set>

using namespace es::p2p;

namespace {

const std::string kRun = "5f1d3a0c9b7e2d4f6a8c0e1b3d5f7a9c2e4b6d8f";
constexpr std::int64_t kMinute = 60 * 1000;

// Distinct deterministic identities: the index spread over the seed's first bytes.
Identity identityOf(std::uint32_t index, std::uint8_t family) {
  std::array<std::uint8_t, 32> seed{};
  seed.fill(family);
  for (int i = 0; i < 4; ++i) seed[i] = static_cast<std::uint8_t>(index >> (8 * i));
  return Identity::fromSeed(seed);
}

std::string recordOf(const Identity& id, std::int64_t seq, std::int64_t round = 1) {
  PeerRecord r;
  r.run = kRun;
  r.pk = id.publicKey();
  r.seq = seq;
  r.round = round;
  r.claims = {1, 2};
  r.leaseUntil = round + 2;
  auto bytes = signRecord(r, id);
  if (!bytes) qFatal("signRecord: %s", bytes.error().c_str());
  return *bytes;
}

}  // namespace

class RecordFloodTest : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  // 100 honest peers that advanced over a minute and our own pinned record survive 20,000 valid
  // records of fresh keys; the book, its drop counts and its tombstones stay within their caps.
  void aFloodOfFreshKeysCannotPushOutEstablishedPeers() {
    QElapsedTimer clock;
    clock.start();
    RecordBook book(kRun);
    const Identity self = identityOf(0, 1);
    book.pin(self.publicKey());
    QCOMPARE(book.offer(recordOf(self, 1), "self", nullptr, 0).outcome, OfferOutcome::Accepted);
    std::vector<Identity> honest;
    for (std::uint32_t i = 0; i < 100; ++i) honest.push_back(identityOf(i, 2));
    for (const auto& id : honest)
      QCOMPARE(book.offer(recordOf(id, 1), "10.0.0.1:1", nullptr, 0).outcome, OfferOutcome::Accepted);
    for (const auto& id : honest)
      QCOMPARE(book.offer(recordOf(id, 2), "10.0.0.1:1", nullptr, kMinute + 1).outcome, OfferOutcome::Accepted);
    for (const auto& id : honest) QVERIFY(book.isProven(id.publicKey()));

    int full = 0;
    for (std::uint32_t i = 0; i < 20000; ++i) {
      const auto result = book.offer(recordOf(identityOf(i, 3), 5), "6.6.6." + std::to_string(i % 250) + ":1", nullptr,
                                     2 * kMinute + i);
      full += result.outcome == OfferOutcome::Full;
      QVERIFY(result.outcome == OfferOutcome::Accepted || result.outcome == OfferOutcome::Full);
    }
    QCOMPARE(full, 0);  // there was always an unproven flooder to evict
    QCOMPARE(book.size(), kMaxRecordKeys);
    QCOMPARE(book.evictions(), 20000 - int(kMaxRecordKeys - 101));
    for (const auto& id : honest) QCOMPARE(book.find(id.publicKey())->seq, std::int64_t(2));
    QVERIFY(book.find(self.publicKey()));
    QVERIFY(book.find(identityOf(19999, 3).publicKey()));  // the newest flooders hold the rest
    QVERIFY(!book.find(identityOf(0, 3).publicKey()));     // the oldest went first

    // Garbage from 5,000 senders: each counted, but at most kMaxDropSenders (+ "others") names kept.
    for (int i = 0; i < 5000; ++i)
      book.offer("garbage", "7.7." + std::to_string(i / 250) + "." + std::to_string(i % 250) + ":1");
    QCOMPARE(book.totalDrops(), 5000);
    QCOMPARE(book.dropsBySender().size(), kMaxDropSenders + 1);
    QCOMPARE(book.dropsFrom(kOtherSenders), 5000 - int(kMaxDropSenders));
    qInfo("flood of 20,000 records + 5,000 garbage: %lld ms", static_cast<long long>(clock.elapsed()));
  }

  // When every slot is proven (a patient flooder, or a genuinely huge swarm), new keys are
  // refused rather than evicting anyone — and expiry frees slots of keys that stop advancing.
  void aFullBookOfProvenRecordsRefusesNewKeysUntilTheyExpire() {
    RecordBook book(kRun);
    std::vector<Identity> ids;
    for (std::uint32_t i = 0; i < kMaxRecordKeys; ++i) ids.push_back(identityOf(i, 4));
    for (const auto& id : ids) book.offer(recordOf(id, 1), "a:1", nullptr, 0);
    for (const auto& id : ids) book.offer(recordOf(id, 2), "a:1", nullptr, kMinute);
    const auto newcomer = identityOf(0, 5);
    const auto refused = book.offer(recordOf(newcomer, 1), "b:1", nullptr, kMinute + 1);
    QCOMPARE(refused.outcome, OfferOutcome::Full);
    QVERIFY(!refused.counted());
    QCOMPARE(book.refusedFull(), 1);
    QCOMPARE(book.size(), kMaxRecordKeys);
    QCOMPARE(book.expire(kMinute + kRecordExpiryMs).size(), kMaxRecordKeys);
    QCOMPARE(book.tombstones(), kMaxTombstones);
    QCOMPARE(book.offer(recordOf(newcomer, 1), "b:1", nullptr, kMinute + kRecordExpiryMs).outcome,
             OfferOutcome::Accepted);
  }

  void recordsThatStopAdvancingExpireAndStayGone() {
    RecordBook book(kRun);
    const auto self = identityOf(1, 6), quiet = identityOf(2, 6), busy = identityOf(3, 6);
    book.pin(self.publicKey());
    for (const auto& id : {self, quiet, busy}) book.offer(recordOf(id, 1), "a:1", nullptr, 0);
    book.offer(recordOf(busy, 2), "a:1", nullptr, kRecordExpiryMs - 1);
    QVERIFY(book.expire(kRecordExpiryMs - 1).empty());
    const auto gone = book.expire(kRecordExpiryMs);
    QCOMPARE(gone.size(), std::size_t(1));
    QVERIFY(gone[0] == quiet.publicKey());
    QCOMPARE(book.records().size(), std::size_t(2));  // self (pinned) and busy remain
    // The old bytes still circulate: refused without blame, not resurrected.
    const auto replay = book.offer(recordOf(quiet, 1), "honest-relay:1", nullptr, kRecordExpiryMs + 1);
    QCOMPARE(replay.outcome, OfferOutcome::Expired);
    QCOMPARE(book.totalDrops(), 0);
    QVERIFY(!book.find(quiet.publicKey()));
    // It comes back when it advances again.
    QCOMPARE(book.offer(recordOf(quiet, 2), "a:1", nullptr, kRecordExpiryMs + 2).outcome, OfferOutcome::Accepted);
    QCOMPARE(book.tombstones(), std::size_t(0));
  }

  // Issue 37 item 7: a host replaying one valid record over and over (the current one, or one its
  // author has since replaced) costs a byte comparison each, not a parse and a signature check —
  // the engine thread verified those very bytes once. Outcomes and blame as before: the current
  // bytes are a Duplicate (not counted), an older seq is Stale (counted against the sender).
  void aReplayedRecordIsNotParsedAgain() {
    RecordBook book(kRun);
    const auto alice = identityOf(1, 11);
    const std::string v1 = recordOf(alice, 1), v2 = recordOf(alice, 2);
    QCOMPARE(book.offer(v1, "a:1").outcome, OfferOutcome::Accepted);
    for (int i = 0; i < 500; ++i) QCOMPARE(book.offer(v1, "replayer:1").outcome, OfferOutcome::Duplicate);
    QCOMPARE(book.parses(), std::uint64_t(1));
    QCOMPARE(book.offer(v2, "a:1").outcome, OfferOutcome::Accepted);
    for (int i = 0; i < 500; ++i) {
      QCOMPARE(book.offer(v2, "replayer:1").outcome, OfferOutcome::Duplicate);
      QCOMPARE(book.offer(v1, "replayer:1").outcome, OfferOutcome::Stale);
    }
    QCOMPARE(book.parses(), std::uint64_t(2));
    QCOMPARE(book.dropsFrom("replayer:1"), 500);
    // Bytes we hold, offered where another key is expected, are judged as before (rejected).
    const PublicKey other = identityOf(2, 11).publicKey();
    QCOMPARE(book.offer(v2, "b:1", &other).outcome, OfferOutcome::Rejected);
    QCOMPARE(book.parses(), std::uint64_t(3));
  }

  void equivocationBansTheKeyAndKeepsTheProof() {
    RecordBook book(kRun);
    const auto mallory = identityOf(1, 7);
    const std::string first = recordOf(mallory, 9, 1), second = recordOf(mallory, 9, 2);
    QCOMPARE(book.offer(first, "a:1", nullptr, 0).outcome, OfferOutcome::Accepted);
    const auto conflict = book.offer(second, "b:1", nullptr, 1);
    QCOMPARE(conflict.outcome, OfferOutcome::Conflict);
    QVERIFY(conflict.counted());
    QVERIFY(!book.find(mallory.publicKey()));
    QVERIFY(book.records().empty());
    QVERIFY(book.isBanned(mallory.publicKey()));
    QCOMPARE(book.bannedKeys().at(mallory.publicKey()).first, first);
    QCOMPARE(book.bannedKeys().at(mallory.publicKey()).second, second);
    // Refused from then on, whatever seq; relays of its records are not blamed.
    QCOMPARE(book.offer(recordOf(mallory, 10), "a:1", nullptr, 2).outcome, OfferOutcome::Banned);
    QCOMPARE(book.offer(first, "a:1", nullptr, 3).outcome, OfferOutcome::Banned);
    QCOMPARE(book.totalDrops(), 1);
    QVERIFY(!book.find(mallory.publicKey()));
  }

  void ourOwnKeyIsNeverBanned() {
    RecordBook book(kRun);
    const auto self = identityOf(2, 7);
    book.pin(self.publicKey());
    book.offer(recordOf(self, 9, 1), "self");
    QCOMPARE(book.offer(recordOf(self, 9, 2), "a:1").outcome, OfferOutcome::Conflict);
    QVERIFY(!book.isBanned(self.publicKey()));
    QCOMPARE(book.find(self.publicKey())->round, std::int64_t(1));
  }

  void bansOfAnEquivocationFloodAreBounded() {
    RecordBook book(kRun);
    for (std::uint32_t i = 0; i < kMaxBannedKeys + 100; ++i) {
      const auto id = identityOf(i, 8);
      book.offer(recordOf(id, 1, 1), "a:1");
      QCOMPARE(book.offer(recordOf(id, 1, 2), "a:1").outcome, OfferOutcome::Conflict);
    }
    QCOMPARE(book.bannedKeys().size(), kMaxBannedKeys);
    QCOMPARE(book.size(), std::size_t(0));
  }

  void bep44PollsABoundedRoundRobinBatch() {
    RecordBook book(kRun);
    const auto self = identityOf(0, 9);
    book.offer(recordOf(self, 1), "self");
    for (std::uint32_t i = 1; i < 100; ++i) book.offer(recordOf(identityOf(i, 9), 1), "a:1");
    std::map<PublicKey, int> polled;
    for (int cycle = 0; cycle < 3; ++cycle) {  // 3 × 32 visits: 96 of the 100 keys, none twice
      const auto batch = book.nextPollBatch(32, self.publicKey());
      QVERIFY(batch.size() <= 32 && batch.size() >= 31);
      for (const auto& key : batch) ++polled[key];
    }
    QVERIFY(polled.size() >= 95);
    for (const auto& [key, times] : polled) QCOMPARE(times, 1);
    for (const auto& key : book.nextPollBatch(32, self.publicKey())) ++polled[key];  // wraps around
    QCOMPARE(polled.size(), std::size_t(99));
    QVERIFY(!polled.count(self.publicKey()));
  }

  void theTokenBucketAllowsTheGreetingThenTheRate() {
    TokenBucket bucket = gossipBucket(1000);
    int taken = 0;
    while (bucket.take(1000)) ++taken;
    QCOMPARE(taken, int(kGossipGreeting + kGossipBurst));
    QVERIFY(!bucket.take(1000));
    taken = 0;
    while (bucket.take(2000)) ++taken;  // one second later
    QCOMPARE(taken, int(kGossipMessagesPerSecond));
    taken = 0;
    while (bucket.take(3'600'000)) ++taken;  // an hour idle: no more than the burst
    QCOMPARE(taken, int(kGossipBurst));
  }

  void theGossipInboxAndBadSenderMarksAreBounded() {
    GossipHub hub;
    for (std::size_t i = 0; i < kMaxGossipInbox; ++i) QVERIFY(queueInbound(hub, {"x", "a:1"}));
    QVERIFY(!queueInbound(hub, {"newest", "a:1"}));
    QCOMPARE(hub.inbox.size(), kMaxGossipInbox);
    QCOMPARE(hub.inboxDropped, 1);
    QCOMPARE(hub.inbox.back().bytes, std::string("x"));
    for (std::size_t i = 0; i < kMaxBadSenders + 10; ++i) markBadSender(hub, "9.9.9.9:" + std::to_string(i));
    markBadSender(hub, "9.9.9.9:265");  // again: not twice
    QCOMPARE(hub.badSenders.size(), kMaxBadSenders);
    QVERIFY(isBadSender(hub, "9.9.9.9:265"));
    QVERIFY(!isBadSender(hub, "9.9.9.9:0"));  // the oldest mark made room
  }

  // Issue 37 item 7: one host cannot multiply the per-connection limits by opening connections.
  void gossipConnectionsAreCappedPerAddress() {
    AddressSlots slots(kMaxGossipConnectionsPerAddress);
    for (int i = 0; i < kMaxGossipConnectionsPerAddress; ++i) QVERIFY(slots.take("203.0.113.5"));
    QVERIFY(!slots.take("203.0.113.5"));  // one more from that address: refused
    QVERIFY(slots.take("203.0.113.6"));   // another address is not held back by it
    QCOMPARE(slots.held("203.0.113.5"), kMaxGossipConnectionsPerAddress);
    QCOMPARE(slots.most(), kMaxGossipConnectionsPerAddress);
    slots.give("203.0.113.5");
    QVERIFY(slots.take("203.0.113.5"));  // a closed connection's slot is free again
    // Counted by IPv4 address (IPv4-mapped ones too) and by IPv6 /64: one host holds a whole /64.
    const auto key = [](const char* text) { return gossipAddressKey(lt::make_address(text)); };
    QCOMPARE(key("2001:db8:1:2:aaaa::1"), key("2001:db8:1:2:bbbb::9"));
    QVERIFY(key("2001:db8:1:3::1") != key("2001:db8:1:2::1"));
    QCOMPARE(key("::ffff:203.0.113.5"), std::string("203.0.113.5"));
    // A same-host swarm (everyone on 127.0.0.1) is not capped unless asked; the default is.
    QCOMPARE(gossipConnectionsPerAddress(false, 0), kMaxGossipConnectionsPerAddress);
    QCOMPARE(gossipConnectionsPerAddress(true, 0), 0);
    QCOMPARE(gossipConnectionsPerAddress(true, 2), 2);
    AddressSlots loopback(gossipConnectionsPerAddress(true, 0));
    for (int i = 0; i < 64; ++i) QVERIFY(loopback.take("127.0.0.1"));
  }

  void theLedgerSeesAPeerWhenItChangedAtMostOnceAMinute() {
    es::node::PeerSightings s;
    const auto round = [&](std::int64_t now, std::vector<std::pair<std::string, std::int64_t>> peers) {
      int writes = 0;
      s.begin();
      for (const auto& [id, seq] : peers) writes += s.due(es::PeerId(id), seq, now);
      s.end();
      return writes;
    };
    QCOMPARE(round(0, {{"a", 1}, {"b", 1}}), 2);            // new
    QCOMPARE(round(1000, {{"a", 1}, {"b", 1}}), 0);         // nothing changed
    QCOMPARE(round(2000, {{"a", 2}, {"b", 1}}), 0);         // changed, but written a second ago
    QCOMPARE(round(kMinute, {{"a", 2}, {"b", 1}}), 1);      // a: changed and a minute old
    QCOMPARE(round(3 * kMinute, {{"a", 2}, {"b", 1}}), 0);  // unchanged: never rewritten
    QCOMPARE(round(3 * kMinute, {{"b", 1}}), 0);
    QCOMPARE(s.size(), std::size_t(1));  // a is gone: forgotten
    // 2,000 peers × 100 events in a minute: 2,000 writes, not 200,000.
    int writes = 0;
    for (int event = 0; event < 100; ++event) {
      std::vector<std::pair<std::string, std::int64_t>> peers;
      for (int p = 0; p < 2000; ++p) peers.emplace_back(std::to_string(p), event);
      writes += round(10 * kMinute + event * 500, peers);
    }
    QCOMPARE(writes, 2000);
  }
};

QTEST_APPLESS_MAIN(RecordFloodTest)
#include "tst_record_book.moc"
