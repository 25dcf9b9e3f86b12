// GPU telemetry through NVML (issue 16 item 5), loaded at run time with dlopen("libnvidia-ml.so.1"):
// the binary must start on a machine without an NVIDIA driver, so nothing links against NVML.
// The few NVML entry points used are declared here by hand (their C signatures are stable since
// NVML 3; the driver's library has them, the CUDA toolkit's headers are not needed). Plain C++,
// no Qt, no Torch. Used for the VRAM pre-flight (free memory) and the start line.
#pragma once

#include "core/common/expected.h"

#include <cstdint>
#include <memory>
#include <string>

namespace es::gpu {

struct GpuSample {
  int index = 0;
  std::string name;
  std::int64_t memoryTotalBytes = 0, memoryUsedBytes = 0, memoryFreeBytes = 0;
  int utilizationPercent = 0;  // of the last sample period (NVML's, about 1/6 s to 1 s)
  int temperatureC = 0;
  double powerWatts = 0;
};

class NvmlTelemetry {
 public:
  // Loads the library (by name, through the loader's search path, or by path) and initialises
  // NVML. Error: not found (no NVIDIA driver), a symbol missing, or nvmlInit failed.
  static Expected<std::unique_ptr<NvmlTelemetry>> open(const std::string& library = "libnvidia-ml.so.1");
  ~NvmlTelemetry();
  NvmlTelemetry(const NvmlTelemetry&) = delete;
  NvmlTelemetry& operator=(const NvmlTelemetry&) = delete;

  int deviceCount() const;
  Expected<GpuSample> sample(int index) const;

  struct Api;  // the resolved entry points (nvml_telemetry.cpp)

 private:
  NvmlTelemetry(void* handle, std::unique_ptr<Api> api);
  void* handle_;
  std::unique_ptr<Api> api_;
};

// "cuda" -> 0, "cuda:N" -> N, anything else (cpu, auto) -> -1.
int cudaIndexOf(const std::string& device);

}  // namespace es::gpu
