// Issue 16 item 5: the GPU telemetry (core/gpu, NVML through dlopen) reads the real driver, not only
// tests/tst_gpu_telemetry's fake library. Run as
//   tst_gpu_nvml [DEVICE]     (default "cuda")
// by scripts/gpu-check: the GPU that LibTorch sees is in NVML with a name, its memory adds up, its
// temperature is plausible, and a 1 GiB allocation through LibTorch shows up in NVML's "used" —
// the figure the VRAM pre-flight and the dashboard print is live. Exit 77 (skipped) without a GPU
// or without the driver's libnvidia-ml.so.1.
#include "core/gpu/nvml_telemetry.h"
#include "core/train/trainer.h"
#include "tests/device/device_check.h"

#include <torch/torch.h>

#include <cstdio>

using namespace es;

namespace {

std::string g_device = "cuda";

gpu::GpuSample sampleOrThrow(const gpu::NvmlTelemetry& nvml, int index) {
  auto sample = nvml.sample(index);
  ES_CHECK(sample.ok(), sample.ok() ? "" : sample.error());
  return *sample;
}

void theGpuIsInNvmlWithPlausibleFigures() {
  auto nvml = gpu::NvmlTelemetry::open();
  ES_CHECK(nvml.ok(), nvml.ok() ? "" : nvml.error());
  const int index = gpu::cudaIndexOf(g_device);
  ES_CHECK((*nvml)->deviceCount() > index, std::to_string((*nvml)->deviceCount()) + " GPUs in NVML");
  const auto s = sampleOrThrow(**nvml, index);
  std::printf("INFO   : GPU %d: %s, %lld MiB total, %lld MiB free, %d %% busy, %d C, %.1f W\n", s.index, s.name.c_str(),
              static_cast<long long>(s.memoryTotalBytes >> 20), static_cast<long long>(s.memoryFreeBytes >> 20),
              s.utilizationPercent, s.temperatureC, s.powerWatts);
  ES_CHECK(!s.name.empty(), "a name");
  ES_CHECK(s.memoryTotalBytes >= (std::int64_t(1) << 30), "at least 1 GiB");
  ES_CHECK(s.memoryFreeBytes <= s.memoryTotalBytes && s.memoryUsedBytes <= s.memoryTotalBytes, "memory adds up");
  ES_CHECK(s.temperatureC > 0 && s.temperatureC < 120, std::to_string(s.temperatureC) + " C");
  ES_CHECK(s.utilizationPercent >= 0 && s.utilizationPercent <= 100, std::to_string(s.utilizationPercent) + " %");
}

// NVML reports the driver's view of the device's memory: 1 GiB taken through LibTorch's allocator
// must show up as used (within what other processes may do meanwhile: none on the check machine).
void anAllocationShowsUpInNvml() {
  auto nvml = gpu::NvmlTelemetry::open();
  ES_CHECK(nvml.ok(), nvml.ok() ? "" : nvml.error());
  const int index = gpu::cudaIndexOf(g_device);
  const auto on = torch::TensorOptions().dtype(torch::kFloat).device(torch::Device(g_device));
  auto warm = torch::ones({1}, on);  // the CUDA context exists before the first reading
  (void)warm.sum().item<float>();
  const auto before = sampleOrThrow(**nvml, index);
  constexpr std::int64_t kBytes = std::int64_t(1) << 30;
  auto block = torch::ones({kBytes / 4}, on);  // written, so the pages are really there
  (void)block.sum().item<float>();
  const auto after = sampleOrThrow(**nvml, index);
  const std::int64_t grew = after.memoryUsedBytes - before.memoryUsedBytes;
  std::printf("INFO   : 1024 MiB through LibTorch: NVML used %lld -> %lld MiB (+%lld)\n",
              static_cast<long long>(before.memoryUsedBytes >> 20), static_cast<long long>(after.memoryUsedBytes >> 20),
              static_cast<long long>(grew >> 20));
  ES_CHECK(grew >= kBytes && grew <= kBytes + (std::int64_t(256) << 20), std::to_string(grew >> 20) + " MiB");
  ES_CHECK(before.memoryFreeBytes - after.memoryFreeBytes >= kBytes, "free memory fell by the allocation");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1) g_device = argv[1];
  if (!train::checkDevice(g_device).ok() || gpu::cudaIndexOf(g_device) < 0) {
    std::printf("SKIP   : no %s device here\n", g_device.c_str());
    return 77;
  }
  if (auto nvml = gpu::NvmlTelemetry::open(); !nvml) {
    std::printf("SKIP   : %s\n", nvml.error().c_str());
    return 77;
  }
  return device_test::runCases("GpuNvml", {{"theGpuIsInNvmlWithPlausibleFigures", theGpuIsInNvmlWithPlausibleFigures},
                                           {"anAllocationShowsUpInNvml", anAllocationShowsUpInNvml}});
}
