// SwarmSession's place on the network, in one process on loopback (run in a namespace with only
// `lo`): the DHT state round-trips through its file and is saved on exit; a bad file is ignored
// with a log line; a wildcard listen reports the interface addresses actually listened on.
#include "p2p/dht_state.h"
#include "p2p/identity.h"
#include "p2p/swarm_session.h"

#include <QFile>
#include <QTemporaryDir>
#include <QtTest>

using namespace es::p2p;

namespace {

SwarmSettings loopback(std::vector<std::string>* log) {
  SwarmSettings s;
  s.listen = "127.0.0.1:0";
  s.sameHostSwarm = true;
  s.enableUtp = false;
  s.log = [log](const std::string& line) { log->push_back(line); };
  return s;
}

bool contains(const std::vector<std::string>& lines, const std::string& text) {
  for (const auto& line : lines)
    if (line.find(text) != std::string::npos) return true;
  return false;
}

QString joined(const std::vector<std::string>& lines) {
  QStringList out;
  for (const auto& line : lines) out << QString::fromStdString(line);
  return out.join('\n');
}

lt::udp::endpoint ep(const char* ip, int port) { return {lt::make_address(ip), std::uint16_t(port)}; }

}  // namespace

class SwarmNetworkTest : public QObject {
  Q_OBJECT
  QTemporaryDir dir_;

 private Q_SLOTS:
  void dhtStateRoundTripsThroughAFile() {
    lt::dht::dht_state state;
    state.nids.emplace_back(lt::make_address("127.0.0.1"), lt::dht::node_id("0123456789abcdefghij"));
    state.nodes = {ep("192.0.2.1", 6881), ep("127.0.0.1", 7000)};
    state.nodes6 = {ep("2001:db8::1", 25401)};
    const std::string path = dir_.filePath("round-trip.state").toStdString();
    QVERIFY(writeDhtState(path, state));
    const auto loaded = readDhtState(path);
    QVERIFY2(loaded, loaded ? "" : loaded.error().c_str());
    QCOMPARE(loaded->nodes.size(), std::size_t(2));
    QVERIFY(loaded->nodes == state.nodes && loaded->nodes6 == state.nodes6);
    QCOMPARE(loaded->nids.size(), std::size_t(1));
    QVERIFY(loaded->nids[0].second == state.nids[0].second);
    QCOMPARE(dhtStateNodes(*loaded), 3);
  }

  void aBadSavedStateIsIgnoredWithALogLine_data() {
    QTest::addColumn<QByteArray>("bytes");
    QTest::addColumn<QString>("reason");
    QTest::newRow("garbage") << QByteArray("this is not bencode\x01\x02", 21) << "not bencoded";
    QTest::newRow("truncated") << QByteArray("d9:dht stated7:node-id") << "not bencoded";
    QTest::newRow("foreign dictionary") << QByteArray("d3:fooi1ee") << "no \"dht state\"";
    QTest::newRow("empty file") << QByteArray() << "not bencoded";
  }
  void aBadSavedStateIsIgnoredWithALogLine() {
    QFETCH(QByteArray, bytes);
    QFETCH(QString, reason);
    const QString path = dir_.filePath(QStringLiteral("bad-%1.state").arg(QTest::currentDataTag()).replace(' ', '-'));
    QFile f(path);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write(bytes);
    f.close();
    std::vector<std::string> log;
    auto s = loopback(&log);
    s.dhtStatePath = path.toStdString();
    auto session = SwarmSession::create(s, Identity::generate());
    QVERIFY2(session.ok(), session.ok() ? "" : session.error().c_str());  // a damaged cache never stops the client
    QVERIFY2(contains(log, "Ignoring the saved DHT state \"" + path.toStdString() + "\": " + reason.toStdString()),
             qPrintable(joined(log)));
  }

  void theStateIsSavedOnExitAndLoadedAtStart() {
    const std::string path = dir_.filePath("saved.state").toStdString();
    std::vector<std::string> log;
    auto s = loopback(&log);
    s.dhtStatePath = path;
    {
      auto session = SwarmSession::create(s, Identity::generate());
      QVERIFY(session.ok());
      QVERIFY(!contains(log, "DHT state"));  // no file yet: a first start, nothing to say
    }
    QVERIFY(QFile::exists(QString::fromStdString(path)));
    const auto saved = readDhtState(path);
    QVERIFY2(saved, saved ? "" : saved.error().c_str());
    QVERIFY(!saved->nids.empty());  // our node id, kept so the DHT's tables stay valid
    auto again = SwarmSession::create(s, Identity::generate());
    QVERIFY(again.ok());
    QVERIFY2(contains(log, "DHT state: 0 nodes from \"" + path + "\""), qPrintable(joined(log)));
  }

  // Bound to 0.0.0.0, the session names the addresses libtorrent listens on (here only lo's),
  // not a guess, and the reachability self-test starts in "checking".
  void aWildcardListenReportsTheInterfacesListenedOn() {
    std::vector<std::string> log;
    auto s = loopback(&log);
    s.listen = "0.0.0.0:0";
    s.sameHostSwarm = false;
    s.enableUtp = true;
    auto session = SwarmSession::create(s, Identity::generate());
    QVERIFY(session.ok());
    const auto addresses = (*session)->listenAddresses();
    QVERIFY(!addresses.empty());
    QVERIFY2(contains(log, "Listening on ") && contains(log, "(TCP+uTP)"), qPrintable(joined(log)));
    QCOMPARE((*session)->listenEndpoint(), addresses.front());
    QVERIFY(contains(addresses, "127.0.0.1:"));
    QVERIFY2(contains(log, "reachability: checking"), qPrintable(joined(log)));
    QCOMPARE((*session)->reachabilityLine(), std::string("reachability: checking"));
    QVERIFY((*session)->externalAddress().empty());
    // Peers on one host: the same line as before, and no self-test.
    std::vector<std::string> quiet;
    auto same = SwarmSession::create(loopback(&quiet), Identity::generate());
    QVERIFY(same.ok());
    QCOMPARE((*same)->listenEndpoint(), "127.0.0.1:" + std::to_string((*same)->listenPort()));
    QVERIFY(!contains(quiet, "reachability") && (*same)->reachabilityLine().empty());
  }
};

QTEST_GUILESS_MAIN(SwarmNetworkTest)
#include "tst_swarm_network.moc"
