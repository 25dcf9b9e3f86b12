// When this computer donates: the pure decision between training and pausing, from the user's
// manual pause, a snooze, the schedule and whether the user is at the keyboard. No timers and no
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
  QDateTime now;
};

struct DonationDecision {
  bool paused = false;
  QString reason;          // "" when training; otherwise a short sentence for the tray and status bar
  QDateTime reconsiderAt;  // when the decision may change by itself (snooze end, schedule edge,
                           // the idle threshold); invalid if never
};

// Precedence: manual pause > snooze > schedule > user activity.
DonationDecision decide(const DonationInputs& in);

// Whether `t` falls inside [start, end), a window that wraps past midnight when start > end.
bool insideSchedule(const QTime& t, const QTime& start, const QTime& end);

}  // namespace es::ui
