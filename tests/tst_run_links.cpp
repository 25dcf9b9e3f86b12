// p2p/run_links.h: when the run torrent's lost links are dialled again (the netlab test
// tst_netlab_relink proves it on real sessions across a NAT).
#include "p2p/run_links.h"

#include <QtTest>

#include <libtorrent/address.hpp>

using es::p2p::RunLinks;
using namespace std::chrono_literals;

class RunLinksTest : public QObject {
  Q_OBJECT

  static RunLinks::Endpoint at(const char* ip, int port) {
    return {lt::make_address(ip), static_cast<std::uint16_t>(port)};
  }
  const RunLinks::Endpoint a = at("192.0.2.11", 20000), b = at("192.0.2.140", 20222);
  const RunLinks::Clock::time_point t0 = RunLinks::Clock::now();

 private Q_SLOTS:
  void nothingLostNoRelink() {
    RunLinks links;
    links.note({a, b}, t0);
    for (auto t = t0; t < t0 + 60s; t += 3s) QVERIFY(!links.relinkDue(true, true, t));
    QCOMPARE(links.targets().size(), std::size_t(2));
    QVERIFY(links.lost().empty());
  }

  // The relink times (seconds after t0) over 120 s while `stillLinked` stays linked and the rest
  // of {a, b} is lost.
  static std::vector<double> relinksWhile(RunLinks& links, const std::vector<RunLinks::Endpoint>& stillLinked,
                                          RunLinks::Clock::time_point t0) {
    std::vector<double> out;
    for (auto t = t0 + 3s; t < t0 + 120s; t += 1s) {
      links.note(stillLinked, t);
      if (links.relinkDue(true, true, t)) out.push_back(std::chrono::duration<double>(t - t0).count());
    }
    return out;
  }

  // A cut: every link drops and stays down. Relinks come at once, then every few seconds (with
  // no link left a relink costs nothing); the lost endpoints stay targets.
  void aCutIsRelinkedEveryFewSeconds() {
    RunLinks links;
    links.note({a, b}, t0);
    QVERIFY(!links.relinkDue(true, true, t0));
    const auto relinks = relinksWhile(links, {}, t0);
    QCOMPARE(links.lost().size(), std::size_t(2));
    QCOMPARE(links.targets().size(), std::size_t(2));
    QCOMPARE(relinks.front(), 3.0);  // the first look that saw the loss: at once
    for (std::size_t i = 1; i < relinks.size(); ++i) {
      const double gap = relinks[i] - relinks[i - 1];
      QVERIFY2(gap >= 3 && gap <= 5, qPrintable(QString::number(gap)));
    }
  }

  // One peer gone, the other linked: each relink would drop the live link, so they back off to
  // a minute.
  void aPartialLossBacksOffToAMinute() {
    RunLinks links;
    links.note({a, b}, t0);
    QVERIFY(!links.relinkDue(true, true, t0));
    const auto relinks = relinksWhile(links, {a}, t0);
    QCOMPARE(links.lost().size(), std::size_t(1));
    QCOMPARE(relinks, (std::vector<double>{3, 6, 12, 24, 48, 96}));
  }

  // Clearing the peer list drops every link: not while we hold one we cannot dial back (an
  // incoming link), and not while we are linked to every peer we know of.
  void noRelinkThatCouldLoseALink() {
    RunLinks links;
    links.note({a, b}, t0);
    links.note({a}, t0 + 3s);
    for (auto t = t0 + 3s; t < t0 + 60s; t += 3s) {
      QVERIFY(!links.relinkDue(false, true, t));  // an incoming link is held
      QVERIFY(!links.relinkDue(true, false, t));  // nobody we know of is missing
    }
    QVERIFY(links.relinkDue(true, true, t0 + 60s));
  }

  // Every link came back: the next loss is relinked at once, the back-off starts afresh.
  void linksBackResetTheBackOff() {
    RunLinks links;
    links.note({a, b}, t0);
    links.relinkDue(true, true, t0);
    auto t = t0;
    for (int i = 0; i < 100; ++i) {  // b lost for 100 s: the interval reaches a minute
      t += 1s;
      links.note({a}, t);
      links.relinkDue(true, true, t);
    }
    links.note({a, b}, t += 1s);
    QVERIFY(!links.relinkDue(true, true, t));
    links.note({a}, t += 1s);
    QVERIFY(links.relinkDue(true, true, t));  // at once
    links.note({a}, t += 1s);
    QVERIFY(!links.relinkDue(true, true, t));
    links.note({a}, t += 2s);
    QVERIFY(links.relinkDue(true, true, t));  // the first interval, not the minute
  }

  // Forgotten after RunLinks' memory (a peer that left the run), and never more than the cap.
  void forgottenAndBounded() {
    RunLinks::Timing timing;
    timing.maxRemembered = 4;
    RunLinks links(timing);
    links.note({a}, t0);
    links.note({}, t0 + timing.memory + 1s);
    QVERIFY(links.targets().empty());
    for (int i = 0; i < 10; ++i) links.note({at("192.0.2.11", 30000 + i)}, t0 + std::chrono::seconds(i));
    QCOMPARE(links.targets().size(), std::size_t(4));
    const auto kept = links.targets();
    QVERIFY(std::find(kept.begin(), kept.end(), at("192.0.2.11", 30009)) != kept.end());  // the newest stays
  }
};

QTEST_GUILESS_MAIN(RunLinksTest)
#include "tst_run_links.moc"
