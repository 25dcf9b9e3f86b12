// p2p/dial_back.h on loopback: a probe reaches a listening port and is not repeated while it
// counts; a probe to a port nobody listens on fails, is retried with back-off, and reaches the
// port once something listens there (a router that installs its mapping late).
#include "p2p/dial_back.h"
#include "support/wait_until.h"

#include <QTcpServer>
#include <QtTest>

using namespace std::chrono_literals;
using es::p2p::DialBackProber;

class TestDialBack : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void aProbeReachesAListeningPortOnce() {
    QTcpServer server;
    QVERIFY(server.listen(QHostAddress::LocalHost));
    int accepted = 0;
    connect(&server, &QTcpServer::newConnection, this, [&] {
      while (auto* s = server.nextPendingConnection()) {
        ++accepted;
        s->deleteLater();
      }
    });
    QObject parent;
    DialBackProber prober(&parent, 50ms);
    prober.request(QHostAddress::LocalHost, server.serverPort());
    QVERIFY(es::test::waitUntil(
        [&] { return accepted == 1 && prober.reached(QHostAddress::LocalHost, server.serverPort()); }, 10000));
    prober.request(QHostAddress::LocalHost, server.serverPort());  // reached lately: not again
    prober.retryDue();
    QCOMPARE(prober.failures(QHostAddress::LocalHost, server.serverPort()), 0);
    QTcpServer second;  // a probe elsewhere completes: the first server got nothing more meanwhile
    QVERIFY(second.listen(QHostAddress::LocalHost));
    prober.request(QHostAddress::LocalHost, second.serverPort());
    QVERIFY(es::test::waitUntil([&] { return prober.reached(QHostAddress::LocalHost, second.serverPort()); }, 10000));
    QCOMPARE(accepted, 1);
  }

  void aFailedProbeIsRetriedUntilThePortOpens() {
    QTcpServer probeFor;  // find a free port, then close it: nobody listens there
    QVERIFY(probeFor.listen(QHostAddress::LocalHost));
    const quint16 port = probeFor.serverPort();
    probeFor.close();
    QObject parent;
    DialBackProber prober(&parent, 50ms);
    prober.request(QHostAddress::LocalHost, port);
    QVERIFY(es::test::waitUntil([&] { return prober.failures(QHostAddress::LocalHost, port) == 1; }, 10000));
    prober.request(QHostAddress::LocalHost, port);  // a retry is scheduled: the request adds nothing
    QCOMPARE(prober.failures(QHostAddress::LocalHost, port), 1);
    QTcpServer late;
    QVERIFY(late.listen(QHostAddress::LocalHost, port));
    QVERIFY(es::test::waitUntil(
        [&] {
          prober.retryDue();
          return prober.reached(QHostAddress::LocalHost, port);
        },
        10000));
    QVERIFY(prober.failures(QHostAddress::LocalHost, port) >= 1);  // reached on a retry, not the first try
  }
};

QTEST_GUILESS_MAIN(TestDialBack)
#include "tst_dial_back.moc"
