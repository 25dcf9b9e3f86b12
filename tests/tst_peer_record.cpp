// Specification of signed peer records (p2p/peer_record.h) and of the record book that keeps the
// newest valid one per key (p2p/record_book.h). Forged records are written by hand in bencode, so
// these tests check the wire format independently of the codec the implementation uses.
#include "core/node/own_record.h"
#include "p2p/announcement_record.h"
#include "p2p/identity.h"
#include "p2p/identity_work.h"
#include "p2p/peer_record.h"
#include "p2p/record_book.h"

#include <QTest>

#include <algorithm>
#include <random>

using es::p2p::Identity;
using es::p2p::OfferOutcome;
using es::p2p::PeerRecord;
using es::p2p::PublicKey;
using es::p2p::RecordBook;
using es::p2p::RecordError;

namespace {

const std::string kRun = "5f1d3a0c9b7e2d4f6a8c0e1b3d5f7a9c2e4b6d8f";
const std::string kHashA(40, 'a');
const std::string kHashB = "0123456789abcdef0123456789abcdef01234567";

Identity identityOf(std::uint8_t fill) {
  std::array<std::uint8_t, 32> seed{};
  seed.fill(fill);
  return Identity::fromSeed(seed);
}

PeerRecord sampleRecord(const Identity& identity, std::int64_t seq = 7) {
  PeerRecord r;
  r.run = kRun;
  r.pk = identity.publicKey();
  r.seq = seq;
  r.round = 12;
  r.claims = {3, 5, 8};
  r.leaseUntil = 14;
  r.contrib = {{9, kHashA}, {10, kHashB}};  // "10" sorts before "9" on the wire
  r.snapshot = {{8, kHashB}};
  r.merged = {{11, "0123456789abcdef"}, {10, "fedcba9876543210"}};
  r.sets = {{11, "00112233445566778899aabbccddeeff"}, {10, "ffeeddccbbaa9988"}};
  r.outputs = {{11, kHashA}};
  r.stats = {1200, 4915200, 31415, 2048};
  r.freeMemory = 7LL << 30;
  r.work = 12345;
  return r;
}

// --- a hand-written bencoder: fields are emitted in the order given ---
using Fields = std::vector<std::pair<std::string, std::string>>;  // key → encoded value

std::string bstr(const std::string& s) { return std::to_string(s.size()) + ":" + s; }
std::string bint(long long i) { return "i" + std::to_string(i) + "e"; }
std::string bdict(const Fields& fields) {
  std::string out = "d";
  for (const auto& [key, value] : fields) out += bstr(key) + value;
  return out + "e";
}
Fields sorted(Fields fields) {
  std::sort(fields.begin(), fields.end());
  return fields;
}
template <std::size_t N>
std::string raw(const std::array<std::uint8_t, N>& bytes) {
  return std::string(reinterpret_cast<const char*>(bytes.data()), N);
}
std::string roundDict(const std::map<std::int64_t, std::string>& byRound) {
  Fields fields;
  for (const auto& [round, hash] : byRound) fields.emplace_back(std::to_string(round), bstr(hash));
  return bdict(sorted(fields));
}

// Info-hashes travel as their bytes (20 here: kHashA/kHashB are v1-sized).
std::string hashBytes(const std::string& hex) {
  return QByteArray::fromHex(QByteArray::fromStdString(hex)).toStdString();
}
std::string hashDict(const std::map<std::int64_t, std::string>& byRound) {
  Fields fields;
  for (const auto& [round, hash] : byRound) fields.emplace_back(std::to_string(round), bstr(hashBytes(hash)));
  return bdict(sorted(fields));
}

Fields payloadFields(const PeerRecord& r, long long version = es::p2p::kRecordVersion) {
  std::string claims = "l";
  for (const int c : r.claims) claims += bint(c);
  claims += "e";
  const std::string stats = bdict({{"loss_e4", bint(r.stats.lossE4)},
                                   {"steps", bint(r.stats.steps)},
                                   {"tokens", bint(r.stats.tokens)},
                                   {"tps", bint(r.stats.tokensPerSecond)}});
  return {{"claims", claims},
          {"contrib", hashDict(r.contrib)},
          {"lease", bint(r.leaseUntil)},
          {"mem", bint(r.freeMemory)},
          {"merged", roundDict(r.merged)},
          {"outputs", hashDict(r.outputs)},
          {"pk", bstr(raw(r.pk))},
          {"round", bint(r.round)},
          {"run", bstr(r.run)},
          {"seq", bint(r.seq)},
          {"sets", roundDict(r.sets)},
          {"snapshot", hashDict(r.snapshot)},
          {"stats", stats},
          {"v", bint(version)},
          {"work", bint(r.work)}};
}

// Signs the fields as given (the signer need not be the record's key) and adds `sig` in order.
Fields signedFields(const Fields& payload, const Identity& signer) {
  Fields fields = payload;
  fields.emplace_back("sig", bstr(raw(signer.sign(bdict(payload)))));
  return sorted(fields);
}

Fields withField(Fields fields, const std::string& key, const std::string& value) {
  fields.erase(std::remove_if(fields.begin(), fields.end(), [&](const auto& f) { return f.first == key; }),
               fields.end());
  if (!value.empty()) fields.emplace_back(key, value);
  return sorted(fields);
}

std::string signedBytes(const PeerRecord& record, const Identity& identity) {
  const auto bytes = es::p2p::signRecord(record, identity);
  if (!bytes) qFatal("signRecord: %s", bytes.error().c_str());
  return bytes.value();
}

std::string replaceOnce(std::string bytes, const std::string& from, const std::string& to) {
  const auto at = bytes.find(from);
  if (at == std::string::npos) qFatal("'%s' not in record", from.c_str());
  return bytes.replace(at, from.size(), to);
}

const char* describe(const es::p2p::ParsedRecord& parsed) {
  static std::string text;
  text = parsed.ok ? "accepted" : std::string(recordErrorName(parsed.rejection.error)) + ": " + parsed.rejection.detail;
  return text.c_str();
}

void expectRejected(const std::string& bytes, RecordError error, const PublicKey* expectedKey = nullptr) {
  const auto parsed = es::p2p::parseRecord(bytes, kRun, expectedKey);
  QVERIFY2(!parsed.ok && parsed.rejection.error == error, describe(parsed));
}

}  // namespace

Q_DECLARE_METATYPE(std::string)

class PeerRecordTest : public QObject {
  Q_OBJECT

  const Identity alice_ = identityOf(0xA1);
  const Identity bob_ = identityOf(0xB0);

 private Q_SLOTS:
  // What the node announces survives the trip through a signed record (p2p/announcement_record.h):
  // every field, the ids typed again on the way back; claims go out sorted, the loss as loss × 10⁴.
  void anAnnouncementSurvivesItsSignedRecord() {
    es::node::Announcement a;
    a.round = 12;
    a.claims = {8, 3, 5};
    a.leaseUntil = 14;
    a.contrib = {{10, es::ContentId(kHashB)}, {11, es::ContentId(kHashA)}};
    a.snapshot = {{10, es::ContentId(kHashA)}};
    a.merged = {{10, "00112233445566778899aabbccddeeff"}, {11, "ffeeddccbbaa99887766554433221100"}};
    a.sets = {{11, "0123456789abcdef"}};
    a.outputs = {{11, es::ContentId(kHashB)}};
    a.steps = 240;
    a.loss = 3.14159;
    a.tokensPerSecond = 5120.4;
    PeerRecord record = es::p2p::recordOf(a);
    QCOMPARE(record.claims, (std::vector<int>{3, 5, 8}));
    QCOMPARE(record.stats.lossE4, std::int64_t(31416));
    record.run = kRun;
    record.pk = alice_.publicKey();
    record.seq = 1;
    const auto parsed = es::p2p::parseRecord(signedBytes(record, alice_), kRun, &alice_.publicKey());
    QVERIFY2(parsed.ok, describe(parsed));
    const auto back = es::p2p::announcementOf(parsed.record);
    QCOMPARE(back.round, a.round);
    QCOMPARE(back.claims, (std::vector<int>{3, 5, 8}));
    QCOMPARE(back.leaseUntil, a.leaseUntil);
    QVERIFY(back.contrib == a.contrib);
    QVERIFY(back.snapshot == a.snapshot);
    QCOMPARE(back.merged, a.merged);
    QCOMPARE(back.sets, a.sets);
    QVERIFY(back.outputs == a.outputs);
    QCOMPARE(back.steps, a.steps);
    QCOMPARE(back.loss, 3.1416);
    QCOMPARE(back.tokensPerSecond, 5120.0);
  }

  void signedRecordParsesBackToEveryField() {
    const PeerRecord record = sampleRecord(alice_);
    const auto parsed = es::p2p::parseRecord(signedBytes(record, alice_), kRun, &alice_.publicKey());
    QVERIFY2(parsed.ok, describe(parsed));
    QVERIFY(parsed.record == record);
    QCOMPARE(parsed.record.contrib.at(10), kHashB);
    QCOMPARE(parsed.record.stats.lossE4, std::int64_t(31415));

    PeerRecord empty;  // no claims, no contributions: still a valid record
    empty.run = kRun;
    empty.pk = bob_.publicKey();
    const auto parsedEmpty = es::p2p::parseRecord(signedBytes(empty, bob_), kRun);
    QVERIFY2(parsedEmpty.ok, describe(parsedEmpty));
    QVERIFY(parsedEmpty.record == empty);
  }

  void wireFormatIsTheCanonicalBencodingOfTheSpecifiedKeys() {
    const PeerRecord record = sampleRecord(alice_);
    QCOMPARE(es::p2p::recordPayload(record), bdict(payloadFields(record)));
    QCOMPARE(signedBytes(record, alice_), bdict(signedFields(payloadFields(record), alice_)));
  }

  void signRecordRefusesAForeignKeyAndInvalidValues() {
    QVERIFY(!es::p2p::signRecord(sampleRecord(alice_), bob_).ok());
    PeerRecord unsorted = sampleRecord(alice_);
    unsorted.claims = {5, 3};
    QVERIFY(!es::p2p::signRecord(unsorted, alice_).ok());
    PeerRecord badHash = sampleRecord(alice_);
    badHash.contrib[11] = "not-a-hash";
    QVERIFY(!es::p2p::signRecord(badHash, alice_).ok());
    PeerRecord negative = sampleRecord(alice_);
    negative.seq = -1;
    QVERIFY(!es::p2p::signRecord(negative, alice_).ok());
    // A merged-state fingerprint is 16–64 lower-case hex digits, nothing else.
    for (const std::string& fingerprint :
         std::vector<std::string>{"0123456789ABCDEF", "0123456789abcde", std::string(65, 'a'), "0123456789abcdeg"}) {
      PeerRecord badFingerprint = sampleRecord(alice_);
      badFingerprint.merged[12] = fingerprint;
      QVERIFY2(!es::p2p::signRecord(badFingerprint, alice_).ok(), fingerprint.c_str());
    }
    PeerRecord negativeMerged = sampleRecord(alice_);
    negativeMerged.merged[-1] = "0123456789abcdef";
    QVERIFY(!es::p2p::signRecord(negativeMerged, alice_).ok());
  }

  void recordsAreAtMostAThousandBytes() {
    PeerRecord record = sampleRecord(alice_);
    record.run = std::string(200, 'r');
    const std::size_t base = signedBytes(record, alice_).size();
    record.run.resize(200 + (es::p2p::kMaxRecordBytes - base), 'r');  // same digit count: grows 1:1
    const std::string exact = signedBytes(record, alice_);
    QCOMPARE(exact.size(), es::p2p::kMaxRecordBytes);
    QVERIFY(es::p2p::parseRecord(exact, record.run).ok);

    PeerRecord over = record;
    over.run += 'r';
    const auto refused = es::p2p::signRecord(over, alice_);
    QVERIFY(!refused.ok());
    QVERIFY2(refused.error().find("1001") != std::string::npos, refused.error().c_str());

    PeerRecord history = sampleRecord(alice_);
    for (int round = 0; round < 30; ++round) history.contrib[round] = kHashA;
    QVERIFY(!es::p2p::signRecord(history, alice_).ok());

    // Size is checked first: even a valid record with one byte appended is Oversize, not Garbage.
    const auto parsed = es::p2p::parseRecord(exact + "e", record.run);
    QVERIFY2(!parsed.ok && parsed.rejection.error == RecordError::Oversize, describe(parsed));
    expectRejected(std::string(5000, 'd'), RecordError::Oversize);
  }

  // What the node announces at its fullest still signs: OwnRecord keeps 3 contributions, 2
  // snapshots, 2 states, sets and reducer indexes (v2 info-hashes), whatever it holds; every
  // expert of the largest preset (gpu-1b: 16) claimed; counters at their largest plausible values.
  void recordsOfTheFullestAnnouncementFit() {
    es::node::OwnRecord own;
    own.round = 999999;
    for (int e = 0; e < 16; ++e) own.claims.push_back(e);
    const std::string hash64(64, 'a');
    for (std::int64_t r = 999990; r < 1000000; ++r) {
      own.contrib[r] = es::ContentId(hash64);
      own.snapshots[r] = es::ContentId(hash64);
      own.outputs[r] = es::ContentId(hash64);
      own.noteFingerprint(r, "0123456789abcdef");
      own.noteSetDigest(r, "fedcba9876543210");
    }
    own.steps = 999999999;
    own.loss = 99.9999;
    own.tokensPerSecond = 9.99e9;
    PeerRecord record = es::p2p::recordOf(own.announcement(false, 1000));
    record.run = kHashA + kHashA.substr(0, 24);  // a run id: 64 hex digits
    record.pk = alice_.publicKey();
    record.seq = 9999999999999;  // milliseconds since the epoch, to the year 2286
    record.freeMemory = 999LL << 30;
    record.stats.tokens = 999999999999999;
    record.work = 999999999999;
    QCOMPARE(record.contrib.size(), std::size_t(3));
    QCOMPARE(record.outputs.size(), std::size_t(2));
    const auto bytes = es::p2p::signRecord(record, alice_);
    QVERIFY2(bytes.ok(), bytes.ok() ? "" : bytes.error().c_str());
    qInfo("the fullest record: %zu of %zu bytes", bytes->size(), es::p2p::kMaxRecordBytes);
  }

  void rejectsAFlippedSignatureByte() {
    const PeerRecord record = sampleRecord(alice_);
    const std::string sig = raw(alice_.sign(es::p2p::recordPayload(record)));
    std::string flipped = sig;
    flipped[20] ^= 0x04;
    expectRejected(replaceOnce(signedBytes(record, alice_), sig, flipped), RecordError::BadSignature);
  }

  void rejectsATamperedFieldUnderTheOriginalSignature() {
    const std::string bytes = signedBytes(sampleRecord(alice_), alice_);
    expectRejected(replaceOnce(bytes, "6:claimsli3ei5ei8ee", "6:claimsli3ei6ei8ee"), RecordError::BadSignature);
    expectRejected(replaceOnce(bytes, "5:leasei14e", "5:leasei99e"), RecordError::BadSignature);
  }

  void rejectsARecordSignedByAnotherKey() {
    // pk says Alice, Bob signed: a peer cannot speak for another.
    const std::string forged = bdict(signedFields(payloadFields(sampleRecord(alice_)), bob_));
    expectRejected(forged, RecordError::BadSignature);
  }

  void rejectsAKeyOtherThanTheOneItCameUnder() {
    const std::string bytes = signedBytes(sampleRecord(alice_), alice_);
    expectRejected(bytes, RecordError::WrongKey, &bob_.publicKey());
    QVERIFY(es::p2p::parseRecord(bytes, kRun, &alice_.publicKey()).ok);
  }

  void rejectsAnotherRun() {
    PeerRecord record = sampleRecord(alice_);
    record.run = "another run";
    expectRejected(signedBytes(record, alice_), RecordError::WrongRun);
  }

  void rejectsAnotherVersionEvenWhenSigned() {
    const Fields payload = payloadFields(sampleRecord(alice_), es::p2p::kRecordVersion + 1);
    expectRejected(bdict(signedFields(payload, alice_)), RecordError::BadVersion);
  }

  // Identity work (p2p/identity_work.h): a key without the run's bits is refused — before the
  // signature is checked, so even a badly signed record with little work says "too little work".
  void identityWorkIsCheckedBeforeTheSignature() {
    const int bits = 12;
    PeerRecord record = sampleRecord(alice_);
    record.work = es::p2p::solveIdentityWork(alice_.publicKey(), bits);
    QVERIFY(es::p2p::identityWorkBits(alice_.publicKey(), record.work) >= bits);
    const std::string proven = signedBytes(record, alice_);
    QVERIFY2(es::p2p::parseRecord(proven, kRun, nullptr, bits).ok,
             describe(es::p2p::parseRecord(proven, kRun, nullptr, bits)));
    // The same nonce proves nothing for another key (the puzzle hashes the key).
    PeerRecord borrowed = sampleRecord(bob_);
    borrowed.work = record.work;
    QVERIFY(es::p2p::identityWorkBits(bob_.publicKey(), borrowed.work) < bits);  // these seeds: 1 in 4096 otherwise
    const auto parsedBorrowed = es::p2p::parseRecord(signedBytes(borrowed, bob_), kRun, nullptr, bits);
    QVERIFY2(!parsedBorrowed.ok && parsedBorrowed.rejection.error == RecordError::LittleWork, describe(parsedBorrowed));
    record.work = 0;
    const std::string unproven = signedBytes(record, alice_);
    QVERIFY(es::p2p::parseRecord(unproven, kRun).ok);  // a run that asks no work
    QVERIFY(es::p2p::identityWorkBits(alice_.publicKey(), 0) < bits);
    auto parsed = es::p2p::parseRecord(unproven, kRun, nullptr, bits);
    QVERIFY2(!parsed.ok && parsed.rejection.error == RecordError::LittleWork, describe(parsed));
    QVERIFY2(parsed.rejection.detail.find("the run asks 12") != std::string::npos, describe(parsed));
    const std::string sig = raw(alice_.sign(es::p2p::recordPayload(record)));
    std::string flipped = sig;
    flipped[0] = char(flipped[0] ^ 1);
    parsed = es::p2p::parseRecord(replaceOnce(unproven, sig, flipped), kRun, nullptr, bits);
    QVERIFY2(!parsed.ok && parsed.rejection.error == RecordError::LittleWork, describe(parsed));
    // The book of a run that asks work refuses the unproven record and counts it against its sender.
    es::p2p::RecordBook book(kRun, bits);
    const auto offered = book.offer(unproven, "flooder");
    QVERIFY(offered.outcome == OfferOutcome::Rejected && offered.rejection->error == RecordError::LittleWork);
    QCOMPARE(book.dropsFrom("flooder"), 1);
    QVERIFY(book.offer(proven, "honest").outcome == OfferOutcome::Accepted);
  }

  void reportsTheFirstFailingCheck() {
    // Wrong run and a signature by the wrong key: the run is checked first.
    PeerRecord record = sampleRecord(alice_);
    record.run = "another run";
    expectRejected(bdict(signedFields(payloadFields(record), bob_)), RecordError::WrongRun);
    // Non-canonical and badly signed: canonical form is checked first.
    Fields unsorted = signedFields(payloadFields(sampleRecord(alice_)), bob_);
    std::swap(unsorted[0], unsorted[1]);
    expectRejected(bdict(unsorted), RecordError::NotCanonical);
  }

  void rejectsGarbage_data() {
    QTest::addColumn<std::string>("bytes");
    const Fields good = signedFields(payloadFields(sampleRecord(alice_)), alice_);
    const std::string valid = bdict(good);
    std::mt19937 rng(42);
    std::string noise(300, '\0');
    for (char& c : noise) c = static_cast<char>(rng());
    QTest::newRow("empty") << std::string();
    QTest::newRow("random bytes") << noise;
    QTest::newRow("random bytes after d") << "d" + noise;
    QTest::newRow("truncated") << valid.substr(0, valid.size() - 1);
    QTest::newRow("cut in half") << valid.substr(0, valid.size() / 2);
    QTest::newRow("trailing byte") << valid + "x";
    QTest::newRow("a list") << std::string("li1ei2ee");
    QTest::newRow("an integer") << std::string("i42e");
    QTest::newRow("missing sig") << bdict(withField(good, "sig", ""));
    QTest::newRow("missing stats") << bdict(withField(good, "stats", ""));
    QTest::newRow("extra key") << bdict(withField(good, "zzz", bint(1)));
    const std::string statsWithExtra =
        bdict({{"extra", bint(1)}, {"loss_e4", bint(1)}, {"steps", bint(1)}, {"tokens", bint(1)}, {"tps", bint(1)}});
    QTest::newRow("extra stats key") << bdict(withField(good, "stats", statsWithExtra));
    QTest::newRow("claims unsorted") << bdict(withField(good, "claims", "li5ei3ee"));
    QTest::newRow("claims duplicate") << bdict(withField(good, "claims", "li3ei3ee"));
    QTest::newRow("claims negative") << bdict(withField(good, "claims", "li-1ei3ee"));
    QTest::newRow("claims not ints") << bdict(withField(good, "claims", "l1:3e"));
    QTest::newRow("negative seq") << bdict(withField(good, "seq", bint(-4)));
    QTest::newRow("seq is a string") << bdict(withField(good, "seq", bstr("4")));
    QTest::newRow("pk of 31 bytes") << bdict(withField(good, "pk", bstr(std::string(31, 'k'))));
    QTest::newRow("sig of 63 bytes") << bdict(withField(good, "sig", bstr(std::string(63, 's'))));
    QTest::newRow("run is a list") << bdict(withField(good, "run", "le"));
    QTest::newRow("contrib round not a number")
        << bdict(withField(good, "contrib", bdict({{"x", bstr(hashBytes(kHashA))}})));
    QTest::newRow("contrib value of 31 bytes")
        << bdict(withField(good, "contrib", bdict({{"3", bstr(std::string(31, 'x'))}})));
    QTest::newRow("contrib value as hex") << bdict(withField(good, "contrib", bdict({{"3", bstr(kHashA)}})));
    QTest::newRow("contrib value an int") << bdict(withField(good, "contrib", bdict({{"3", bint(3)}})));
    QTest::newRow("merged value not a fingerprint") << bdict(withField(good, "merged", bdict({{"3", bstr("0123")}})));
    QTest::newRow("merged missing") << bdict(withField(good, "merged", ""));
    QTest::newRow("sets value not a digest") << bdict(withField(good, "sets", bdict({{"3", bstr("0123")}})));
    QTest::newRow("sets missing") << bdict(withField(good, "sets", ""));
    QTest::newRow("outputs value of 33 bytes")
        << bdict(withField(good, "outputs", bdict({{"3", bstr(std::string(33, 'x'))}})));
    QTest::newRow("outputs round negative")
        << bdict(withField(good, "outputs", bdict({{"-3", bstr(hashBytes(kHashA))}})));
    QTest::newRow("outputs missing") << bdict(withField(good, "outputs", ""));
    QTest::newRow("work missing") << bdict(withField(good, "work", ""));
    QTest::newRow("work negative") << bdict(withField(good, "work", bint(-1)));
    QTest::newRow("work a string") << bdict(withField(good, "work", bstr("1")));
    QTest::newRow("deeply nested") << std::string(400, 'l') + std::string(400, 'e');
  }
  void rejectsGarbage() {
    QFETCH(std::string, bytes);
    expectRejected(bytes, RecordError::Garbage);
  }

  void neverAcceptsANonCanonicalEncoding_data() {
    QTest::addColumn<std::string>("bytes");
    QTest::addColumn<bool>("mayBeGarbage");  // the decoder may refuse it outright
    const Fields good = signedFields(payloadFields(sampleRecord(alice_)), alice_);
    Fields unsorted = good;
    std::swap(unsorted[2], unsorted[3]);
    QTest::newRow("keys out of order") << bdict(unsorted) << false;
    Fields duplicated = good;
    duplicated.insert(duplicated.begin() + 3, good[3]);
    QTest::newRow("duplicate key") << bdict(duplicated) << true;
    QTest::newRow("leading zero integer") << bdict(withField(good, "seq", "i07e")) << true;
    QTest::newRow("negative zero") << bdict(withField(good, "mem", "i-0e")) << true;
    QTest::newRow("leading zero round key")
        << bdict(withField(good, "snapshot", bdict({{"08", bstr(hashBytes(kHashB))}}))) << false;
    QTest::newRow("round keys out of order")
        << bdict(withField(good, "contrib", bdict({{"9", bstr(hashBytes(kHashA))}, {"10", bstr(hashBytes(kHashB))}})))
        << false;
    QTest::newRow("leading zero string length") << replaceOnce(bdict(good), "3:run", "03:run") << true;
  }
  void neverAcceptsANonCanonicalEncoding() {
    QFETCH(std::string, bytes);
    QFETCH(bool, mayBeGarbage);
    const auto parsed = es::p2p::parseRecord(bytes, kRun);
    QVERIFY2(!parsed.ok, describe(parsed));
    const bool expected = parsed.rejection.error == RecordError::NotCanonical ||
                          (mayBeGarbage && parsed.rejection.error == RecordError::Garbage);
    QVERIFY2(expected, describe(parsed));
  }

  void everyBitFlipAndTruncationIsRejected() {
    const std::string bytes = signedBytes(sampleRecord(alice_), alice_);
    for (std::size_t i = 0; i < bytes.size(); ++i) {
      for (int bit = 0; bit < 8; ++bit) {
        std::string mutated = bytes;
        mutated[i] = static_cast<char>(mutated[i] ^ (1 << bit));
        QVERIFY2(!es::p2p::parseRecord(mutated, kRun).ok, qPrintable(QString("byte %1 bit %2").arg(i).arg(bit)));
      }
      QVERIFY(!es::p2p::parseRecord(bytes.substr(0, i), kRun).ok);
    }
  }

  // --- the record book ---

  void bookAcceptsANewRecordAndKeepsItsBytesForRelaying() {
    RecordBook book(kRun);
    const std::string bytes = signedBytes(sampleRecord(alice_), alice_);
    const auto result = book.offer(bytes, "peer-1");
    QCOMPARE(result.outcome, OfferOutcome::Accepted);
    QVERIFY(!result.counted());
    QCOMPARE(book.size(), std::size_t(1));
    QVERIFY(book.find(alice_.publicKey()) == sampleRecord(alice_));
    QCOMPARE(book.wireBytes(alice_.publicKey()), std::optional<std::string>(bytes));
    QVERIFY(!book.find(bob_.publicKey()));
    QVERIFY(!book.wireBytes(bob_.publicKey()));
  }

  void bookIgnoresADuplicateWithoutCounting() {
    RecordBook book(kRun);
    const std::string bytes = signedBytes(sampleRecord(alice_), alice_);
    book.offer(bytes, "peer-1");
    const auto again = book.offer(bytes, "peer-2");
    QCOMPARE(again.outcome, OfferOutcome::Duplicate);
    QVERIFY(!again.counted());
    QCOMPARE(book.totalDrops(), 0);
    QCOMPARE(book.size(), std::size_t(1));
  }

  void bookReplacesARecordWithAHigherSeq() {
    RecordBook book(kRun);
    book.offer(signedBytes(sampleRecord(alice_, 7), alice_), "peer-1");
    PeerRecord newer = sampleRecord(alice_, 8);
    newer.claims = {1};
    const std::string newerBytes = signedBytes(newer, alice_);
    QCOMPARE(book.offer(newerBytes, "peer-1").outcome, OfferOutcome::Accepted);
    QCOMPARE(book.size(), std::size_t(1));
    QVERIFY(book.find(alice_.publicKey()) == newer);
    QCOMPARE(book.wireBytes(alice_.publicKey()), std::optional<std::string>(newerBytes));
  }

  void bookCountsALowerSeqAsStaleAgainstItsSender() {
    RecordBook book(kRun);
    const std::string current = signedBytes(sampleRecord(alice_, 7), alice_);
    book.offer(current, "peer-1");
    const auto result = book.offer(signedBytes(sampleRecord(alice_, 6), alice_), "replayer");
    QCOMPARE(result.outcome, OfferOutcome::Stale);
    QVERIFY(result.counted());
    QCOMPARE(book.dropsFrom("replayer"), 1);
    QCOMPARE(book.dropsFrom("peer-1"), 0);
    QCOMPARE(book.wireBytes(alice_.publicKey()), std::optional<std::string>(current));
  }

  // Equivocation: the key is banned (tests/tst_record_book.cpp has the rest of the rule).
  void bookCountsSameSeqWithOtherBytesAsConflictAndBansTheKey() {
    RecordBook book(kRun);
    const std::string first = signedBytes(sampleRecord(alice_, 7), alice_);
    book.offer(first, "peer-1");
    PeerRecord other = sampleRecord(alice_, 7);
    other.claims = {0};
    const auto result = book.offer(signedBytes(other, alice_), "peer-2");
    QCOMPARE(result.outcome, OfferOutcome::Conflict);
    QCOMPARE(book.dropsFrom("peer-2"), 1);
    QVERIFY(!book.wireBytes(alice_.publicKey()));
    QVERIFY(book.isBanned(alice_.publicKey()));
  }

  void bookCountsRejectionsPerSender() {
    RecordBook book(kRun);
    const auto garbage = book.offer("not a record", "mallory");
    QCOMPARE(garbage.outcome, OfferOutcome::Rejected);
    QVERIFY(garbage.rejection && garbage.rejection->error == RecordError::Garbage);
    book.offer(bdict(signedFields(payloadFields(sampleRecord(alice_)), bob_)), "mallory");
    const std::string bobs = signedBytes(sampleRecord(bob_), bob_);
    const auto wrongKey = book.offer(bobs, "10.0.0.7:6881", &alice_.publicKey());
    QVERIFY(wrongKey.rejection && wrongKey.rejection->error == RecordError::WrongKey);
    PeerRecord elsewhere = sampleRecord(alice_);
    elsewhere.run = "another run";
    book.offer(signedBytes(elsewhere, alice_), "10.0.0.7:6881");

    QCOMPARE(book.dropsFrom("mallory"), 2);
    QCOMPARE(book.dropsFrom("10.0.0.7:6881"), 2);
    QCOMPARE(book.dropsFrom("honest"), 0);
    QCOMPARE(book.totalDrops(), 4);
    QCOMPARE(book.dropsBySender().size(), std::size_t(2));
    QCOMPARE(book.size(), std::size_t(0));
  }

  void bookListsRecordsSortedByKey() {
    RecordBook book(kRun);
    std::vector<Identity> peers;
    for (std::uint8_t i = 1; i <= 6; ++i) peers.push_back(identityOf(static_cast<std::uint8_t>(i * 37)));
    std::shuffle(peers.begin(), peers.end(), std::mt19937(3));
    for (const Identity& peer : peers) book.offer(signedBytes(sampleRecord(peer), peer), "peer");
    const std::vector<PeerRecord> records = book.records();
    QCOMPARE(records.size(), peers.size());
    QVERIFY(std::is_sorted(records.begin(), records.end(),
                           [](const PeerRecord& a, const PeerRecord& b) { return a.pk < b.pk; }));
  }
};

QTEST_APPLESS_MAIN(PeerRecordTest)
#include "tst_peer_record.moc"
