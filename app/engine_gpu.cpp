#include "app/engine_gpu.h"

#include "app/run_setup.h"
#include "core/gpu/nvml_telemetry.h"

#include <QFile>

#include <algorithm>
#include <memory>

namespace es::app {
namespace {

// MemAvailable from /proc/meminfo (bytes), or -1 when unknown.
std::int64_t availableHostMemory() {
  QFile meminfo(QStringLiteral("/proc/meminfo"));
  if (!meminfo.open(QIODevice::ReadOnly)) return -1;
  for (const auto& line : meminfo.readAll().split('\n'))
    if (line.startsWith("MemAvailable:")) return line.simplified().split(' ').value(1).toLongLong() * 1024;
  return -1;
}

std::int64_t capped(std::int64_t available, int capMiB) {
  if (capMiB <= 0) return available;
  const std::int64_t cap = std::int64_t(capMiB) << 20;
  return available > 0 ? std::min(available, cap) : cap;
}

// Free memory of GPU `index` (bytes), with the GPU's start line; nullopt when NVML cannot tell.
std::optional<std::int64_t> freeGpuMemory(int index) {
  auto nvml = gpu::NvmlTelemetry::open();
  auto sample = nvml ? (*nvml)->sample(index) : Expected<gpu::GpuSample>(makeError(nvml.error()));
  if (!sample) {
    info("Pre-flight: " + sample.error() + "; sizing by host memory");
    return std::nullopt;
  }
  info("GPU " + std::to_string(index) + ": " + sample->name + ", " + std::to_string(sample->memoryFreeBytes >> 20) +
       " of " + std::to_string(sample->memoryTotalBytes >> 20) + " MiB free, " + std::to_string(sample->temperatureC) +
       " °C, " + std::to_string(int(sample->powerWatts)) + " W");
  return sample->memoryFreeBytes;
}

}  // namespace

std::int64_t preflightMemory(const std::string& device, const MemoryCaps& caps) {
  const int index = gpu::cudaIndexOf(device);
  if (index >= 0)
    if (const auto free = freeGpuMemory(index)) return capped(*free, caps.gpuMiB);
  return capped(availableHostMemory(), caps.hostMiB);
}

std::function<std::optional<node::GpuReading>()> gpuReader(const std::string& device) {
  const int index = gpu::cudaIndexOf(device);
  if (index < 0) return {};
  auto opened = gpu::NvmlTelemetry::open();
  if (!opened) {
    info("GPU telemetry: off (" + opened.error() + ")");
    return {};
  }
  std::shared_ptr<gpu::NvmlTelemetry> nvml = std::move(*opened);
  return [nvml, index]() -> std::optional<node::GpuReading> {
    auto s = nvml->sample(index);
    if (!s) return std::nullopt;
    return node::GpuReading{s->utilizationPercent, s->memoryUsedBytes, s->memoryTotalBytes, s->temperatureC,
                            s->powerWatts};
  };
}

}  // namespace es::app
