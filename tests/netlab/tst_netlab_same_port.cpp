// Issue 40: two machines behind one home router, both listening on the same port (a port
// forwarded by hand, a copied settings file, `--listen 0.0.0.0:6881` as the README shows). Seen
// by a session acting as a new user: the second machine never met anyone and trained alone for
// the whole run, while with different ports all four merged every round. Three swarm_probe peers
// (the swarm layer alone, no training) on the emulated internet of scripts/netlab: pub1 (public)
// and natp1, natp2 behind one plain NAT, both on port 6881; the lab's DHT node the only
// bootstrap. Asserted: records and content flow between every pair.
#include "netlab/netlab_probes.h"

using namespace es::test;

class NetlabSamePort : public QObject {
  Q_OBJECT

  QTemporaryDir dir_;
  NetlabProbes lab_;

  static QJsonObject ready(const Probe& p) { return NetlabProbes::ready(p); }
  static bool hasRecord(const Probe& p, const QString& pk, qint64 seq) {
    return !p.find([&](const QJsonObject& e) {
               return isEvent(e, "record") && e.value("pk").toString() == pk && e.value("seq").toInteger() == seq;
             }).isEmpty();
  }
  static bool finished(const Probe& p, const QString& hash) {
    return !p.find([&](const QJsonObject& e) {
               return isEvent(e, "finished") && e.value("hash").toString() == hash;
             }).isEmpty();
  }
  QString writeFile(const QString& name) const {
    QFile f(dir_.filePath(name));
    if (!f.open(QIODevice::WriteOnly)) return {};
    f.write(QByteArray(1 << 20, name.at(0).toLatin1()) + name.toUtf8());
    return f.fileName();
  }

 private Q_SLOTS:
  void initTestCase() { ES_NETLAB_PROBES_INIT(lab_, dir_); }

  void twoMachinesBehindOneRouterOnOnePortBothMeetTheSwarm() {
    NetLab lab(2);
    QVERIFY2(lab.ok(), qPrintable(lab.log()));
    const auto boot = lab_.bootstrap(lab);
    std::vector<std::unique_ptr<Probe>> peers;
    peers.push_back(lab_.peer(lab, "pub1", 20000));
    peers.push_back(lab_.peer(lab, "natp1", 6881));
    peers.push_back(lab_.peer(lab, "natp2", 6881));
    for (auto& p : peers)
      QVERIFY2(waitUntil([&] { return !ready(*p).isEmpty(); }, 30000), qPrintable(p->name() + " never got ready"));
    QStringList keys, files;
    for (std::size_t i = 0; i < peers.size(); ++i) {
      keys << ready(*peers[i]).value("pk").toString();
      peers[i]->send(QString("record 1 1 %1 100").arg(i));
      files << ask(*peers[i], "publish " + writeFile(peers[i]->name() + ".bin"), "published").value("hash").toString();
      QVERIFY(!files.back().isEmpty());
    }
    for (std::size_t i = 0; i < peers.size(); ++i)
      for (std::size_t j = 0; j < peers.size(); ++j)
        if (i != j)
          peers[i]->send(QString("fetch %1 %2").arg(files[int(j)], dir_.filePath(QString("in-%1-%2").arg(i).arg(j))));
    auto all = [&] {
      for (std::size_t i = 0; i < peers.size(); ++i)
        for (std::size_t j = 0; j < peers.size(); ++j)
          if (i != j && (!hasRecord(*peers[i], keys[int(j)], 1) || !finished(*peers[i], files[int(j)]))) return false;
      return true;
    };
    const bool met = waitUntil(all, 180000);
    for (std::size_t i = 0; i < peers.size(); ++i)
      for (std::size_t j = 0; j < peers.size(); ++j)
        if (i != j)
          qInfo("%s: %s's record %s, its file %s", qPrintable(peers[i]->name()), qPrintable(peers[j]->name()),
                hasRecord(*peers[i], keys[int(j)], 1) ? "arrived" : "MISSING",
                finished(*peers[i], files[int(j)]) ? "arrived" : "MISSING");
    if (!met)
      for (auto& p : peers) NetlabProbes::dump(*p);
    QVERIFY2(met, "records and files did not flow between every pair within 180 s");
  }
};

QTEST_GUILESS_MAIN(NetlabSamePort)
#include "tst_netlab_same_port.moc"
