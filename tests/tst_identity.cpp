// Specification of a peer's identity (p2p/identity.h): the ed25519 key, its 72-byte key file and
// the refusals that protect it.
#include "core/common/atomic_file.h"
#include "p2p/identity.h"
#include "p2p/identity_work.h"

#include <QDir>
#include <QTemporaryDir>
#include <QTest>

#include <sys/stat.h>
#include <unistd.h>
#include <fstream>

using es::p2p::Identity;
using es::p2p::PublicKey;

namespace {

std::array<std::uint8_t, 32> seedOf(std::uint8_t fill) {
  std::array<std::uint8_t, 32> seed{};
  seed.fill(fill);
  return seed;
}

std::array<std::uint8_t, 32> bytesFromHex(const std::string& hex) {
  const auto key = es::p2p::publicKeyFromHex(hex);
  if (!key) qFatal("bad hex in test");
  return *key;
}

std::string readFile(const std::string& path) {
  auto bytes = es::readWholeFile(path);
  if (!bytes) qFatal("%s", bytes.error().c_str());
  return std::move(bytes).value();
}

void writeFile(const std::string& path, const std::string& bytes, mode_t mode) {
  { std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes; }
  ::chmod(path.c_str(), mode);
}

mode_t modeOf(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return 0;
  return st.st_mode & 07777;
}

}  // namespace

class IdentityTest : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir dir_;
  std::string path(const char* name) const { return dir_.filePath(name).toStdString(); }

 private Q_SLOTS:
  void initTestCase() { QVERIFY(dir_.isValid()); }

  void createsA72ByteKeyFileWithMode0600() {
    const std::string file = path("new.key");
    const auto identity = Identity::loadOrCreate(file);
    QVERIFY2(identity.ok(), identity.ok() ? "" : identity.error().c_str());
    const std::string bytes = readFile(file);
    QCOMPARE(bytes.size(), std::size_t(72));
    QCOMPARE(bytes.substr(0, 8), std::string("ESID\x01\0\0\0", 8));
    QCOMPARE(bytes.substr(40), std::string(reinterpret_cast<const char*>(identity->publicKey().data()), 32));
    QCOMPARE(modeOf(file), mode_t(0600));
  }

  void loadGivesBackTheCreatedKey() {
    const std::string file = path("reload.key");
    const auto created = Identity::loadOrCreate(file);
    QVERIFY(created.ok());
    const auto loaded = Identity::load(file);
    QVERIFY2(loaded.ok(), loaded.ok() ? "" : loaded.error().c_str());
    QCOMPARE(loaded->publicKey(), created->publicKey());
    const auto again = Identity::loadOrCreate(file);
    QVERIFY(again.ok());
    QCOMPARE(again->publicKey(), created->publicKey());
    // The loaded key signs like the created one.
    QVERIFY(es::p2p::verifySignature(created->publicKey(), "hello", loaded->sign("hello")));
  }

  void fromSeedIsDeterministic() {
    QCOMPARE(Identity::fromSeed(seedOf(7)).publicKey(), Identity::fromSeed(seedOf(7)).publicKey());
    QVERIFY(Identity::fromSeed(seedOf(7)).publicKey() != Identity::fromSeed(seedOf(8)).publicKey());
    QVERIFY(Identity::generate().publicKey() != Identity::generate().publicKey());
  }

  // RFC 8032 §7.1, test 1; the peer id is BLAKE2b-160 of that key (checked with Python's hashlib).
  void matchesTheEd25519AndBlake2bReferenceVectors() {
    const Identity identity =
        Identity::fromSeed(bytesFromHex("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60"));
    QCOMPARE(es::p2p::toHex(identity.publicKey()),
             std::string("d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a"));
    const es::p2p::Signature signature = identity.sign("");
    QCOMPARE(
        es::p2p::toHex(signature.data(), signature.size()),
        std::string("e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b4"
                    "6bd25bf5f0595bbe24655141438e7a100b"));
    QCOMPARE(identity.peerId(), std::string("1b3517cf5af0ac86b8efe88452908c45f5c7e079"));
  }

  void signatureVerifiesAndAnyFlippedBitFails() {
    const Identity identity = Identity::fromSeed(seedOf(1));
    const std::string message = "round 12: claims 3 5 8";
    const es::p2p::Signature signature = identity.sign(message);
    QVERIFY(es::p2p::verifySignature(identity.publicKey(), message, signature));

    std::string flippedMessage = message;
    flippedMessage[4] ^= 0x01;
    QVERIFY(!es::p2p::verifySignature(identity.publicKey(), flippedMessage, signature));
    es::p2p::Signature flippedSignature = signature;
    flippedSignature[10] ^= 0x80;
    QVERIFY(!es::p2p::verifySignature(identity.publicKey(), message, flippedSignature));
    QVERIFY(!es::p2p::verifySignature(Identity::fromSeed(seedOf(2)).publicKey(), message, signature));
  }

  void publicKeyHexRoundTripsAndRejectsMalformedHex() {
    const PublicKey key = Identity::fromSeed(seedOf(3)).publicKey();
    const std::string hex = es::p2p::toHex(key);
    QCOMPARE(hex.size(), std::size_t(64));
    QCOMPARE(es::p2p::publicKeyFromHex(hex), std::optional<PublicKey>(key));
    QCOMPARE(es::p2p::publicKeyFromHex(QString::fromStdString(hex).toUpper().toStdString()),
             std::optional<PublicKey>(key));
    QVERIFY(!es::p2p::publicKeyFromHex(hex.substr(1)));
    QVERIFY(!es::p2p::publicKeyFromHex(hex + "0"));
    QVERIFY(!es::p2p::publicKeyFromHex("g" + hex.substr(1)));
    QCOMPARE(Identity::fromSeed(seedOf(3)).peerId().size(), std::size_t(40));
  }

  void refusesDamagedKeyFile_data() {
    QTest::addColumn<int>("flipAt");    // byte to flip, or -1
    QTest::addColumn<int>("resizeTo");  // new size, or -1
    QTest::newRow("flipped public key byte") << 50 << -1;
    QTest::newRow("flipped seed byte") << 10 << -1;
    QTest::newRow("wrong magic") << 0 << -1;
    QTest::newRow("wrong version") << 4 << -1;
    QTest::newRow("reserved byte set") << 6 << -1;
    QTest::newRow("truncated") << -1 << 71;
    QTest::newRow("extended") << -1 << 73;
    QTest::newRow("empty") << -1 << 0;
  }
  void refusesDamagedKeyFile() {
    QFETCH(int, flipAt);
    QFETCH(int, resizeTo);
    const std::string file = path("damaged.key");
    ::unlink(file.c_str());
    QVERIFY(Identity::loadOrCreate(file).ok());
    std::string bytes = readFile(file);
    if (flipAt >= 0) bytes[static_cast<std::size_t>(flipAt)] ^= 0x01;
    if (resizeTo >= 0) bytes.resize(static_cast<std::size_t>(resizeTo), '\0');
    writeFile(file, bytes, 0600);

    const auto loaded = Identity::load(file);
    QVERIFY(!loaded.ok());
    QVERIFY2(loaded.error().find(file) != std::string::npos, loaded.error().c_str());
    // loadOrCreate must not "repair" it: the key is the peer's reputation.
    const auto orCreated = Identity::loadOrCreate(file);
    QVERIFY(!orCreated.ok());
    QCOMPARE(readFile(file), bytes);
    QCOMPARE(modeOf(file), mode_t(0600));
  }

  void refusesKeyFileReadableByGroupOrOthers_data() {
    QTest::addColumn<int>("mode");
    QTest::newRow("0640") << 0640;
    QTest::newRow("0604") << 0604;
    QTest::newRow("0660") << 0660;
  }
  void refusesKeyFileReadableByGroupOrOthers() {
    QFETCH(int, mode);
    const std::string file = path("open.key");
    ::unlink(file.c_str());
    const auto created = Identity::loadOrCreate(file);
    QVERIFY(created.ok());
    const std::string bytes = readFile(file);
    ::chmod(file.c_str(), static_cast<mode_t>(mode));

    for (const auto& result : {Identity::load(file), Identity::loadOrCreate(file)}) {
      QVERIFY(!result.ok());
      QVERIFY2(result.error().find("chmod 600") != std::string::npos, result.error().c_str());
      QVERIFY2(result.error().find(file) != std::string::npos, result.error().c_str());
    }
    QCOMPARE(readFile(file), bytes);
    QCOMPARE(modeOf(file), mode_t(mode));
  }

  void reportsAMissingDirectory() {
    const std::string file = path("no-such-dir/id.key");
    const auto result = Identity::loadOrCreate(file);
    QVERIFY(!result.ok());
    QVERIFY2(result.error().find("no-such-dir") != std::string::npos, result.error().c_str());
    QVERIFY2(result.error().find("does not exist") != std::string::npos, result.error().c_str());
  }

  void loadDoesNotCreateAMissingFile() {
    const std::string file = path("absent.key");
    const auto result = Identity::load(file);
    QVERIFY(!result.ok());
    QVERIFY2(result.error().find(file) != std::string::npos, result.error().c_str());
    QCOMPARE(modeOf(file), mode_t(0));
  }

  void leavesNoTemporaryFilesBehind() {
    QVERIFY(Identity::loadOrCreate(path("tidy.key")).ok());
    for (const QString& name : QDir(dir_.path()).entryList(QDir::Files))
      QVERIFY2(!name.contains(".tmp"), qPrintable(name));
  }

  // Identity work (p2p/identity_work.h): found once and kept; read back without hashing again; a
  // run asking more bits finds more; a damaged, foreign or too weak file is worked out again.
  void identityWorkIsFoundOnceAndKept() {
    const auto key = Identity::fromSeed(seedOf(5)).publicKey();
    const std::string file = path("work-a");
    const auto first = es::p2p::loadOrSolveIdentityWork(file, key, 10);
    QVERIFY2(first.ok(), first.ok() ? "" : first.error().c_str());
    QVERIFY(first->solved && first->bits >= 10);
    QCOMPARE(es::p2p::identityWorkBits(key, first->nonce), first->bits);
    QCOMPARE(first->nonce, es::p2p::solveIdentityWork(key, 10));  // the smallest nonce: nothing skipped
    const auto again = es::p2p::loadOrSolveIdentityWork(file, key, 10);
    QVERIFY(again.ok() && !again->solved && again->nonce == first->nonce);
    const auto more = es::p2p::loadOrSolveIdentityWork(file, key, first->bits + 2);
    QVERIFY(more.ok() && more->solved && more->bits >= first->bits + 2);
    QVERIFY(es::p2p::loadOrSolveIdentityWork(file, key, first->bits + 2)->solved == false);
    // Another key's file, a damaged one, a forged nonce: solved again, and the file rewritten.
    const auto other = Identity::fromSeed(seedOf(6)).publicKey();
    const auto foreign = es::p2p::loadOrSolveIdentityWork(file, other, 8);
    QVERIFY(foreign.ok() && foreign->solved && es::p2p::identityWorkBits(other, foreign->nonce) >= 8);
    for (const auto& text : {std::string("garbage"), es::p2p::toHex(other) + " 0\n", es::p2p::toHex(other) + " -5\n",
                             es::p2p::toHex(other) + " 1 2\n"}) {
      QVERIFY(es::writeFileAtomically(file, text).ok());
      const auto redone = es::p2p::loadOrSolveIdentityWork(file, other, 8);
      QVERIFY2(redone.ok() && es::p2p::identityWorkBits(other, redone->nonce) >= 8, text.c_str());
    }
    QVERIFY(!es::p2p::loadOrSolveIdentityWork(file, key, es::p2p::kMaxIdentityWorkBits + 1).ok());
  }
};

QTEST_APPLESS_MAIN(IdentityTest)
#include "tst_identity.moc"
