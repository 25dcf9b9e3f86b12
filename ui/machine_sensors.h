// What the machine itself says about donating now (issue 16 item 5): whether it runs on battery
// (UPower over the system bus) and how hot the GPU is (NVML, loaded at run time by core/gpu). The
// DonationController sees only the MachineSensors interface, so tests feed it any reading.
#pragma once

#include <QDBusConnection>
#include <QString>

#include <memory>
#include <optional>

namespace es::gpu {
class NvmlTelemetry;
}

namespace es::ui {

class MachineSensors {
 public:
  virtual ~MachineSensors();
  virtual std::optional<bool> onBattery() = 0;       // nullopt: nobody can tell (no UPower)
  virtual std::optional<int> gpuTemperatureC() = 0;  // nullopt: no GPU in use, or no NVML
};

// UPower's OnBattery property (a desktop or server without UPower: unknown) and the temperature of
// the GPU the settings' device names. Each D-Bus call gives up after kTimeoutMs: a stuck service
// must never freeze the GUI. NVML is opened on first use, once.
class SystemSensors : public MachineSensors {
 public:
  static constexpr int kTimeoutMs = 500;
  // `bus`: where UPower is asked; the system bus but for tests.
  explicit SystemSensors(QDBusConnection bus = QDBusConnection::systemBus());
  ~SystemSensors() override;

  // "auto" and "cuda" read GPU 0 (when there is one), "cuda:N" GPU N, "cpu" none.
  void setDevice(const QString& device);

  std::optional<bool> onBattery() override;
  std::optional<int> gpuTemperatureC() override;

 private:
  QDBusConnection bus_;
  int gpuIndex_ = 0;  // -1: the CPU trains, no GPU is read
  bool nvmlTried_ = false;
  std::unique_ptr<gpu::NvmlTelemetry> nvml_;
};

}  // namespace es::ui
