// When this computer donates: the pure decision between training and pausing, from the user's
// manual pause, a snooze, the power source, the GPU's temperature, the schedule and whether the
// user is at the keyboard. No timers and no
// clock of its own (`now` is an input), so every rule is testable at any instant; the
// DonationController feeds it and applies the result to the engine.
#pragma once

#include <QDateTime>
#include <QString>
#include <QTime>

#include <optional>

namespace es::ui {

struct DonationInputs {
  bool manualPause = false;
  QDateTime snoozeUntil;  // invalid = no snooze
  bool pauseWhenUserActive = false;
  int idleMinutes = 5;                 // the user counts as away after this long without input
  std::optional<int> userIdleSeconds;  // nullopt = unknown: never pause for activity
  bool scheduleEnabled = false;        // train only inside [scheduleStart, scheduleEnd)
  QTime scheduleStart, scheduleEnd;    // may wrap past midnight; start == end = no restriction
  bool pauseOnBattery = false;
  std::optional<bool> onBattery;       // nullopt = unknown (no UPower): never pauses
  int pauseAboveGpuC = 0;              // 0 = off
  std::optional<int> gpuTemperatureC;  // nullopt = no GPU reading: never pauses
  bool pausedForHeat = false;          // the last decision paused for heat (see kGpuCoolingC)
  QDateTime now;
};

// A GPU paused for heat resumes only this far below the limit: without the margin, a GPU at the
// limit would pause and resume every poll as it cools and heats by a degree.
inline constexpr int kGpuCoolingC = 5;

struct DonationDecision {
  bool paused = false;
  QString reason;          // "" when training; otherwise a short sentence for the tray and status bar
  QDateTime reconsiderAt;  // when the decision may change by itself (snooze end, schedule edge,
                           // the idle threshold); invalid if never
  bool forHeat = false;    // paused because the GPU is (still) too hot
};

// Precedence: manual pause > snooze > battery > GPU heat > schedule > user activity.
DonationDecision decide(const DonationInputs& in);

// Whether `t` falls inside [start, end), a window that wraps past midnight when start > end.
bool insideSchedule(const QTime& t, const QTime& start, const QTime& end);

}  // namespace es::ui
