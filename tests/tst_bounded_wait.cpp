// es::finishWithin (core/common/bounded_wait.h): the bounded wait that lets a client stop even
// when libtorrent's network thread would not (SwarmSession's destructor).
#include "core/common/bounded_wait.h"

#include <QtTest>

#include <atomic>
#include <chrono>
#include <future>

using namespace std::chrono_literals;

class TestBoundedWait : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void workThatFinishesIsWaitedFor() {
    std::atomic<int> ran{0};
    QVERIFY(es::finishWithin(
        [&] {
          std::this_thread::sleep_for(50ms);
          ran = 1;
        },
        10s));
    QCOMPARE(ran.load(), 1);  // done before finishWithin returned
  }

  // Work blocked on a gate we hold: the wait gives up at the limit and the work goes on alone;
  // what it captured lives until it ends (here: the gate's future and the flag it sets).
  void workThatBlocksIsLeftRunning() {
    std::promise<void> gate;
    auto ended = std::make_shared<std::promise<void>>();
    auto endedFuture = ended->get_future();
    const auto start = std::chrono::steady_clock::now();
    QVERIFY(!es::finishWithin(
        [opened = gate.get_future().share(), ended] {
          opened.wait();
          ended->set_value();
        },
        200ms));
    const auto waited = std::chrono::steady_clock::now() - start;
    QVERIFY(waited >= 200ms);
    QVERIFY2(waited < 5s, "the bounded wait waited for the blocked work");
    QCOMPARE(endedFuture.wait_for(0ms), std::future_status::timeout);  // still blocked
    gate.set_value();
    QCOMPARE(endedFuture.wait_for(10s), std::future_status::ready);  // and it still finishes
  }
};

QTEST_GUILESS_MAIN(TestBoundedWait)
#include "tst_bounded_wait.moc"
