// The reachability self-test's rules (p2p/reachability.h) on made-up contacts: only a contact
// from an address we never sent to proves anything; a port mapping decides which "reachable";
// the grace period starts with the first DHT node; a later proof upgrades "outgoing-only".
#include "p2p/gossip_wire.h"
#include "p2p/reachability.h"

#include <libtorrent/bdecode.hpp>

#include <QtTest>

using es::p2p::Reachability;
using State = Reachability::State;
using namespace std::chrono_literals;

class TestReachability : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void startsCheckingAndSaysSo() {
    Reachability r;
    QCOMPARE(r.state(), State::Checking);
    QCOMPARE(QString::fromStdString(r.line()), QStringLiteral("reachability: checking"));
  }

  void repliesFromNodesWeContactedProveNothing() {
    Reachability r(90s);
    r.noteOutgoing("198.51.100.7");
    QVERIFY(!r.noteIncoming("198.51.100.7", "DHT query"));
    QVERIFY(!r.noteIncoming("198.51.100.7", "incoming connection"));  // by IP: any port of a contacted host
    QCOMPARE(r.state(), State::Checking);
  }

  void anUnsolicitedContactProvesReachable() {
    Reachability r(90s);
    r.setListenPort(6881);
    r.noteExternalAddress("198.18.1.2");
    r.noteOutgoing("198.51.100.7");
    QVERIFY(r.noteIncoming("203.0.113.9", "incoming connection"));
    QCOMPARE(r.state(), State::Reachable);
    QCOMPARE(
        QString::fromStdString(r.line()),
        QStringLiteral("reachability: reachable (external 198.18.1.2:6881; incoming connection from 203.0.113.9)"));
    QVERIFY(!r.noteIncoming("203.0.113.10", "DHT query"));  // no change, no second line
  }

  void aMappingPlusAContactIsReachableViaPortMapping() {
    Reachability r(90s);
    r.notePortMapped(40001, "UPnP");
    QCOMPARE(r.state(), State::Checking);  // the mapping alone proves nothing
    r.noteExternalAddress("198.18.1.2");
    QVERIFY(r.noteIncoming("192.0.2.20", "DHT query"));
    QCOMPARE(r.state(), State::ReachableViaPortMapping);
    QCOMPARE(QString::fromStdString(r.line()), QStringLiteral("reachability: reachable via port mapping (external "
                                                              "198.18.1.2:40001 via UPnP; DHT query from 192.0.2.20)"));
  }

  // No NAT state matches a SYN to the listening port (our own TCP dials leave from other ports):
  // a TCP connection proves reachability even from a host we talked to; uTP and DHT do not.
  void aTcpConnectionToTheListenPortProvesItFromAnyone() {
    Reachability r(90s);
    r.notePortMapped(20111, "NAT-PMP");
    r.noteOutgoing("192.0.2.11");
    QVERIFY(!r.noteIncoming("192.0.2.11", "incoming connection"));  // uTP: may be a NAT's reply path
    QCOMPARE(r.state(), State::Checking);
    QVERIFY(r.noteIncoming("192.0.2.11", "incoming TCP connection", true));
    QCOMPARE(r.state(), State::ReachableViaPortMapping);
  }

  // A client listening on 0.0.0.0 finds its own announcement in the DHT; dialling it is a TCP
  // connection from our own address to our listen port (the netlab's pub1 said "reachable" on
  // its own "incoming TCP connection from 192.0.2.11"). Ourselves prove nothing.
  void aContactFromOurOwnAddressProvesNothing() {
    Reachability r(90s);
    r.noteOwnAddress("192.0.2.11");
    QVERIFY(!r.noteIncoming("192.0.2.11", "incoming TCP connection", true));
    QVERIFY(!r.noteIncoming("192.0.2.11", "DHT query"));
    QCOMPARE(r.state(), State::Checking);
    QVERIFY(r.noteIncoming("192.0.2.12", "incoming TCP connection", true));
    QCOMPARE(r.state(), State::Reachable);
  }

  void graceStartsWithTheFirstDhtNode() {
    Reachability r(90s);
    const auto t0 = Reachability::Clock::now();
    QVERIFY(!r.tick(0, t0));
    QVERIFY(!r.tick(0, t0 + 600s));  // not on the network yet: nobody could have found us
    QVERIFY(!r.tick(5, t0 + 600s));
    QVERIFY(!r.tick(5, t0 + 689s));
    QVERIFY(r.tick(5, t0 + 690s));
    QCOMPARE(r.state(), State::OutgoingOnly);
    QVERIFY(QString::fromStdString(r.line()).startsWith(QStringLiteral("reachability: outgoing-only (")));
    QVERIFY(!r.tick(5, t0 + 900s));
  }

  void aLaterProofUpgradesOutgoingOnly() {
    Reachability r(1s);
    const auto t0 = Reachability::Clock::now();
    r.tick(1, t0);
    QVERIFY(r.tick(1, t0 + 2s));
    QVERIFY(r.noteIncoming("192.0.2.30", "incoming connection"));
    QCOMPARE(r.state(), State::Reachable);
    QVERIFY(!r.tick(1, t0 + 10s));  // proven states stay
    QCOMPARE(r.state(), State::Reachable);
  }

  void theContactedSetIsBounded() {
    Reachability r(90s);
    r.noteOutgoing("192.0.2.1");
    for (std::size_t i = 0; i < Reachability::kMaxRemembered; ++i)
      r.noteOutgoing("10.0." + std::to_string(i / 256) + "." + std::to_string(i % 256));
    QVERIFY(r.noteIncoming("192.0.2.1", "DHT query"));  // the oldest was forgotten
    Reachability fresh(90s);
    fresh.noteOutgoing("192.0.2.1");
    for (int i = 0; i < 100; ++i) fresh.noteOutgoing("192.0.2.1");  // repeats take no room
    QVERIFY(!fresh.noteIncoming("192.0.2.1", "DHT query"));
  }

  // The dial-back port read from a run peer's BEP10 handshake (p2p/gossip_wire.h): our own
  // "es_port" wins over libtorrent's "p" (which a NATed peer stops sending), and a port outside
  // 1..65535 from a stranger is none at all.
  void theHandshakesDialBackPortIsOursFirstAndBounded() {
    auto portOf = [](const std::string& bencoded) {
      lt::error_code ec;
      const lt::bdecode_node node = lt::bdecode(bencoded, ec);
      return ec ? -1 : es::p2p::readGossipHandshake(node).dialBackPort;
    };
    const std::string m = "1:md9:es_recordi31ee";
    QCOMPARE(portOf("d7:es_porti20444e" + m + "1:pi6881ee"), 20444);
    QCOMPARE(portOf("d" + m + "1:pi6881ee"), 6881);                  // an older client: its "p"
    QCOMPARE(portOf("d" + m + "e"), 0);                              // neither: no probe
    QCOMPARE(portOf("d7:es_porti70000e" + m + "1:pi6881ee"), 6881);  // out of range: ignored
    QCOMPARE(portOf("d7:es_porti-1e" + m + "e"), 0);
    QCOMPARE(portOf("d7:es_port5:20444" + m + "e"), 0);      // not an integer
    QCOMPARE(portOf("d1:md3:fooi1ee7:es_porti20444ee"), 0);  // not a gossiping peer
  }
};

QTEST_GUILESS_MAIN(TestReachability)
#include "tst_reachability.moc"
