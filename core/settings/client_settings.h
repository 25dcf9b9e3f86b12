// The donor's settings (ARCHITECTURE §6), declared once with their keys and defaults. The GUI's
// settings dialog and the engine read and write them through these typed accessors over QSettings,
// so the GUI, the headless client and the tests agree on every key. Qt Core only.
#pragma once

#include <QString>
#include <QTime>

class QSettings;

namespace es::settings {

struct ClientSettings {
  // Take effect at the next start of the engine.
  QString device = QStringLiteral("auto");  // auto | cpu | cuda | cuda:N
  int gpuMemoryCapMiB = 0;                   // 0 = no cap (the pre-flight uses what is free)
  int claimSize = 0;                         // experts to train; 0 = auto (the run's default, within memory)
  QString dataDir;                           // empty = QStandardPaths::AppDataLocation
  // Applied at once (libtorrent rate limits, bytes/s = KiB/s × 1024).
  int uploadLimitKiB = 0;                    // 0 = unlimited
  int downloadLimitKiB = 0;
  // When to donate.
  bool pauseWhenUserActive = false;
  int idleMinutes = 5;                       // the user counts as away after this long without input
  bool scheduleEnabled = false;              // train only inside [scheduleStart, scheduleEnd)
  QTime scheduleStart = QTime(22, 0);        // may wrap past midnight (22:00–07:00)
  QTime scheduleEnd = QTime(7, 0);
  // Desktop integration.
  bool startAtLogin = false;
  bool firstRunDone = false;
  QString runSource = QStringLiteral("default");  // "default" or a magnet link

  static ClientSettings load(const QSettings& store);
  void save(QSettings& store) const;
  // Empty when every value is in range; otherwise what is wrong, for the dialog to show.
  QString validate() const;
  bool operator==(const ClientSettings& other) const;
  bool operator!=(const ClientSettings& other) const { return !(*this == other); }
};

}  // namespace es::settings
