#include "ui/machine_sensors.h"

#include "core/gpu/nvml_telemetry.h"

#include <QDBusMessage>
#include <QDBusVariant>
#include <QVariant>

namespace es::ui {

MachineSensors::~MachineSensors() = default;

SystemSensors::SystemSensors(QDBusConnection bus) : bus_(std::move(bus)) {}

SystemSensors::~SystemSensors() = default;

void SystemSensors::setDevice(const QString& device) {
  if (device == QLatin1String("cpu"))
    gpuIndex_ = -1;
  else if (device == QLatin1String("auto"))
    gpuIndex_ = 0;
  else
    gpuIndex_ = gpu::cudaIndexOf(device.toStdString());
}

// A raw Properties.Get rather than QDBusInterface, which introspects the remote object in its
// constructor with the default 25 s timeout (see idle_monitor.cpp).
std::optional<bool> SystemSensors::onBattery() {
  if (!bus_.isConnected()) return std::nullopt;
  auto call = QDBusMessage::createMethodCall(QStringLiteral("org.freedesktop.UPower"),
                                             QStringLiteral("/org/freedesktop/UPower"),
                                             QStringLiteral("org.freedesktop.DBus.Properties"), QStringLiteral("Get"));
  call << QStringLiteral("org.freedesktop.UPower") << QStringLiteral("OnBattery");
  const QDBusMessage reply = bus_.call(call, QDBus::Block, kTimeoutMs);
  if (reply.type() != QDBusMessage::ReplyMessage || reply.arguments().isEmpty()) return std::nullopt;
  const QVariant value = reply.arguments().constFirst().value<QDBusVariant>().variant();
  if (value.typeId() != QMetaType::Bool) return std::nullopt;  // anything else is not UPower's answer
  return value.toBool();
}

std::optional<int> SystemSensors::gpuTemperatureC() {
  if (gpuIndex_ < 0) return std::nullopt;
  if (!nvmlTried_) {
    nvmlTried_ = true;
    if (auto opened = gpu::NvmlTelemetry::open()) nvml_ = std::move(*opened);
  }
  if (!nvml_ || gpuIndex_ >= nvml_->deviceCount()) return std::nullopt;
  const auto sample = nvml_->sample(gpuIndex_);
  if (!sample) return std::nullopt;
  return sample->temperatureC;
}

}  // namespace es::ui
