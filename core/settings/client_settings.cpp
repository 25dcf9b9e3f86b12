#include "core/settings/client_settings.h"

#include <QRandomGenerator>
#include <QRegularExpression>
#include <QSettings>

#include <climits>

namespace es::settings {

namespace {

// Every key once: the GUI, the headless client and the tests reach QSettings only through these.
constexpr auto kDevice = "engine/device";
constexpr auto kHostMemoryCapMiB = "engine/hostMemoryCapMiB";
constexpr auto kGpuMemoryCapMiB = "engine/gpuMemoryCapMiB";
constexpr auto kDiskQuotaMiB = "engine/diskQuotaMiB";
constexpr auto kDataBudgetMiB = "engine/dataBudgetMiB";
constexpr auto kClaimSize = "engine/claimSize";
constexpr auto kDataDir = "engine/dataDir";
constexpr auto kUploadLimitKiB = "network/uploadLimitKiB";
constexpr auto kDownloadLimitKiB = "network/downloadLimitKiB";
constexpr auto kPublicNetwork = "network/public";
constexpr auto kPortMapping = "network/portMapping";
constexpr auto kBootstrapNodes = "network/bootstrap";
constexpr auto kListenPort = "network/listenPort";
constexpr auto kPauseWhenUserActive = "donation/pauseWhenUserActive";
constexpr auto kIdleMinutes = "donation/idleMinutes";
constexpr auto kScheduleEnabled = "donation/scheduleEnabled";
constexpr auto kScheduleStart = "donation/scheduleStart";
constexpr auto kScheduleEnd = "donation/scheduleEnd";
constexpr auto kPauseOnBattery = "donation/pauseOnBattery";
constexpr auto kPauseAboveGpuC = "donation/pauseAboveGpuCelsius";
constexpr auto kStartAtLogin = "desktop/startAtLogin";
constexpr auto kFirstRunDone = "desktop/firstRunDone";
constexpr auto kRunSource = "run/source";

constexpr auto kTimeFormat = "HH:mm";  // human-editable in the .ini file
constexpr int kMaxClaimSize = 64;
constexpr int kMaxIdleMinutes = 24 * 60;
// A GPU limit below 40 °C would pause an idle GPU in a warm room; above 110 °C every GPU has
// throttled or shut down by itself long before.
constexpr int kMinGpuCelsius = 40, kMaxGpuCelsius = 110;
constexpr int kRandomPortLow = 10000, kRandomPortHigh = 32767;

// The readers fall back to the default per field, so one hand-edited typo in the file costs that
// one value, never the whole configuration.
QString readString(const QSettings& store, const char* key, const QString& fallback) {
  const QVariant v = store.value(QLatin1String(key));
  return v.isValid() && v.canConvert<QString>() ? v.toString() : fallback;
}

int readInt(const QSettings& store, const char* key, int fallback, int min, int max) {
  const QVariant v = store.value(QLatin1String(key));
  bool ok = false;
  const int value = v.isValid() ? v.toInt(&ok) : 0;
  return ok && value >= min && value <= max ? value : fallback;
}

// QVariant::toBool() reads any non-empty string but "0"/"false" as true; a typo must not switch
// a feature on, so only the spellings QSettings itself writes are accepted.
bool readBool(const QSettings& store, const char* key, bool fallback) {
  const QVariant v = store.value(QLatin1String(key));
  if (!v.isValid()) return fallback;
  if (v.typeId() == QMetaType::Bool) return v.toBool();
  const QString s = v.toString().trimmed().toLower();
  if (s == QLatin1String("true") || s == QLatin1String("1")) return true;
  if (s == QLatin1String("false") || s == QLatin1String("0")) return false;
  return fallback;
}

QTime readTime(const QSettings& store, const char* key, const QTime& fallback) {
  const QVariant v = store.value(QLatin1String(key));
  if (!v.isValid()) return fallback;
  const QTime t = QTime::fromString(v.toString().trimmed(), QLatin1String(kTimeFormat));
  return t.isValid() ? t : fallback;
}

bool deviceIsValid(const QString& device) {
  static const QRegularExpression re(QStringLiteral("^(auto|cpu|cuda|cuda:[0-9]+)$"));
  return re.match(device).hasMatch();
}

// Empty when `text` is a magnet link that names an ExpertSwarm run; otherwise why not. A run is named by
// the v2 info-hash of its run torrent (xt=urn:btmh:1220 + 64 hex digits), so v1 links (btih) are refused.
// The rule is the one app/command_line.cpp's runIdOfMagnet() applies, so every link accepted here is one
// the client can join.
QString magnetProblem(const QString& text) {
  if (!text.startsWith(QLatin1String("magnet:?"))) return QStringLiteral("a magnet link starts with \"magnet:?\"");
  static const QRegularExpression v2(QStringLiteral("^magnet:\\?(.*&)?xt=urn:btmh:1220[0-9a-fA-F]{64}(&|$)"));
  if (v2.match(text).hasMatch()) return {};
  return QStringLiteral(
      "ExpertSwarm runs are named by their v2 info-hash: the link needs xt=urn:btmh:1220 followed by 64 hex digits "
      "(peers print it when they start: \"Others join this run with --run magnet:?xt=urn:btmh:1220\u2026\"); "
      "v1 links (btih) cannot name a run");
}

// HOST:PORT with a port in 1–65535 (a bracketed IPv6 address counts as a host); the client's
// --bootstrap accepts the same.
bool isHostPort(const QString& text) {
  static const QRegularExpression re(QStringLiteral("^(\\[[0-9a-fA-F:.]+\\]|[^:\\s,]+):([0-9]{1,5})$"));
  const auto m = re.match(text);
  return m.hasMatch() && m.captured(2).toInt() >= 1 && m.captured(2).toInt() <= 65535;
}

// Stored as one comma-separated string so the .ini file stays hand-editable.
QStringList readNodes(const QSettings& store, const char* key, const QStringList& fallback) {
  const QVariant v = store.value(QLatin1String(key));
  if (!v.isValid()) return fallback;
  QStringList nodes;
  for (const QString& part : v.toStringList().join(QLatin1Char(',')).split(QLatin1Char(','), Qt::SkipEmptyParts))
    nodes << part.trimmed();
  nodes.removeAll(QString());
  for (const auto& node : nodes)
    if (!isHostPort(node)) return fallback;
  return nodes;
}

// Magnet links run to hundreds of characters; the message only has to let the user recognise it.
QString elided(const QString& value) {
  constexpr int kMax = 60;
  return value.size() <= kMax ? value : value.left(kMax - 1) + QChar(0x2026);
}

}  // namespace

QStringList ClientSettings::publicRouters() {
  return {QStringLiteral("router.bittorrent.com:6881"), QStringLiteral("router.utorrent.com:6881"),
          QStringLiteral("dht.transmissionbt.com:6881"), QStringLiteral("dht.libtorrent.org:25401")};
}

int ClientSettings::randomListenPort() {
  return QRandomGenerator::system()->bounded(kRandomPortLow, kRandomPortHigh + 1);
}

void ClientSettings::saveListenPort(QSettings& store, int port) { store.setValue(QLatin1String(kListenPort), port); }

ClientSettings ClientSettings::load(const QSettings& store) {
  const ClientSettings d;
  ClientSettings s;
  const QString device = readString(store, kDevice, d.device).trimmed();
  s.device = deviceIsValid(device) ? device : d.device;
  s.hostMemoryCapMiB = readInt(store, kHostMemoryCapMiB, d.hostMemoryCapMiB, 0, INT_MAX);
  s.gpuMemoryCapMiB = readInt(store, kGpuMemoryCapMiB, d.gpuMemoryCapMiB, 0, INT_MAX);
  s.claimSize = readInt(store, kClaimSize, d.claimSize, 0, kMaxClaimSize);
  s.diskQuotaMiB = readInt(store, kDiskQuotaMiB, d.diskQuotaMiB, 0, INT_MAX);
  s.dataBudgetMiB = readInt(store, kDataBudgetMiB, d.dataBudgetMiB, 0, INT_MAX);
  s.dataDir = readString(store, kDataDir, d.dataDir);
  s.uploadLimitKiB = readInt(store, kUploadLimitKiB, d.uploadLimitKiB, 0, INT_MAX);
  s.downloadLimitKiB = readInt(store, kDownloadLimitKiB, d.downloadLimitKiB, 0, INT_MAX);
  s.publicNetwork = readBool(store, kPublicNetwork, d.publicNetwork);
  s.portMapping = readBool(store, kPortMapping, d.portMapping);
  s.bootstrapNodes = readNodes(store, kBootstrapNodes, d.bootstrapNodes);
  s.listenPort = readInt(store, kListenPort, d.listenPort, 0, 65535);
  s.pauseWhenUserActive = readBool(store, kPauseWhenUserActive, d.pauseWhenUserActive);
  s.idleMinutes = readInt(store, kIdleMinutes, d.idleMinutes, 1, kMaxIdleMinutes);
  s.scheduleEnabled = readBool(store, kScheduleEnabled, d.scheduleEnabled);
  s.scheduleStart = readTime(store, kScheduleStart, d.scheduleStart);
  s.scheduleEnd = readTime(store, kScheduleEnd, d.scheduleEnd);
  s.pauseOnBattery = readBool(store, kPauseOnBattery, d.pauseOnBattery);
  const int celsius = readInt(store, kPauseAboveGpuC, d.pauseAboveGpuC, 0, kMaxGpuCelsius);
  s.pauseAboveGpuC = celsius == 0 || celsius >= kMinGpuCelsius ? celsius : d.pauseAboveGpuC;
  s.startAtLogin = readBool(store, kStartAtLogin, d.startAtLogin);
  s.firstRunDone = readBool(store, kFirstRunDone, d.firstRunDone);
  const QString source = readString(store, kRunSource, d.runSource).trimmed();
  s.runSource = source == QLatin1String("default") || magnetProblem(source).isEmpty() ? source : d.runSource;
  return s;
}

void ClientSettings::save(QSettings& store) const {
  store.setValue(QLatin1String(kDevice), device);
  store.setValue(QLatin1String(kHostMemoryCapMiB), hostMemoryCapMiB);
  store.setValue(QLatin1String(kGpuMemoryCapMiB), gpuMemoryCapMiB);
  store.setValue(QLatin1String(kClaimSize), claimSize);
  store.setValue(QLatin1String(kDiskQuotaMiB), diskQuotaMiB);
  store.setValue(QLatin1String(kDataBudgetMiB), dataBudgetMiB);
  store.setValue(QLatin1String(kDataDir), dataDir);
  store.setValue(QLatin1String(kUploadLimitKiB), uploadLimitKiB);
  store.setValue(QLatin1String(kDownloadLimitKiB), downloadLimitKiB);
  store.setValue(QLatin1String(kPublicNetwork), publicNetwork);
  store.setValue(QLatin1String(kPortMapping), portMapping);
  store.setValue(QLatin1String(kBootstrapNodes), bootstrapNodes.join(QLatin1Char(',')));
  store.setValue(QLatin1String(kListenPort), listenPort);
  store.setValue(QLatin1String(kPauseWhenUserActive), pauseWhenUserActive);
  store.setValue(QLatin1String(kIdleMinutes), idleMinutes);
  store.setValue(QLatin1String(kScheduleEnabled), scheduleEnabled);
  store.setValue(QLatin1String(kScheduleStart), scheduleStart.toString(QLatin1String(kTimeFormat)));
  store.setValue(QLatin1String(kScheduleEnd), scheduleEnd.toString(QLatin1String(kTimeFormat)));
  store.setValue(QLatin1String(kPauseOnBattery), pauseOnBattery);
  store.setValue(QLatin1String(kPauseAboveGpuC), pauseAboveGpuC);
  store.setValue(QLatin1String(kStartAtLogin), startAtLogin);
  store.setValue(QLatin1String(kFirstRunDone), firstRunDone);
  store.setValue(QLatin1String(kRunSource), runSource);
}

QString ClientSettings::validate() const {
  const auto quoted = [](const QString& v) { return QLatin1Char('"') + elided(v) + QLatin1Char('"'); };
  if (!deviceIsValid(device))
    return QStringLiteral("Device %1 is not valid: use auto, cpu, cuda or cuda:N (N = the GPU's number).")
        .arg(quoted(device));
  if (hostMemoryCapMiB < 0)
    return QStringLiteral("Host memory cap must be 0 (no cap) or more, not %1 MiB.").arg(hostMemoryCapMiB);
  if (gpuMemoryCapMiB < 0)
    return QStringLiteral("GPU memory cap must be 0 (no cap) or more, not %1 MiB.").arg(gpuMemoryCapMiB);
  if (claimSize < 0 || claimSize > kMaxClaimSize)
    return QStringLiteral("Claim size must be between 0 (auto) and %1 experts, not %2.")
        .arg(kMaxClaimSize)
        .arg(claimSize);
  if (dataBudgetMiB < 0)
    return QStringLiteral("Data budget must be 0 (all of a run's shards) or more, not %1 MiB.").arg(dataBudgetMiB);
  if (diskQuotaMiB < 0)
    return QStringLiteral("Disk quota must be 0 (auto, from the run's model) or more, not %1 MiB.").arg(diskQuotaMiB);
  if (uploadLimitKiB < 0)
    return QStringLiteral("Upload limit must be 0 (unlimited) or more, not %1 KiB/s.").arg(uploadLimitKiB);
  if (downloadLimitKiB < 0)
    return QStringLiteral("Download limit must be 0 (unlimited) or more, not %1 KiB/s.").arg(downloadLimitKiB);
  for (const auto& node : bootstrapNodes)
    if (!isHostPort(node))
      return QStringLiteral("Bootstrap node %1 is not HOST:PORT (e.g. router.bittorrent.com:6881).").arg(quoted(node));
  if (listenPort < 0 || listenPort > 65535)
    return QStringLiteral("Listen port must be between 1 and 65535 (0: choose one at the next start), not %1.")
        .arg(listenPort);
  if (idleMinutes < 1 || idleMinutes > kMaxIdleMinutes)
    return QStringLiteral("Idle minutes must be between 1 and %1, not %2.").arg(kMaxIdleMinutes).arg(idleMinutes);
  if (scheduleEnabled) {
    if (!scheduleStart.isValid()) return QStringLiteral("Schedule start is not a valid time of day.");
    if (!scheduleEnd.isValid()) return QStringLiteral("Schedule end is not a valid time of day.");
    if (scheduleStart == scheduleEnd)
      return QStringLiteral("Schedule start and end are both %1: the schedule would be empty.")
          .arg(scheduleStart.toString(QLatin1String(kTimeFormat)));
  }
  if (pauseAboveGpuC != 0 && (pauseAboveGpuC < kMinGpuCelsius || pauseAboveGpuC > kMaxGpuCelsius))
    return QStringLiteral("GPU temperature limit must be 0 (off) or between %1 and %2 °C, not %3 °C.")
        .arg(kMinGpuCelsius)
        .arg(kMaxGpuCelsius)
        .arg(pauseAboveGpuC);
  if (runSource != QLatin1String("default")) {
    const QString problem = magnetProblem(runSource);
    if (!problem.isEmpty())
      return QStringLiteral("Run source %1 is neither \"default\" nor a valid magnet link: %2.")
          .arg(quoted(runSource), problem);
  }
  return {};
}

bool ClientSettings::operator==(const ClientSettings& o) const {
  return device == o.device && hostMemoryCapMiB == o.hostMemoryCapMiB && gpuMemoryCapMiB == o.gpuMemoryCapMiB &&
         claimSize == o.claimSize && pauseOnBattery == o.pauseOnBattery && pauseAboveGpuC == o.pauseAboveGpuC &&
         diskQuotaMiB == o.diskQuotaMiB && dataBudgetMiB == o.dataBudgetMiB && dataDir == o.dataDir &&
         uploadLimitKiB == o.uploadLimitKiB && downloadLimitKiB == o.downloadLimitKiB &&
         publicNetwork == o.publicNetwork && portMapping == o.portMapping && bootstrapNodes == o.bootstrapNodes &&
         listenPort == o.listenPort && pauseWhenUserActive == o.pauseWhenUserActive && idleMinutes == o.idleMinutes &&
         scheduleEnabled == o.scheduleEnabled && scheduleStart == o.scheduleStart && scheduleEnd == o.scheduleEnd &&
         startAtLogin == o.startAtLogin && firstRunDone == o.firstRunDone && runSource == o.runSource;
}

}  // namespace es::settings
