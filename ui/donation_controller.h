// Applies "when to donate" to the engine: holds the user's manual pause and snooze, the settings'
// rate caps, schedule, idle, battery and GPU-temperature rules, asks decide() (donation_policy.h)
// what to do and tells the engine only when the answer changes. Re-evaluates every 30 s (the user
// may come and go; every 10 s while a GPU temperature limit is set) and at the instant the
// decision is due to change by itself (snooze end, schedule edge).
#pragma once

#include "core/settings/client_settings.h"
#include "ui/donation_policy.h"

#include <QDateTime>
#include <QObject>
#include <QString>
#include <QTimer>

#include <functional>
#include <optional>
#include <utility>

namespace es::ui {

class EngineControl;
class IdleSource;
class MachineSensors;

class DonationController : public QObject {
  Q_OBJECT

 public:
  static constexpr int kPollMs = 30 * 1000;
  static constexpr int kHeatPollMs = 10 * 1000;  // a GPU under load heats by degrees per second

  // `idle` may be null (no idle detection: "pause when active" then never pauses); `sensors` too
  // (the battery and GPU rules then never pause). Neither is owned.
  DonationController(EngineControl& engine, IdleSource* idle, MachineSensors* sensors = nullptr,
                     QObject* parent = nullptr);

  // Takes the donation rules and applies the rate caps (KiB/s → bytes/s) when they changed.
  void applySettings(const settings::ClientSettings& s);

  void setManualPause(bool paused);  // resuming also ends a snooze and a pending finish-round
  void snooze(int seconds);          // pause until now + seconds; <= 0 ends the snooze
  void finishRoundThenPause();       // becomes a manual pause once the engine reports it paused
  void reevaluate();

  // Tests pin time here; the default is QDateTime::currentDateTime.
  void setClock(std::function<QDateTime()> clock);

  bool paused() const { return decision_.paused; }
  QString reason() const { return decision_.reason; }
  QDateTime reconsiderAt() const { return decision_.reconsiderAt; }
  bool manualPause() const { return manualPause_; }
  QDateTime snoozeUntil() const { return snoozeUntil_; }
  bool finishingRound() const { return finishRoundPending_; }

 Q_SIGNALS:
  // Emitted when either the pause state or its reason changes.
  void decisionChanged(bool paused, const QString& reason);

 private:
  void onEnginePausedChanged(bool paused);
  void scheduleReconsider();

  EngineControl& engine_;
  IdleSource* idle_;
  MachineSensors* sensors_;
  std::function<QDateTime()> clock_;
  QTimer poll_;
  QTimer reconsider_;

  bool manualPause_ = false;
  QDateTime snoozeUntil_;
  bool finishRoundPending_ = false;

  bool pauseWhenUserActive_ = false;
  int idleMinutes_ = 5;
  bool scheduleEnabled_ = false;
  QTime scheduleStart_, scheduleEnd_;
  bool pauseOnBattery_ = false;
  int pauseAboveGpuC_ = 0;
  std::optional<std::pair<int, int>> appliedCapsKiB_;

  DonationDecision decision_;  // the engine starts training: not paused, no reason
  bool enginePaused_ = false;  // what the engine was last told or last reported
};

}  // namespace es::ui
