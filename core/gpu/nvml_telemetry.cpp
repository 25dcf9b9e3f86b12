#include "core/gpu/nvml_telemetry.h"

#include <dlfcn.h>

#include <cstdlib>

namespace es::gpu {
namespace {

// NVML's C types, as its header declares them.
using NvmlReturn = int;  // nvmlReturn_t: 0 = NVML_SUCCESS
using NvmlDevice = void*;
struct NvmlMemory {
  unsigned long long total, free, used;
};
struct NvmlUtilization {
  unsigned int gpu, memory;
};
constexpr int kTemperatureGpu = 0;  // NVML_TEMPERATURE_GPU

template <typename Fn>
bool resolve(void* handle, const char* name, Fn& out) {
  out = reinterpret_cast<Fn>(::dlsym(handle, name));
  return out != nullptr;
}

}  // namespace

struct NvmlTelemetry::Api {
  NvmlReturn (*init)() = nullptr;
  NvmlReturn (*shutdown)() = nullptr;
  NvmlReturn (*count)(unsigned int*) = nullptr;
  NvmlReturn (*handleByIndex)(unsigned int, NvmlDevice*) = nullptr;
  NvmlReturn (*name)(NvmlDevice, char*, unsigned int) = nullptr;
  NvmlReturn (*memory)(NvmlDevice, NvmlMemory*) = nullptr;
  NvmlReturn (*utilization)(NvmlDevice, NvmlUtilization*) = nullptr;
  NvmlReturn (*temperature)(NvmlDevice, int, unsigned int*) = nullptr;
  NvmlReturn (*power)(NvmlDevice, unsigned int*) = nullptr;  // milliwatts
};

Expected<std::unique_ptr<NvmlTelemetry>> NvmlTelemetry::open(const std::string& library) {
  void* handle = ::dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) return makeError("no GPU telemetry: " + library + " not loaded (no NVIDIA driver?)");
  auto api = std::make_unique<Api>();
  const bool complete = resolve(handle, "nvmlInit_v2", api->init) && resolve(handle, "nvmlShutdown", api->shutdown) &&
                        resolve(handle, "nvmlDeviceGetCount_v2", api->count) &&
                        resolve(handle, "nvmlDeviceGetHandleByIndex_v2", api->handleByIndex) &&
                        resolve(handle, "nvmlDeviceGetName", api->name) &&
                        resolve(handle, "nvmlDeviceGetMemoryInfo", api->memory) &&
                        resolve(handle, "nvmlDeviceGetUtilizationRates", api->utilization) &&
                        resolve(handle, "nvmlDeviceGetTemperature", api->temperature) &&
                        resolve(handle, "nvmlDeviceGetPowerUsage", api->power);
  if (!complete || api->init() != 0) {
    ::dlclose(handle);
    return makeError(std::string("no GPU telemetry: ") + library +
                     (complete ? " did not initialise" : " lacks an NVML entry point"));
  }
  return std::unique_ptr<NvmlTelemetry>(new NvmlTelemetry(handle, std::move(api)));
}

NvmlTelemetry::NvmlTelemetry(void* handle, std::unique_ptr<Api> api) : handle_(handle), api_(std::move(api)) {}

NvmlTelemetry::~NvmlTelemetry() {
  api_->shutdown();
  ::dlclose(handle_);
}

int NvmlTelemetry::deviceCount() const {
  unsigned int n = 0;
  return api_->count(&n) == 0 ? int(n) : 0;
}

Expected<GpuSample> NvmlTelemetry::sample(int index) const {
  NvmlDevice device = nullptr;
  if (index < 0 || api_->handleByIndex(unsigned(index), &device) != 0)
    return makeError("no GPU " + std::to_string(index) + " in NVML");
  GpuSample s;
  s.index = index;
  char name[96] = {};
  if (api_->name(device, name, sizeof name - 1) == 0) s.name = name;
  NvmlMemory memory{};
  if (api_->memory(device, &memory) != 0) return makeError("NVML: no memory figures for GPU " + std::to_string(index));
  s.memoryTotalBytes = std::int64_t(memory.total);
  s.memoryFreeBytes = std::int64_t(memory.free);
  s.memoryUsedBytes = std::int64_t(memory.used);
  NvmlUtilization utilization{};
  if (api_->utilization(device, &utilization) == 0) s.utilizationPercent = int(utilization.gpu);
  unsigned int value = 0;
  if (api_->temperature(device, kTemperatureGpu, &value) == 0) s.temperatureC = int(value);
  if (api_->power(device, &value) == 0) s.powerWatts = value / 1000.0;
  return s;
}

int cudaIndexOf(const std::string& device) {
  if (device == "cuda") return 0;
  if (device.rfind("cuda:", 0) == 0) return std::atoi(device.c_str() + 5);
  return -1;
}

}  // namespace es::gpu
