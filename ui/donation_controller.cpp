#include "ui/donation_controller.h"

#include "ui/engine_control.h"
#include "ui/idle_monitor.h"
#include "ui/machine_sensors.h"

#include <algorithm>

namespace es::ui {

DonationController::DonationController(EngineControl& engine, IdleSource* idle, MachineSensors* sensors,
                                       QObject* parent)
    : QObject(parent), engine_(engine), idle_(idle), sensors_(sensors), clock_([] {
        return QDateTime::currentDateTime();
      }) {
  const settings::ClientSettings defaults;
  idleMinutes_ = defaults.idleMinutes;
  scheduleStart_ = defaults.scheduleStart;
  scheduleEnd_ = defaults.scheduleEnd;

  connect(&engine_, &EngineControl::pausedChanged, this, &DonationController::onEnginePausedChanged);
  poll_.setInterval(kPollMs);
  connect(&poll_, &QTimer::timeout, this, &DonationController::reevaluate);
  poll_.start();
  // Precise: a coarse timer may fire up to 5% early, which at a schedule edge only re-arms it.
  reconsider_.setSingleShot(true);
  reconsider_.setTimerType(Qt::PreciseTimer);
  connect(&reconsider_, &QTimer::timeout, this, &DonationController::reevaluate);
}

void DonationController::setClock(std::function<QDateTime()> clock) { clock_ = std::move(clock); }

void DonationController::applySettings(const settings::ClientSettings& s) {
  const std::pair<int, int> caps{s.uploadLimitKiB, s.downloadLimitKiB};
  if (!appliedCapsKiB_ || *appliedCapsKiB_ != caps) {
    appliedCapsKiB_ = caps;
    engine_.setRateLimits(caps.first * 1024, caps.second * 1024);
  }
  pauseWhenUserActive_ = s.pauseWhenUserActive;
  idleMinutes_ = s.idleMinutes;
  scheduleEnabled_ = s.scheduleEnabled;
  scheduleStart_ = s.scheduleStart;
  scheduleEnd_ = s.scheduleEnd;
  pauseOnBattery_ = s.pauseOnBattery;
  pauseAboveGpuC_ = s.pauseAboveGpuC;
  poll_.setInterval(pauseAboveGpuC_ > 0 ? kHeatPollMs : kPollMs);
  reevaluate();
}

void DonationController::setManualPause(bool paused) {
  manualPause_ = paused;
  if (!paused) {
    // "Resume" means now: it also ends a snooze and cancels a pause waiting for the round's end.
    snoozeUntil_ = QDateTime();
    finishRoundPending_ = false;
  }
  reevaluate();
}

void DonationController::snooze(int seconds) {
  snoozeUntil_ = seconds > 0 ? clock_().addSecs(seconds) : QDateTime();
  reevaluate();
}

void DonationController::finishRoundThenPause() {
  finishRoundPending_ = true;
  engine_.finishRoundThenPause();
}

void DonationController::onEnginePausedChanged(bool paused) {
  enginePaused_ = paused;
  if (paused && finishRoundPending_) {
    finishRoundPending_ = false;
    manualPause_ = true;
  }
  // If the engine changed state on its own (or a late echo), bring it back in line with the rules.
  reevaluate();
}

void DonationController::reevaluate() {
  DonationInputs in;
  in.manualPause = manualPause_;
  in.snoozeUntil = snoozeUntil_;
  in.pauseWhenUserActive = pauseWhenUserActive_;
  in.idleMinutes = idleMinutes_;
  // Only ask the desktop when the answer matters: it is a D-Bus round trip.
  if (pauseWhenUserActive_ && idle_) in.userIdleSeconds = idle_->idleSeconds();
  in.scheduleEnabled = scheduleEnabled_;
  in.scheduleStart = scheduleStart_;
  in.scheduleEnd = scheduleEnd_;
  // The machine's sensors, likewise only when a rule needs them.
  in.pauseOnBattery = pauseOnBattery_;
  if (pauseOnBattery_ && sensors_) in.onBattery = sensors_->onBattery();
  in.pauseAboveGpuC = pauseAboveGpuC_;
  if (pauseAboveGpuC_ > 0 && sensors_) in.gpuTemperatureC = sensors_->gpuTemperatureC();
  in.pausedForHeat = decision_.forHeat;
  in.now = clock_();

  const DonationDecision next = decide(in);
  const bool changed = next.paused != decision_.paused || next.reason != decision_.reason;
  decision_ = next;
  if (snoozeUntil_.isValid() && in.now >= snoozeUntil_) snoozeUntil_ = QDateTime();
  if (next.paused != enginePaused_) {
    enginePaused_ = next.paused;
    engine_.setPaused(next.paused);
  }
  scheduleReconsider();
  if (changed) Q_EMIT decisionChanged(decision_.paused, decision_.reason);
}

void DonationController::scheduleReconsider() {
  reconsider_.stop();
  if (!decision_.reconsiderAt.isValid()) return;
  // Further away than one poll interval, a later poll arms this timer instead.
  const qint64 ms = std::max<qint64>(clock_().msecsTo(decision_.reconsiderAt), 0);
  if (ms <= kPollMs) reconsider_.start(static_cast<int>(ms));
}

}  // namespace es::ui
