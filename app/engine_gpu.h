// The engine's view of the device it trains on (issue 16 items 4–5): how much memory the
// pre-flight may size the claim by, and the GPU readings attached to step reports. NVML is loaded
// at run time (core/gpu), so a machine without an NVIDIA driver runs the same binary on its CPU.
#pragma once

#include "core/node/node_reports.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace es::app {

// The donor's caps, MiB; 0 = no cap. Host memory bounds a CPU peer, GPU memory a GPU peer.
struct MemoryCaps {
  int hostMiB = 0;
  int gpuMiB = 0;
};

// The memory the pre-flight sizes the claim by, within the donor's cap for that kind of memory:
// on a GPU (`device` resolved: "cuda", "cuda:N") its free memory as NVML reports it, with a start
// line naming the GPU; host memory otherwise, and when NVML is not there (a line says so).
// -1 when unknown and uncapped.
std::int64_t preflightMemory(const std::string& device, const MemoryCaps& caps);

// Reads the GPU `device` names through NVML, each call a new reading; null for a CPU device or
// when NVML cannot be opened (said once in a start line).
std::function<std::optional<node::GpuReading>()> gpuReader(const std::string& device);

}  // namespace es::app
