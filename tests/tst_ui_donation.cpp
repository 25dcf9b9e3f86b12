// When the donor's machine trains and when it pauses: the "when to donate" rules (donation_policy:
// schedule across midnight, manual pause, snooze, user activity, unknown idle time), the idle-time
// source, the DonationController that applies them (and the rate caps) to the engine, and the tray
// menu's commands. Time is always injected (never slept); the engine is tests/support/fake_engine.h.
// Runs on the offscreen platform.
#include "core/settings/client_settings.h"
#include "tests/support/fake_engine.h"
#include "ui/donation_controller.h"
#include "ui/donation_policy.h"
#include "ui/idle_monitor.h"
#include "ui/machine_sensors.h"
#include "ui/tray_icon.h"

#include <QAction>
#include <QDBusConnection>
#include <QElapsedTimer>
#include <QProcess>
#include <QSignalSpy>
#include <QSystemTrayIcon>
#include <QThread>
#include <QWidget>
#include <QtTest>

using es::settings::ClientSettings;
using es::test::FakeEngine;
using es::ui::DonationController;
using es::ui::DonationInputs;

// UPower as far as SystemSensors sees it: the OnBattery property of org.freedesktop.UPower.
class FakeUPower : public QObject {
  Q_OBJECT
  Q_CLASSINFO("D-Bus Interface", "org.freedesktop.UPower")
  Q_PROPERTY(bool OnBattery READ onBattery)

 public:
  bool onBattery() const { return battery.loadRelaxed() != 0; }
  QAtomicInt battery = 0;
};

namespace {

// Before QTEST_MAIN's QApplication: these tests need no display, whoever runs them.
[[maybe_unused]] const bool kOffscreen = [] {
  if (!qEnvironmentVariableIsSet("QT_QPA_PLATFORM")) qputenv("QT_QPA_PLATFORM", "offscreen");
  return true;
}();

QDateTime at(int h, int m, int day = 12) { return QDateTime(QDate(2024, 6, day), QTime(h, m)); }

DonationInputs inputsAt(const QDateTime& now) {
  DonationInputs in;
  in.now = now;
  in.scheduleStart = QTime(22, 0);
  in.scheduleEnd = QTime(7, 0);
  return in;
}

class FakeIdle : public es::ui::IdleSource {
 public:
  std::optional<int> idleSeconds() override { return seconds; }
  std::optional<int> seconds;
};

class FakeSensors : public es::ui::MachineSensors {
 public:
  std::optional<bool> onBattery() override {
    ++batteryReads;
    return battery;
  }
  std::optional<int> gpuTemperatureC() override { return celsius; }
  std::optional<bool> battery;
  std::optional<int> celsius;
  int batteryReads = 0;
};

// A private bus daemon for one test (never the machine's own buses): its address, or "" if
// dbus-daemon could not start.
QString startPrivateBus(QProcess& daemon) {
  daemon.start(QStringLiteral("dbus-daemon"),
               {QStringLiteral("--session"), QStringLiteral("--nofork"), QStringLiteral("--print-address=1")});
  if (!daemon.waitForStarted(5000) || !daemon.waitForReadyRead(5000)) return {};
  return QString::fromUtf8(daemon.readLine()).trimmed();
}

}  // namespace

class UiDonation : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void scheduleWrapsPastMidnight() {
    const struct {
      QDateTime now;
      bool paused;
      QDateTime reconsiderAt;
    } cases[] = {{at(23, 30), false, at(7, 0, 13)},
                 {at(3, 0), false, at(7, 0)},
                 {at(22, 0), false, at(7, 0, 13)},
                 {at(7, 0), true, at(22, 0)},
                 {at(12, 0), true, at(22, 0)}};
    for (const auto& c : cases) {
      DonationInputs in = inputsAt(c.now);
      in.scheduleEnabled = true;
      const auto d = es::ui::decide(in);
      const QByteArray when = c.now.toString(Qt::ISODate).toLatin1();
      QVERIFY2(d.paused == c.paused, when.constData());
      QCOMPARE(d.reason, c.paused ? QStringLiteral("Outside the schedule (22:00\u201307:00)") : QString());
      QCOMPARE(d.reconsiderAt, c.reconsiderAt);
    }
  }

  void manualPauseWinsOverSchedule() {
    DonationInputs in = inputsAt(at(12, 0));  // outside the schedule, user at the keyboard, snoozed
    in.scheduleEnabled = in.pauseWhenUserActive = true;
    in.userIdleSeconds = 3;
    in.snoozeUntil = at(13, 0);
    in.manualPause = true;
    auto d = es::ui::decide(in);
    QCOMPARE(d.reason, QStringLiteral("Paused by you"));
    QVERIFY(d.paused && !d.reconsiderAt.isValid());
    in.manualPause = false;
    QCOMPARE(es::ui::decide(in).reason, QStringLiteral("Snoozed until 13:00"));
    in.snoozeUntil = QDateTime();
    QCOMPARE(es::ui::decide(in).reason, QStringLiteral("Outside the schedule (22:00\u201307:00)"));
    in.scheduleEnabled = false;
    QCOMPARE(es::ui::decide(in).reason, QStringLiteral("You are using the computer"));
  }

  void snoozeEndsByItself() {
    FakeEngine engine;
    DonationController controller(engine, nullptr);
    QDateTime now = at(14, 5);
    controller.setClock([&now] { return now; });
    controller.snooze(3600);
    QVERIFY(controller.paused());
    QCOMPARE(controller.reason(), QStringLiteral("Snoozed until 15:05"));
    QCOMPARE(controller.reconsiderAt(), at(15, 5));
    now = at(15, 4);
    controller.reevaluate();
    QVERIFY(controller.paused());
    now = at(15, 5);
    controller.reevaluate();
    QVERIFY(!controller.paused());
    QVERIFY(!controller.snoozeUntil().isValid());
    QCOMPARE(engine.pauseCalls, std::vector<bool>({true, false}));
  }

  void userActivityPausesOnlyWhenAsked() {
    DonationInputs in = inputsAt(at(12, 0));
    in.userIdleSeconds = 10;
    QVERIFY(!es::ui::decide(in).paused);
    in.pauseWhenUserActive = true;
    const auto d = es::ui::decide(in);
    QVERIFY(d.paused);
    QCOMPARE(d.reason, QStringLiteral("You are using the computer"));
    QCOMPARE(d.reconsiderAt, at(12, 0).addSecs(290));  // when 5 idle minutes would be reached
    in.userIdleSeconds = 300;
    QVERIFY(!es::ui::decide(in).paused);
  }

  void unknownIdleTimeNeverPauses() {
    DonationInputs in = inputsAt(at(12, 0));
    in.pauseWhenUserActive = true;
    QVERIFY(!es::ui::decide(in).paused);
    FakeIdle unknown;
    const std::vector<es::ui::IdleSource*> sources = {nullptr, &unknown};
    for (es::ui::IdleSource* idle : sources) {
      FakeEngine engine;
      DonationController controller(engine, idle);
      ClientSettings s;
      s.pauseWhenUserActive = true;
      controller.applySettings(s);
      QVERIFY(!controller.paused());
      QVERIFY(engine.pauseCalls.empty());
    }
    unknown.seconds = 0;  // the same controller pauses as soon as the idle time is known
    FakeEngine engine;
    DonationController controller(engine, &unknown);
    ClientSettings s;
    s.pauseWhenUserActive = true;
    controller.applySettings(s);
    QCOMPARE(engine.pauseCalls, std::vector<bool>({true}));
  }

  void batteryAndHeatPauseBeforeTheSchedule() {
    DonationInputs in = inputsAt(at(12, 0));
    in.onBattery = true;
    in.gpuTemperatureC = 95;
    QVERIFY(!es::ui::decide(in).paused);  // both rules off
    in.pauseOnBattery = true;
    QCOMPARE(es::ui::decide(in).reason, QStringLiteral("On battery power"));
    in.onBattery.reset();  // no UPower: never pauses
    in.pauseAboveGpuC = 85;
    auto hot = es::ui::decide(in);
    QVERIFY(hot.paused && hot.forHeat);
    QCOMPARE(hot.reason, QStringLiteral("GPU at 95\u00b0C (limit 85\u00b0C)"));
    in.scheduleEnabled = true;  // outside the schedule too: the hardware's reason is the one shown
    QVERIFY(es::ui::decide(in).forHeat);
    in.scheduleEnabled = false;
    in.gpuTemperatureC.reset();
    QVERIFY(!es::ui::decide(in).paused);
  }

  void aHotGpuResumesOnlyOnceCooledByTheMargin() {
    DonationInputs in = inputsAt(at(12, 0));
    in.pauseAboveGpuC = 80;
    in.gpuTemperatureC = 79;
    QVERIFY(!es::ui::decide(in).paused);
    in.gpuTemperatureC = 80;
    QVERIFY(es::ui::decide(in).forHeat);
    in.pausedForHeat = true;
    in.gpuTemperatureC = 76;  // cooler than the limit, not yet by the margin
    QVERIFY(es::ui::decide(in).forHeat);
    in.gpuTemperatureC = 80 - es::ui::kGpuCoolingC - 1;
    QVERIFY(!es::ui::decide(in).paused);
  }

  void controllerPausesForBatteryAndHeatFromItsSensors() {
    FakeEngine engine;
    FakeSensors sensors;
    DonationController controller(engine, nullptr, &sensors);
    ClientSettings s;  // pause on battery is the default
    controller.applySettings(s);
    QCOMPARE(sensors.batteryReads, 1);
    sensors.battery = true;
    controller.reevaluate();
    QCOMPARE(controller.reason(), QStringLiteral("On battery power"));
    sensors.battery = false;
    sensors.celsius = 90;
    s.pauseAboveGpuC = 88;
    controller.applySettings(s);
    QVERIFY(controller.paused());
    QVERIFY2(controller.reason().startsWith("GPU at 90"), qPrintable(controller.reason()));
    sensors.celsius = 85;  // within the margin: still paused
    controller.reevaluate();
    QVERIFY(controller.paused());
    sensors.celsius = 82;
    controller.reevaluate();
    QVERIFY(!controller.paused());
    // Battery, then heat without a break: the engine was told to pause once, and to resume once.
    QCOMPARE(engine.pauseCalls, std::vector<bool>({true, false}));
    s.pauseOnBattery = false;  // off: the sensor is not asked any more
    s.pauseAboveGpuC = 0;
    const int reads = sensors.batteryReads;
    controller.applySettings(s);
    QCOMPARE(sensors.batteryReads, reads);
  }

  // SystemSensors against a real bus daemon of its own with a fake UPower on it (in its own
  // thread: the sensor's call blocks this one).
  void upowerIsAskedOverDBus() {
    QProcess daemon;
    const QString address = startPrivateBus(daemon);
    if (address.isEmpty()) QFAIL("dbus-daemon did not start (Debian package dbus)");
    {
      es::ui::SystemSensors noUPower(QDBusConnection::connectToBus(address, QStringLiteral("client0")));
      QVERIFY(!noUPower.onBattery().has_value());  // a bus without UPower: unknown
    }
    QThread serverThread;
    FakeUPower upower;
    upower.moveToThread(&serverThread);
    serverThread.start();
    QDBusConnection server = QDBusConnection::connectToBus(address, QStringLiteral("server"));
    QVERIFY(server.registerObject(QStringLiteral("/org/freedesktop/UPower"), &upower,
                                  QDBusConnection::ExportAllProperties));
    QVERIFY(server.registerService(QStringLiteral("org.freedesktop.UPower")));
    {
      es::ui::SystemSensors sensors(QDBusConnection::connectToBus(address, QStringLiteral("client1")));
      QCOMPARE(sensors.onBattery(), std::optional<bool>(false));
      upower.battery.storeRelaxed(1);
      QCOMPARE(sensors.onBattery(), std::optional<bool>(true));
      sensors.setDevice(QStringLiteral("cpu"));
      QVERIFY(!sensors.gpuTemperatureC().has_value());
    }
    server.unregisterObject(QStringLiteral("/org/freedesktop/UPower"));
    serverThread.quit();
    serverThread.wait();
    QDBusConnection::disconnectFromBus(QStringLiteral("server"));
    QDBusConnection::disconnectFromBus(QStringLiteral("client0"));
    QDBusConnection::disconnectFromBus(QStringLiteral("client1"));
    daemon.kill();
    daemon.waitForFinished();
  }

  void idleSourceNeverBlocks() {
    // Here, as on any machine without a session bus or either service, the answer comes at once.
    es::ui::ScreenSaverIdleSource source;
    QElapsedTimer elapsed;
    elapsed.start();
    const std::optional<int> idle = source.idleSeconds();
    QVERIFY(elapsed.elapsed() < 3 * es::ui::ScreenSaverIdleSource::kTimeoutMs);
    QVERIFY(!idle || *idle >= 0);
  }

  void controllerAppliesRateCapsToEngine() {
    FakeEngine engine;
    DonationController controller(engine, nullptr);
    using Calls = std::vector<std::pair<int, int>>;
    ClientSettings s;
    controller.applySettings(s);
    QCOMPARE(engine.rateLimitCalls, Calls({{0, 0}}));
    controller.applySettings(s);
    s.idleMinutes = 9;
    controller.applySettings(s);
    QCOMPARE(engine.rateLimitCalls.size(), size_t(1));
    s.uploadLimitKiB = 100;
    controller.applySettings(s);
    s.downloadLimitKiB = 2048;
    controller.applySettings(s);
    QCOMPARE(engine.rateLimitCalls, Calls({{0, 0}, {102400, 0}, {102400, 2097152}}));
  }

  void controllerPausesAndResumesEngineOnlyOnChange() {
    FakeEngine engine;
    DonationController controller(engine, nullptr);
    QDateTime now = at(12, 0);
    controller.setClock([&now] { return now; });
    QSignalSpy spy(&controller, &DonationController::decisionChanged);
    ClientSettings s;
    s.scheduleEnabled = true;
    controller.applySettings(s);
    controller.reevaluate();
    QCOMPARE(engine.pauseCalls, std::vector<bool>({true}));
    QCOMPARE(spy.count(), 1);
    QCOMPARE(spy.at(0).at(1).toString(), QStringLiteral("Outside the schedule (22:00\u201307:00)"));
    QCOMPARE(controller.reconsiderAt(), at(22, 0));
    controller.setManualPause(true);  // another reason to stay paused: reported, but no new command
    controller.setManualPause(false);
    QCOMPARE(spy.count(), 3);
    QCOMPARE(engine.pauseCalls, std::vector<bool>({true}));
    now = at(22, 0);
    controller.reevaluate();
    QCOMPARE(engine.pauseCalls, std::vector<bool>({true, false}));
    QCOMPARE(spy.count(), 4);
    QCOMPARE(spy.last(), QVariantList({false, QString()}));
  }

  void finishRoundThenPauseBecomesManualPause() {
    FakeEngine engine;
    DonationController controller(engine, nullptr);
    controller.finishRoundThenPause();
    QCOMPARE(engine.finishRoundCalls, 1);
    QVERIFY(!controller.paused() && controller.finishingRound());
    Q_EMIT engine.pausedChanged(true);
    QVERIFY(controller.paused() && controller.manualPause() && !controller.finishingRound());
    QCOMPARE(controller.reason(), QStringLiteral("Paused by you"));
    QVERIFY(engine.pauseCalls.empty());  // the engine paused itself; no redundant command
    controller.setManualPause(false);
    QCOMPARE(engine.pauseCalls, std::vector<bool>({false}));
  }

  void trayActionsCallTheRightCommands() {
    FakeEngine engine;
    DonationController controller(engine, nullptr);
    const QDateTime now = at(9, 0);
    controller.setClock([now] { return now; });
    QWidget window;
    es::ui::TrayIcon tray(controller, engine, &window);
    QCOMPARE(tray.show(), QSystemTrayIcon::isSystemTrayAvailable());
    QCOMPARE(tray.pauseAction()->text(), QStringLiteral("Pause"));
    QVERIFY(tray.toolTip().contains("Training"));
    tray.pauseAction()->trigger();
    QVERIFY(controller.paused());
    QCOMPARE(tray.pauseAction()->text(), QStringLiteral("Resume"));
    QVERIFY(tray.toolTip().contains("Paused by you"));
    tray.pauseAction()->trigger();
    QVERIFY(!controller.paused());
    QCOMPARE(engine.pauseCalls, std::vector<bool>({true, false}));
    tray.snoozeAction()->trigger();
    QCOMPARE(controller.snoozeUntil(), now.addSecs(3600));
    QVERIFY(tray.toolTip().contains("Snoozed until 10:00"));
    tray.pauseAction()->trigger();  // "Resume" ends the snooze
    QVERIFY(!controller.paused() && !controller.snoozeUntil().isValid());
    tray.finishRoundAction()->trigger();
    QCOMPARE(engine.finishRoundCalls, 1);
    QVERIFY(!window.isVisible());
    tray.showAction()->trigger();
    QVERIFY(window.isVisible());
    QCOMPARE(engine.quitCalls, 0);
    tray.quitAction()->trigger();
    QCOMPARE(engine.quitCalls, 1);
  }
};

QTEST_MAIN(UiDonation)
#include "tst_ui_donation.moc"
