// The LibTorch version guards, kept few and in one place (issue 16): the default build uses
// Debian's LibTorch 1.13, the CUDA build PyPI's 2.x. Torch types: for .cpp files only.
// (The model's and the trainer's: core/train includes it from core/model.)
#pragma once

#include <ATen/autocast_mode.h>
#include <torch/version.h>

#define ES_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) || (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

// at::_grouped_mm (every expert's product in one launch, the groups' offsets on the device) came
// in 2.8; it is asked for from 2.9, a margin, as nothing older was tried (it ran here on 2.15, CPU).
#define ES_HAVE_GROUPED_MM ES_TORCH_AT_LEAST(2, 9)

namespace es::model {

// What autocast does on `device` right now (on, and to which type). The per-device API
// (set_autocast_enabled(device_type, …)) arrived in 2.4.
#if ES_TORCH_AT_LEAST(2, 4)
inline bool autocastEnabled(c10::DeviceType device) { return at::autocast::is_autocast_enabled(device); }
inline at::ScalarType autocastDtype(c10::DeviceType device) { return at::autocast::get_autocast_dtype(device); }
inline void setAutocastEnabled(c10::DeviceType device, bool on) { at::autocast::set_autocast_enabled(device, on); }
inline void setAutocastDtype(c10::DeviceType device, at::ScalarType t) { at::autocast::set_autocast_dtype(device, t); }
#else
inline bool autocastEnabled(c10::DeviceType device) {
  return device == c10::DeviceType::CPU ? at::autocast::is_cpu_enabled() : at::autocast::is_enabled();
}
inline at::ScalarType autocastDtype(c10::DeviceType device) {
  return device == c10::DeviceType::CPU ? at::autocast::get_autocast_cpu_dtype()
                                        : at::autocast::get_autocast_gpu_dtype();
}
inline void setAutocastEnabled(c10::DeviceType device, bool on) {
  device == c10::DeviceType::CPU ? at::autocast::set_cpu_enabled(on) : at::autocast::set_enabled(on);
}
inline void setAutocastDtype(c10::DeviceType device, at::ScalarType t) {
  device == c10::DeviceType::CPU ? at::autocast::set_autocast_cpu_dtype(t) : at::autocast::set_autocast_gpu_dtype(t);
}
#endif

// bf16 autocast on `device` for the lifetime of this object (nothing when `on` is false): matmuls
// and attention compute in bf16, reductions, norms and softmax stay in f32 (autocast's lists);
// parameters, gradients and AdamW moments stay f32 — master weights in f32, as mixed precision
// needs. Restores what was set before.
class Bf16Autocast {
 public:
  Bf16Autocast(bool on, c10::DeviceType device) : on_(on), device_(device) {
    if (!on_) return;
    wasEnabled_ = enabled();
    wasType_ = dtype();
    setDtype(at::kBFloat16);
    setEnabled(true);
    at::autocast::increment_nesting();
  }
  ~Bf16Autocast() {
    if (!on_) return;
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
    setEnabled(wasEnabled_);
    setDtype(wasType_);
  }
  Bf16Autocast(const Bf16Autocast&) = delete;
  Bf16Autocast& operator=(const Bf16Autocast&) = delete;

 private:
  bool enabled() const { return autocastEnabled(device_); }
  void setEnabled(bool on) const { setAutocastEnabled(device_, on); }
  at::ScalarType dtype() const { return autocastDtype(device_); }
  void setDtype(at::ScalarType t) const { setAutocastDtype(device_, t); }
  bool on_;
  c10::DeviceType device_;
  bool wasEnabled_ = false;
  at::ScalarType wasType_ = at::kBFloat16;
};

}  // namespace es::model
