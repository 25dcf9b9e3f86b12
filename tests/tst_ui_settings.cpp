// The donor's settings and the dialogs that edit them: ClientSettings over QSettings (round trip,
// fallback to defaults, validation naming the bad field), the settings and first-run dialogs, and the
// XDG autostart entry. The "when to donate" rules, the controller and the tray are specified in
// tst_ui_donation.cpp. Runs on the offscreen platform.
#include "core/settings/client_settings.h"
#include "ui/autostart.h"
#include "ui/first_run_dialog.h"
#include "ui/settings_dialog.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDialogButtonBox>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QRadioButton>
#include <QScopeGuard>
#include <QSettings>
#include <QSpinBox>
#include <QTemporaryDir>
#include <QTimeEdit>
#include <QtTest>

using es::settings::ClientSettings;

namespace {

// Before QTEST_MAIN's QApplication: these tests need no display, whoever runs them.
[[maybe_unused]] const bool kOffscreen = [] {
  if (!qEnvironmentVariableIsSet("QT_QPA_PLATFORM")) qputenv("QT_QPA_PLATFORM", "offscreen");
  return true;
}();

const QString kHex40 = QStringLiteral("0123456789abcdef0123456789abcdef01234567");
const QString kHex64 = QStringLiteral("0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef");
const QString kB32 = QStringLiteral("MFRGGZDFMZTWQ2LKNNWG23TPOBYXE43U");

ClientSettings everyFieldChanged() {
  ClientSettings s;
  s.device = QStringLiteral("cuda:1");
  s.hostMemoryCapMiB = 12288;
  s.gpuMemoryCapMiB = 6144;
  s.pauseOnBattery = false;
  s.pauseAboveGpuC = 83;
  s.claimSize = 12;
  s.diskQuotaMiB = 3000;
  s.dataBudgetMiB = 700;
  s.dataDir = QStringLiteral("/srv/expertswarm data");
  s.uploadLimitKiB = 512;
  s.downloadLimitKiB = 2048;
  s.pauseWhenUserActive = true;
  s.idleMinutes = 17;
  s.scheduleEnabled = true;
  s.scheduleStart = QTime(9, 30);
  s.scheduleEnd = QTime(18, 45);
  s.startAtLogin = true;
  s.firstRunDone = true;
  s.runSource = QStringLiteral("magnet:?xt=urn:btmh:1220") + kHex64 + QStringLiteral("&dn=run");
  s.publicNetwork = true;
  s.portMapping = true;
  s.bootstrapNodes = {QStringLiteral("192.0.2.10:6881"), QStringLiteral("[2001:db8::1]:25401")};
  s.listenPort = 23456;
  return s;
}

// The fields in which a and b differ, checked one by one so a gap in operator== cannot hide one.
QStringList differingFields(const ClientSettings& a, const ClientSettings& b) {
  QStringList d;
  const auto check = [&d](bool same, const char* name) {
    if (!same) d << QLatin1String(name);
  };
  check(a.device == b.device, "device");
  check(a.hostMemoryCapMiB == b.hostMemoryCapMiB, "hostMemoryCapMiB");
  check(a.gpuMemoryCapMiB == b.gpuMemoryCapMiB, "gpuMemoryCapMiB");
  check(a.pauseOnBattery == b.pauseOnBattery, "pauseOnBattery");
  check(a.pauseAboveGpuC == b.pauseAboveGpuC, "pauseAboveGpuC");
  check(a.claimSize == b.claimSize, "claimSize");
  check(a.diskQuotaMiB == b.diskQuotaMiB, "diskQuotaMiB");
  check(a.dataBudgetMiB == b.dataBudgetMiB, "dataBudgetMiB");
  check(a.dataDir == b.dataDir, "dataDir");
  check(a.uploadLimitKiB == b.uploadLimitKiB, "uploadLimitKiB");
  check(a.downloadLimitKiB == b.downloadLimitKiB, "downloadLimitKiB");
  check(a.pauseWhenUserActive == b.pauseWhenUserActive, "pauseWhenUserActive");
  check(a.idleMinutes == b.idleMinutes, "idleMinutes");
  check(a.scheduleEnabled == b.scheduleEnabled, "scheduleEnabled");
  check(a.scheduleStart == b.scheduleStart, "scheduleStart");
  check(a.scheduleEnd == b.scheduleEnd, "scheduleEnd");
  check(a.startAtLogin == b.startAtLogin, "startAtLogin");
  check(a.firstRunDone == b.firstRunDone, "firstRunDone");
  check(a.runSource == b.runSource, "runSource");
  check(a.publicNetwork == b.publicNetwork, "publicNetwork");
  check(a.portMapping == b.portMapping, "portMapping");
  check(a.bootstrapNodes == b.bootstrapNodes, "bootstrapNodes");
  check(a.listenPort == b.listenPort, "listenPort");
  return d;
}

}  // namespace

class TestUiSettings : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void settingsRoundTripThroughQSettings() {
    const ClientSettings changed = everyFieldChanged();
    QCOMPARE(differingFields(changed, ClientSettings{}).size(), 23);
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const QString path = dir.filePath(QStringLiteral("expertswarm.ini"));
    {
      QSettings store(path, QSettings::IniFormat);
      changed.save(store);
      store.sync();
      QCOMPARE(store.status(), QSettings::NoError);
    }
    QSettings store(path, QSettings::IniFormat);
    QStringList keys = store.allKeys();
    keys.sort();
    QCOMPARE(keys, QStringList({"desktop/firstRunDone",
                                "desktop/startAtLogin",
                                "donation/idleMinutes",
                                "donation/pauseAboveGpuCelsius",
                                "donation/pauseOnBattery",
                                "donation/pauseWhenUserActive",
                                "donation/scheduleEnabled",
                                "donation/scheduleEnd",
                                "donation/scheduleStart",
                                "engine/claimSize",
                                "engine/dataBudgetMiB",
                                "engine/dataDir",
                                "engine/device",
                                "engine/diskQuotaMiB",
                                "engine/gpuMemoryCapMiB",
                                "engine/hostMemoryCapMiB",
                                "network/bootstrap",
                                "network/downloadLimitKiB",
                                "network/listenPort",
                                "network/portMapping",
                                "network/public",
                                "network/uploadLimitKiB",
                                "run/source"}));
    QCOMPARE(store.value("donation/scheduleStart").toString(), QStringLiteral("09:30"));
    const ClientSettings loaded = ClientSettings::load(store);
    QCOMPARE(differingFields(loaded, changed), QStringList());
    QVERIFY(loaded == changed);
    QVERIFY(loaded != ClientSettings{});
  }

  void missingOrBadValuesFallBackToDefaults() {
    QTemporaryDir dir;
    QSettings store(dir.filePath(QStringLiteral("bad.ini")), QSettings::IniFormat);
    QCOMPARE(differingFields(ClientSettings::load(store), ClientSettings{}), QStringList());
    // clang-format off
    const std::pair<const char*, const char*> bad[] = {
        {"engine/device", "gpu"},           {"engine/gpuMemoryCapMiB", "lots"}, {"engine/claimSize", "99"},
        {"network/uploadLimitKiB", "-4"},   {"donation/idleMinutes", "0"},      {"donation/scheduleStart", "25:99"},
        {"donation/scheduleEnabled", "yes please"}, {"desktop/firstRunDone", "maybe"}, {"run/source", "http://x"},
        {"network/public", "sure"},         {"network/listenPort", "70000"},    {"network/bootstrap", "router:0,x"},
        {"engine/hostMemoryCapMiB", "-1"},  {"donation/pauseAboveGpuCelsius", "30"}, {"donation/pauseOnBattery", "no!"}};
    // clang-format on
    for (const auto& [key, value] : bad) store.setValue(QLatin1String(key), QString::fromLatin1(value));
    store.setValue("network/downloadLimitKiB", "300");  // one good value among them survives
    const ClientSettings loaded = ClientSettings::load(store);
    QCOMPARE(differingFields(loaded, ClientSettings{}), QStringList({"downloadLimitKiB"}));
    QCOMPARE(loaded.downloadLimitKiB, 300);
    QCOMPARE(loaded.validate(), QString());
  }

  void validateNamesTheBadField_data() {
    QTest::addColumn<QString>("field");
    QTest::addColumn<QString>("value");
    QTest::addColumn<QString>("named");  // words the message must contain; "" = valid
    QTest::addColumn<QString>("shown");
    // clang-format off
    QTest::newRow("defaults are valid") << "" << "" << "" << "";
    QTest::newRow("cuda:12 is a device") << "device" << "cuda:12" << "" << "";
    QTest::newRow("64 experts") << "claimSize" << "64" << "" << "";
    QTest::newRow("equal times, schedule off") << "sameTimesOff" << "" << "" << "";
    QTest::newRow("device gpu") << "device" << "gpu" << "Device" << "\"gpu\"";
    QTest::newRow("device cuda:x") << "device" << "cuda:x" << "Device" << "\"cuda:x\"";
    QTest::newRow("negative memory cap") << "gpuMemoryCapMiB" << "-1" << "GPU memory cap" << "-1";
    QTest::newRow("negative host cap") << "hostMemoryCapMiB" << "-2" << "Host memory cap" << "-2";
    QTest::newRow("GPU limit off") << "pauseAboveGpuC" << "0" << "" << "";
    QTest::newRow("GPU limit 39") << "pauseAboveGpuC" << "39" << "GPU temperature limit" << "39";
    QTest::newRow("GPU limit 111") << "pauseAboveGpuC" << "111" << "GPU temperature limit" << "111";
    QTest::newRow("GPU limit 85") << "pauseAboveGpuC" << "85" << "" << "";
    QTest::newRow("65 experts") << "claimSize" << "65" << "Claim size" << "65";
    QTest::newRow("negative claim") << "claimSize" << "-3" << "Claim size" << "-3";
    QTest::newRow("negative upload") << "uploadLimitKiB" << "-5" << "Upload limit" << "-5";
    QTest::newRow("negative download") << "downloadLimitKiB" << "-7" << "Download limit" << "-7";
    QTest::newRow("idle minutes 0") << "idleMinutes" << "0" << "Idle minutes" << "not 0";
    QTest::newRow("idle minutes 1441") << "idleMinutes" << "1441" << "Idle minutes" << "1441";
    QTest::newRow("empty schedule") << "sameTimesOn" << "" << "Schedule" << "09:00";
    QTest::newRow("not a magnet") << "runSource" << "Default" << "Run source" << "\"Default\"";
    QTest::newRow("short infohash") << "runSource" << "magnet:?xt=urn:btih:abc" << "Run source" << "btih:abc";
    QTest::newRow("v2 link") << "runSource" << "magnet:?xt=urn:btmh:1220" + kHex64 + "&dn=run" << "" << "";
    QTest::newRow("v1 hex link") << "runSource" << "magnet:?xt=urn:btih:" + kHex40 << "btmh" << "btih:" + kHex40;
    QTest::newRow("v1 base32 link") << "runSource" << "magnet:?xt=urn:btih:" + kB32 << "btmh" << "btih:" + kB32;
    QTest::newRow("bootstrap without port") << "bootstrapNodes" << "203.0.113.5" << "Bootstrap node" << "\"203.0.113.5\"";
    QTest::newRow("bootstrap port 0") << "bootstrapNodes" << "192.0.2.1:0" << "Bootstrap node" << "192.0.2.1:0";
    QTest::newRow("bootstrap IPv6") << "bootstrapNodes" << "[2001:db8::1]:6881" << "" << "";
    QTest::newRow("listen port 65536") << "listenPort" << "65536" << "Listen port" << "65536";
    // clang-format on
  }
  void validateNamesTheBadField() {
    QFETCH(QString, field);
    QFETCH(QString, value);
    QFETCH(QString, named);
    QFETCH(QString, shown);
    ClientSettings s;
    if (field == "device") s.device = value;
    if (field == "gpuMemoryCapMiB") s.gpuMemoryCapMiB = value.toInt();
    if (field == "hostMemoryCapMiB") s.hostMemoryCapMiB = value.toInt();
    if (field == "pauseAboveGpuC") s.pauseAboveGpuC = value.toInt();
    if (field == "claimSize") s.claimSize = value.toInt();
    if (field == "uploadLimitKiB") s.uploadLimitKiB = value.toInt();
    if (field == "downloadLimitKiB") s.downloadLimitKiB = value.toInt();
    if (field == "idleMinutes") s.idleMinutes = value.toInt();
    if (field == "runSource") s.runSource = value;
    if (field == "bootstrapNodes") s.bootstrapNodes = QStringList{value};
    if (field == "listenPort") s.listenPort = value.toInt();
    if (field.startsWith("sameTimes")) {
      s.scheduleEnabled = field == "sameTimesOn";
      s.scheduleStart = s.scheduleEnd = QTime(9, 0);
    }
    const QString message = s.validate();
    QCOMPARE(message.isEmpty(), named.isEmpty());
    QVERIFY2(message.contains(named) && message.contains(shown), qPrintable(message));
  }

  void settingsDialogRoundTripsAndRefusesBadInput() {
    const ClientSettings changed = everyFieldChanged();
    es::ui::SettingsDialog dialog(changed);
    QCOMPARE(differingFields(dialog.settings(), changed), QStringList());
    ClientSettings kept;  // the fields the dialog does not show come from what it was given
    kept.runSource = changed.runSource;
    dialog.setSettings(kept);
    QCOMPARE(differingFields(dialog.settings(), kept), QStringList());
    QCOMPARE(dialog.findChild<QSpinBox*>("claimSize")->text(), QStringLiteral("auto"));
    QCOMPARE(dialog.findChild<QSpinBox*>("uploadLimit")->text(), QStringLiteral("unlimited"));

    dialog.show();
    dialog.findChild<QComboBox*>("device")->setCurrentText("gpu");
    dialog.findChild<QSpinBox*>("uploadLimit")->setValue(640);
    dialog.findChild<QSpinBox*>("downloadLimit")->setValue(4096);
    dialog.findChild<QSpinBox*>("claimSize")->setValue(8);
    dialog.findChild<QSpinBox*>("gpuMemoryCap")->setValue(3000);
    dialog.findChild<QSpinBox*>("hostMemoryCap")->setValue(9000);
    dialog.findChild<QSpinBox*>("pauseAboveGpuC")->setValue(80);
    dialog.findChild<QCheckBox*>("pauseOnBattery")->setChecked(false);
    dialog.findChild<QCheckBox*>("pauseWhenUserActive")->setChecked(true);
    dialog.findChild<QSpinBox*>("idleMinutes")->setValue(12);
    dialog.findChild<QCheckBox*>("scheduleEnabled")->setChecked(true);
    dialog.findChild<QTimeEdit*>("scheduleStart")->setTime(QTime(7, 0));  // 07:00–07:00: empty
    dialog.findChild<QLineEdit*>("dataDir")->setText("/data/es");
    dialog.findChild<QCheckBox*>("startAtLogin")->setChecked(true);
    auto* error = dialog.findChild<QLabel*>("error");
    dialog.accept();
    QVERIFY(dialog.isVisible() && dialog.result() != QDialog::Accepted);
    QVERIFY2(error->isVisible() && error->text().contains("\"gpu\""), qPrintable(error->text()));
    dialog.findChild<QComboBox*>("device")->setCurrentText("cuda:2");
    dialog.accept();
    QVERIFY2(dialog.isVisible() && error->text().contains("Schedule"), qPrintable(error->text()));
    dialog.findChild<QTimeEdit*>("scheduleEnd")->setTime(QTime(19, 30));
    dialog.accept();
    QVERIFY(!dialog.isVisible() && dialog.result() == QDialog::Accepted);
    const ClientSettings got = dialog.settings();
    QCOMPARE(differingFields(got, kept),
             QStringList({"device", "hostMemoryCapMiB", "gpuMemoryCapMiB", "pauseOnBattery", "pauseAboveGpuC",
                          "claimSize", "dataDir", "uploadLimitKiB", "downloadLimitKiB", "pauseWhenUserActive",
                          "idleMinutes", "scheduleEnabled", "scheduleStart", "scheduleEnd", "startAtLogin"}));
    QCOMPARE(got.device, QStringLiteral("cuda:2"));
    QVERIFY(got.uploadLimitKiB == 640 && got.downloadLimitKiB == 4096 && got.claimSize == 8);
    QVERIFY(got.gpuMemoryCapMiB == 3000 && got.idleMinutes == 12 && got.dataDir == "/data/es");
    QVERIFY(got.hostMemoryCapMiB == 9000 && got.pauseAboveGpuC == 80 && !got.pauseOnBattery);
    QVERIFY(got.scheduleStart == QTime(7, 0) && got.scheduleEnd == QTime(19, 30));
  }

  // Opt-in, checked: the dialog names what joining contacts and the port peers will connect to.
  void firstRunDialogOffersThePublicNetwork() {
    es::ui::FirstRunDialog dialog;
    auto* join = dialog.findChild<QCheckBox*>("publicNetwork");
    QVERIFY(join && join->isChecked());
    QVERIFY(join->text().contains("Join the public ExpertSwarm network"));
    dialog.setNetwork(true, ClientSettings::publicRouters(), 23456);
    const QString note = dialog.findChild<QLabel*>("networkNote")->text();
    for (const QString& router : ClientSettings::publicRouters()) QVERIFY2(note.contains(router), qPrintable(note));
    QVERIFY2(note.contains("port 23456") && note.contains("TCP and UDP"), qPrintable(note));
    QVERIFY(dialog.joinPublicNetwork());
    join->setChecked(false);
    QVERIFY(!dialog.joinPublicNetwork());
  }

  void defaultsAreOptInAndNameThePublicRouters() {
    const ClientSettings d;
    QVERIFY(!d.publicNetwork && !d.portMapping && d.listenPort == 0);
    // The list itself is in docs/ARCHITECTURE.md ("Network defaults"); tests never spell those hosts.
    QVERIFY(!ClientSettings::publicRouters().isEmpty());
    QCOMPARE(d.bootstrapNodes, ClientSettings::publicRouters());
    for (int i = 0; i < 50; ++i) {
      const int port = ClientSettings::randomListenPort();
      QVERIFY(port >= 10000 && port <= 32767);
    }
  }

  void firstRunDialogValidatesMagnets_data() {
    QTest::addColumn<QString>("text");
    QTest::addColumn<QString>("error");  // words the error must contain; "" = valid
    const QString v2 = "xt=urn:btmh:1220" + kHex64;
    // clang-format off
    QTest::newRow("btmh hex") << "magnet:?" + v2 << "";
    QTest::newRow("btmh HEX") << "magnet:?xt=urn:btmh:1220" + kHex64.toUpper() << "";
    QTest::newRow("btmh, other params first") << "magnet:?dn=run&tr=udp://t:1&" + v2 << "";
    QTest::newRow("btmh, other params after") << "magnet:?" + v2 + "&dn=run&tr=udp://t:1" << "";
    QTest::newRow("btmh HEX, params around") << "magnet:?dn=run&xt=urn:btmh:1220" + kHex64.toUpper() + "&tr=udp://t:1"
                                             << "";
    QTest::newRow("hybrid v1 + v2") << "magnet:?xt=urn:btih:" + kHex40 + "&" + v2 << "";
    QTest::newRow("surrounding spaces") << "  magnet:?" + v2 + "\n" << "";
    QTest::newRow("empty") << "" << "Paste";
    QTest::newRow("default") << "default" << "magnet:?";
    QTest::newRow("web link") << "https://example.org/run.torrent" << "magnet:?";
    QTest::newRow("no ?") << "magnet:" + v2 << "magnet:?";
    QTest::newRow("no xt") << "magnet:?dn=run" << "btmh";
    QTest::newRow("btih hex") << "magnet:?xt=urn:btih:" + kHex40 << "btmh";
    QTest::newRow("btih HEX, other params around") << "magnet:?dn=run&xt=urn:btih:" + kHex40.toUpper() + "&tr=udp://t:1"
                                                   << "btmh";
    QTest::newRow("btih base32") << "magnet:?xt=urn:btih:" + kB32 << "btmh";
    QTest::newRow("btmh 63 hex") << "magnet:?xt=urn:btmh:1220" + kHex64.left(63) << "btmh";
    QTest::newRow("btmh 65 hex") << "magnet:?" + v2 + "0" << "btmh";
    QTest::newRow("btmh non-hex g") << "magnet:?xt=urn:btmh:1220g" + kHex64.mid(1) << "btmh";
    QTest::newRow("btmh not sha2-256") << "magnet:?xt=urn:btmh:1120" + kHex64 << "btmh";
    QTest::newRow("btmh inside another param") << "magnet:?dn=" + v2 << "btmh";
    // clang-format on
  }
  void firstRunDialogValidatesMagnets() {
    QFETCH(QString, text);
    QFETCH(QString, error);
    const bool valid = error.isEmpty();
    const QString message = es::ui::magnetError(text);
    QCOMPARE(message.isEmpty(), valid);
    QVERIFY2(message.contains(error), qPrintable(message));
    es::ui::FirstRunDialog dialog;
    QPushButton* ok = dialog.findChild<QDialogButtonBox*>("buttons")->button(QDialogButtonBox::Ok);
    auto* shown = dialog.findChild<QLabel*>("magnetError");
    dialog.findChild<QLineEdit*>("magnetLink")->setText(text);
    QVERIFY(ok->isEnabled());  // the default run is chosen: the field does not matter
    QCOMPARE(dialog.runSource(), QStringLiteral("default"));
    dialog.findChild<QRadioButton*>("magnetRun")->setChecked(true);
    QCOMPARE(ok->isEnabled(), valid);
    QCOMPARE(shown->isVisibleTo(&dialog), !valid);
    QCOMPARE(shown->text(), message);
    if (valid) QCOMPARE(dialog.runSource(), text.trimmed());
  }

  void v1RunSourceIsNotLoaded() {
    QTemporaryDir dir;
    QSettings store(dir.filePath(QStringLiteral("v1.ini")), QSettings::IniFormat);
    store.setValue("run/source", "magnet:?xt=urn:btih:" + kHex40 + "&dn=run");
    QCOMPARE(ClientSettings::load(store).runSource, ClientSettings{}.runSource);
    const QString v2 = "magnet:?xt=urn:btih:" + kHex40 + "&xt=urn:btmh:1220" + kHex64.toUpper() + "&dn=run";
    store.setValue("run/source", v2);
    QCOMPARE(ClientSettings::load(store).runSource, v2);
  }

  void autostartEntryIsWrittenAndRemoved() {
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const QByteArray previous = qgetenv("XDG_CONFIG_HOME");
    const auto restore = qScopeGuard([&] { qputenv("XDG_CONFIG_HOME", previous); });
    qputenv("XDG_CONFIG_HOME", dir.path().toUtf8());
    const QString path = dir.filePath("autostart/expertswarm.desktop");
    QCOMPARE(es::ui::autostartEntryPath(), path);
    QVERIFY(!es::ui::startsAtLogin());
    QCOMPARE(es::ui::setStartAtLogin(true, "/opt/Expert Swarm/expertswarm"), QString());
    QVERIFY(es::ui::startsAtLogin());
    QFile file(path);
    QVERIFY(file.open(QIODevice::ReadOnly | QIODevice::Text));
    const QStringList lines = QString::fromUtf8(file.readAll()).split('\n');
    QCOMPARE(lines.value(0), QStringLiteral("[Desktop Entry]"));
    for (const char* line : {"Type=Application", "Name=ExpertSwarm", "Exec=\"/opt/Expert Swarm/expertswarm\"",
                             "Icon=expertswarm", "X-GNOME-Autostart-enabled=true"})
      QVERIFY2(lines.contains(QLatin1String(line)), line);
    QVERIFY(!lines.filter(QRegularExpression("^Comment=.+")).isEmpty());
    QCOMPARE(es::ui::setStartAtLogin(false, "/opt/Expert Swarm/expertswarm"), QString());
    QVERIFY(!QFile::exists(path) && !es::ui::startsAtLogin());
    QCOMPARE(es::ui::setStartAtLogin(false, QString()), QString());  // removing twice is fine
    qputenv("XDG_CONFIG_HOME", dir.filePath("not-a-dir").toUtf8());
    QFile blocker(dir.filePath("not-a-dir"));  // a file where the config folder should be
    QVERIFY(blocker.open(QIODevice::WriteOnly));
    blocker.close();
    QVERIFY(!es::ui::setStartAtLogin(true, "/usr/bin/expertswarm").isEmpty());
  }
};

QTEST_MAIN(TestUiSettings)
#include "tst_ui_settings.moc"
