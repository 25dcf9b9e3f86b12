// A stand-in for the NVIDIA driver's libnvidia-ml.so.1 with one fixed GPU, so that the telemetry
// code's dlopen, symbol lookup and unit conversions are tested on a machine without a GPU
// (tst_gpu_telemetry). Only the entry points core/gpu/nvml_telemetry.cpp resolves.
#include <cstring>

extern "C" {

struct FakeMemory {
  unsigned long long total, free, used;
};
struct FakeUtilization {
  unsigned int gpu, memory;
};

static int g_device = 7;  // its address is the one device handle

int nvmlInit_v2() { return 0; }
int nvmlShutdown() { return 0; }
int nvmlDeviceGetCount_v2(unsigned int* count) {
  *count = 1;
  return 0;
}
int nvmlDeviceGetHandleByIndex_v2(unsigned int index, void** device) {
  if (index != 0) return 2;  // NVML_ERROR_INVALID_ARGUMENT
  *device = &g_device;
  return 0;
}
int nvmlDeviceGetName(void*, char* name, unsigned int length) {
  std::strncpy(name, "Fake GPU 80GB", length);
  return 0;
}
int nvmlDeviceGetMemoryInfo(void*, FakeMemory* memory) {
  memory->total = 80ull << 30;
  memory->used = 10ull << 30;
  memory->free = 70ull << 30;
  return 0;
}
int nvmlDeviceGetUtilizationRates(void*, FakeUtilization* u) {
  u->gpu = 42;
  u->memory = 17;
  return 0;
}
int nvmlDeviceGetTemperature(void*, int, unsigned int* celsius) {
  *celsius = 67;
  return 0;
}
int nvmlDeviceGetPowerUsage(void*, unsigned int* milliwatts) {
  *milliwatts = 251500;
  return 0;
}
}
