#include "ui/donation_policy.h"

namespace es::ui {

namespace {

// The first instant strictly after `now` whose time of day is `t`, in `now`'s time spec.
QDateTime nextOccurrence(const QDateTime& now, const QTime& t) {
  QDateTime at = now;
  at.setTime(t);
  if (at <= now) at = at.addDays(1);
  return at;
}

QDateTime earliest(const QDateTime& a, const QDateTime& b) {
  if (!a.isValid()) return b;
  if (!b.isValid()) return a;
  return a < b ? a : b;
}

QString hhmm(const QTime& t) { return t.toString(QStringLiteral("HH:mm")); }

}  // namespace

bool insideSchedule(const QTime& t, const QTime& start, const QTime& end) {
  if (start == end) return true;  // an empty window would stop donating forever; validate() refuses it
  if (start < end) return start <= t && t < end;
  return t >= start || t < end;
}

DonationDecision decide(const DonationInputs& in) {
  if (in.manualPause) return {true, QStringLiteral("Paused by you"), {}};
  if (in.snoozeUntil.isValid() && in.now < in.snoozeUntil)
    return {true, QStringLiteral("Snoozed until %1").arg(hhmm(in.snoozeUntil.time())), in.snoozeUntil};

  // A machine's own limits come before the donor's timetable: they protect the hardware.
  if (in.pauseOnBattery && in.onBattery.value_or(false)) return {true, QStringLiteral("On battery power"), {}};
  if (in.pauseAboveGpuC > 0 && in.gpuTemperatureC) {
    const int limit = in.pausedForHeat ? in.pauseAboveGpuC - kGpuCoolingC : in.pauseAboveGpuC;
    if (*in.gpuTemperatureC >= limit) {
      DonationDecision hot{
          true,
          QStringLiteral("GPU at %1\u00b0C (limit %2\u00b0C)").arg(*in.gpuTemperatureC).arg(in.pauseAboveGpuC),
          {}};
      hot.forHeat = true;
      return hot;
    }
  }

  // While training inside the schedule, its end is the next moment things change by themselves.
  QDateTime reconsider;
  const bool scheduled = in.scheduleEnabled && in.scheduleStart.isValid() && in.scheduleEnd.isValid() &&
                         in.scheduleStart != in.scheduleEnd;
  if (scheduled) {
    if (!insideSchedule(in.now.time(), in.scheduleStart, in.scheduleEnd))
      return {true,
              QStringLiteral("Outside the schedule (%1\u2013%2)").arg(hhmm(in.scheduleStart), hhmm(in.scheduleEnd)),
              nextOccurrence(in.now, in.scheduleStart)};
    reconsider = nextOccurrence(in.now, in.scheduleEnd);
  }

  // An unknown idle time (no session bus, Wayland without the service) never pauses: donors who
  // asked for it would rather train than be paused forever by a missing service.
  if (in.pauseWhenUserActive && in.userIdleSeconds) {
    const int awayAfter = in.idleMinutes * 60;
    if (*in.userIdleSeconds < awayAfter) {
      // If the user stays away, training resumes exactly when the idle threshold is crossed.
      const QDateTime away = in.now.addSecs(awayAfter - *in.userIdleSeconds);
      return {true, QStringLiteral("You are using the computer"), earliest(away, reconsider)};
    }
  }
  return {false, QString(), reconsider};
}

}  // namespace es::ui
