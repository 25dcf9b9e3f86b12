// The donor's settings (docs/ARCHITECTURE.md, "Engine and desktop window", Settings), declared
// once with their keys and defaults. The GUI's settings dialog and the engine read and write them
// through these typed accessors over QSettings, so the GUI, the headless client and the tests
// agree on every key. Qt Core only.
#pragma once

#include <QString>
#include <QStringList>
#include <QTime>

class QSettings;

namespace es::settings {

struct ClientSettings {
  // Take effect at the next start of the engine.
  QString device = QStringLiteral("auto");  // auto | cpu | cuda | cuda:N
  // The pre-flight sizes the claim by the memory of the device trained on, within these caps.
  int hostMemoryCapMiB = 0;  // a CPU peer's host memory; 0 = no cap (what is available)
  int gpuMemoryCapMiB = 0;   // a GPU peer's GPU memory; 0 = no cap (what the GPU has free)
  int claimSize = 0;         // experts to train; 0 = auto (the run's default, within memory)
  // The run folder's disk quota; 0 = auto: derived from the run's model (sync::defaultDiskQuotaBytes:
  // 3 rounds × 32 peers × the largest contribution + 16 × the model's float32 size).
  int diskQuotaMiB = 0;
  // Most disk a joined prepared run's training shards may take (issue 40); 0 = all of them.
  int dataBudgetMiB = 0;
  QString dataDir;  // empty = ~/.local/share/expertswarm (app/data_dir.h)
  // Applied at once (libtorrent rate limits, bytes/s = KiB/s × 1024).
  int uploadLimitKiB = 0;  // 0 = unlimited
  int downloadLimitKiB = 0;
  // The network; take effect at the next start. Off by default: the client contacts no host it
  // was not told about until the donor opts in (the first-run dialog offers it, checked).
  bool publicNetwork = false;                    // join the public network: bootstrapNodes, UPnP, NAT-PMP
  bool portMapping = false;                      // UPnP + NAT-PMP without the public routers
  QStringList bootstrapNodes = publicRouters();  // HOST:PORT, used when publicNetwork is on
  int listenPort = 0;                            // TCP and UDP on every interface; 0 = choose at the next start
  // When to donate.
  bool pauseWhenUserActive = false;
  int idleMinutes = 5;                 // the user counts as away after this long without input
  bool scheduleEnabled = false;        // train only inside [scheduleStart, scheduleEnd)
  QTime scheduleStart = QTime(22, 0);  // may wrap past midnight (22:00–07:00)
  QTime scheduleEnd = QTime(7, 0);
  bool pauseOnBattery = true;  // a laptop unplugged stops training (UPower); BOINC's default too
  int pauseAboveGpuC = 0;      // pause while the GPU is at or above this many °C; 0 = off
  // Desktop integration.
  bool startAtLogin = false;
  bool firstRunDone = false;
  QString runSource = QStringLiteral("default");  // "default" or a magnet link

  // The public DHT routers qBittorrent and Transmission bootstrap from (as host names).
  static QStringList publicRouters();
  // A random listen port for a first start: above the well-known and common service ports, below
  // Linux's ephemeral range (32768–60999), so no outgoing connection of this machine holds it.
  static int randomListenPort();
  // Saves only network/listenPort (the headless client keeps its first-run port without
  // rewriting the donor's other settings).
  static void saveListenPort(QSettings& store, int port);

  static ClientSettings load(const QSettings& store);
  void save(QSettings& store) const;
  // Empty when every value is in range; otherwise what is wrong, for the dialog to show.
  QString validate() const;
  bool operator==(const ClientSettings& other) const;
  bool operator!=(const ClientSettings& other) const { return !(*this == other); }
};

}  // namespace es::settings
