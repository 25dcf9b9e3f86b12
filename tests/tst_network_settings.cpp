// What the command line and the saved network settings make of the session's settings
// (app/network_setup.h, then p2p's settings pack): the public network — its routers, UPnP and
// NAT-PMP, the saved DHT state — only when the donor opted in (the saved opt-in setting or flag);
// --bootstrap replaces the routers; --port-mapping maps without them; and no test configuration
// ever names a public host. No test passes the opt-in flag or builds a pack with real routers:
// opted-in cases here use documentation-range routers in the saved setting.
#include "app/command_line.h"
#include "app/network_setup.h"
#include "p2p/lt_settings.h"

#include <libtorrent/address.hpp>

#include <QSettings>
#include <QTemporaryDir>
#include <QtTest>

using es::app::CommandLine;
using es::settings::ClientSettings;

namespace {

CommandLine parsed(const QString& args) {
  auto r = es::app::parseCommandLine(QStringList{"expertswarm"} + args.split(' ', Qt::SkipEmptyParts));
  if (!r.commandLine) qFatal("%s", qPrintable(r.message));
  return *r.commandLine;
}

// The session's settings and libtorrent's pack for `args` over the saved settings `saved`.
struct Outcome {
  es::p2p::SwarmSettings swarm;
  lt::settings_pack pack;
};
Outcome outcome(const QString& args, ClientSettings saved = {}) {
  CommandLine cl = parsed(args);
  es::app::applyNetworkSettings(cl, saved, nullptr);
  auto swarm = es::app::swarmSettingsFor(cl, "/data");
  if (!swarm) qFatal("%s", swarm.error().c_str());
  auto pack = es::p2p::toSettingsPack(*swarm);
  if (!pack) qFatal("%s", pack.error().c_str());
  return {*swarm, *pack};
}

QStringList bootstrapOf(const lt::settings_pack& pack) {
  return QString::fromStdString(pack.get_str(lt::settings_pack::dht_bootstrap_nodes)).split(',', Qt::SkipEmptyParts);
}

// Loopback, or the documentation ranges (RFC 5737, RFC 3849) the netlab uses: never a real host.
bool isPrivateTestHost(const QString& endpoint) {
  QString host = endpoint.left(endpoint.lastIndexOf(':'));
  if (host.startsWith('[')) host = host.mid(1, host.size() - 2);
  lt::error_code ec;
  const lt::address ip = lt::make_address(host.toStdString(), ec);
  if (ec) return false;  // a host name is resolved through the internet's DNS
  if (ip.is_loopback()) return true;
  if (ip.is_v6()) {
    const auto b = ip.to_v6().to_bytes();
    return b[0] == 0x20 && b[1] == 0x01 && b[2] == 0x0d && b[3] == 0xb8;
  }
  const auto net = ip.to_v4().to_uint() >> 8;
  return net == 0xC00002 || net == 0xC63364 || net == 0xCB0071;  // 192.0.2, 198.51.100, 203.0.113
}

void verifyPrivate(const Outcome& o, const char* what) {
  for (const auto& node : bootstrapOf(o.pack))
    QVERIFY2(isPrivateTestHost(node), qPrintable(QString(what) + ": " + node));
  QVERIFY2(!o.pack.get_bool(lt::settings_pack::enable_upnp), what);
  QVERIFY2(!o.pack.get_bool(lt::settings_pack::enable_natpmp), what);
  QVERIFY2(!o.pack.get_bool(lt::settings_pack::enable_lsd), what);
  QVERIFY2(o.swarm.dhtStatePath.empty(), what);  // a saved state would name nodes nobody passed
}

}  // namespace

class TestNetworkSettings : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void withoutPublicOnlyTheGivenNodesAndNoPortMapping() {
    const auto o = outcome("--no-gui");
    QVERIFY(bootstrapOf(o.pack).isEmpty());  // empty, not libtorrent's default router
    verifyPrivate(o, "default");
    const auto given = outcome("--no-gui --bootstrap 192.0.2.7:6881");
    QCOMPARE(bootstrapOf(given.pack), QStringList{"192.0.2.7:6881"});
    verifyPrivate(given, "--bootstrap");
  }

  void savedSettingJoinsWithItsEditedRoutersAndMapsThePort() {
    ClientSettings saved;
    saved.publicNetwork = true;
    saved.bootstrapNodes = {"203.0.113.5:6881"};
    const auto o = outcome("--no-gui", saved);
    QCOMPARE(bootstrapOf(o.pack), QStringList{"203.0.113.5:6881"});
    QVERIFY(o.pack.get_bool(lt::settings_pack::enable_upnp) && o.pack.get_bool(lt::settings_pack::enable_natpmp));
    QCOMPARE(QString::fromStdString(o.swarm.dhtStatePath), QStringLiteral("/data/dht.state"));
    QVERIFY(!o.swarm.sameHostSwarm && o.swarm.enableUtp);
  }

  void bootstrapReplacesThePublicRouters() {
    ClientSettings saved;
    saved.publicNetwork = true;
    saved.bootstrapNodes = {"203.0.113.5:6881"};
    const auto o = outcome("--no-gui --bootstrap 192.0.2.1:6881 --bootstrap 192.0.2.2:6881", saved);
    QCOMPARE(bootstrapOf(o.pack), QStringList({"192.0.2.1:6881", "192.0.2.2:6881"}));
    QVERIFY(o.pack.get_bool(lt::settings_pack::enable_upnp));
  }

  void portMappingWithoutTheRouters() {
    const auto o = outcome("--no-gui --port-mapping --bootstrap 203.0.113.10:6881");
    QCOMPARE(bootstrapOf(o.pack), QStringList{"203.0.113.10:6881"});
    QVERIFY(o.pack.get_bool(lt::settings_pack::enable_upnp) && o.pack.get_bool(lt::settings_pack::enable_natpmp));
    QVERIFY(o.swarm.dhtStatePath.empty());
  }

  void defaultListenIsEveryInterfaceOnAPortChosenOnceAndKept() {
    QTemporaryDir dir;
    QSettings store(dir.filePath("es.ini"), QSettings::IniFormat);
    auto saved = ClientSettings::load(store);
    CommandLine first = parsed("--no-gui");
    es::app::applyNetworkSettings(first, saved, &store);
    const int port = saved.listenPort;
    QVERIFY(port >= 10000 && port <= 32767);
    QCOMPARE(first.listen, QStringLiteral("0.0.0.0:%1,[::]:%1").arg(port));
    auto again = ClientSettings::load(store);
    QCOMPARE(again.listenPort, port);
    CommandLine second = parsed("--no-gui");
    es::app::applyNetworkSettings(second, again, &store);
    QCOMPARE(second.listen, first.listen);
    QCOMPARE(QString::fromStdString(outcome("--no-gui", again).pack.get_str(lt::settings_pack::listen_interfaces)),
             first.listen);
    // An explicit --listen is kept exactly.
    QCOMPARE(QString::fromStdString(outcome("--no-gui --listen 127.0.0.1:7000").swarm.listen),
             QStringLiteral("127.0.0.1:7000"));
  }

  // The command lines the tests and benches use (peers on 127.0.0.1) stay private even on a
  // machine whose donor opted in: the saved setting cannot reach a loopback session.
  void noPublicHostInAnyTestConfiguration() {
    ClientSettings optedIn;
    optedIn.publicNetwork = true;
    optedIn.portMapping = true;
    for (const QString& args : {QStringLiteral("--no-gui --listen 127.0.0.1:6881"),
                                QStringLiteral("--no-gui --listen 127.0.0.1:6882 --bootstrap 127.0.0.1:6881"),
                                QStringLiteral("--no-gui --listen 127.0.0.1:0 --sync-every 5"),
                                QStringLiteral("--listen 127.0.0.1:6883 --bootstrap 127.0.0.1:6881")}) {
      for (const auto& saved : {ClientSettings{}, optedIn}) {
        const auto o = outcome(args, saved);
        verifyPrivate(o, qPrintable(args));
        QVERIFY(o.swarm.sameHostSwarm && !o.swarm.enableUtp);
      }
    }
    // The sessions tests and benches build directly (swarm_probe, bench/swarm_distribution).
    es::p2p::SwarmSettings direct;
    direct.listen = "127.0.0.1:0";
    direct.sameHostSwarm = true;
    auto pack = es::p2p::toSettingsPack(direct);
    QVERIFY(pack);
    verifyPrivate({direct, *pack}, "SwarmSettings{}");
  }

  void portMappingOnLoopbackIsRefused() {
    for (const char* args : {"--no-gui --port-mapping --listen 127.0.0.1:7000"}) {
      const auto r = es::app::parseCommandLine(QStringList{"expertswarm"} + QString(args).split(' '));
      QVERIFY(!r.commandLine);
      QCOMPARE(r.exitCode, 2);
      QVERIFY2(r.message.contains("loopback"), qPrintable(r.message));
    }
  }

  void badGraceOverrideIsAClearError() {
    qputenv("ES_REACHABILITY_GRACE_S", "soon");
    CommandLine cl = parsed("--no-gui --listen 0.0.0.0:7000");
    const auto bad = es::app::swarmSettingsFor(cl, "/data");
    qputenv("ES_REACHABILITY_GRACE_S", "5");
    const auto good = es::app::swarmSettingsFor(cl, "/data");
    qunsetenv("ES_REACHABILITY_GRACE_S");
    QVERIFY(!bad);
    QVERIFY(QString::fromStdString(bad.error()).contains("ES_REACHABILITY_GRACE_S"));
    QVERIFY(good && good->reachabilityGraceSeconds == 5);
  }
};

QTEST_GUILESS_MAIN(TestNetworkSettings)
#include "tst_network_settings.moc"
