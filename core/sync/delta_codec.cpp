#include "core/sync/delta_codec.h"

#include "core/common/safe_quote.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <unordered_map>

// The int8 codec is written as plain loops over float32 so that encoding is the documented formula
// exactly (q = round-half-even(x / s) with s = max|x| / 127, in float32), independent of torch kernels.

namespace es::sync {
namespace {

const std::string kScaleSuffix = ".__scale";

bool isScaleName(const std::string& name) {
  return name.size() >= kScaleSuffix.size() &&
         name.compare(name.size() - kScaleSuffix.size(), kScaleSuffix.size(), kScaleSuffix) == 0;
}

// Rows of a tensor viewed as [rows, last dim]; a 0-D or 1-D tensor is one row.
std::int64_t rowsOf(const at::Tensor& t) {
  std::int64_t rows = 1;
  for (std::int64_t d = 0; d + 1 < t.dim(); ++d) rows *= t.size(d);  // no division: a dim may be 0
  return rows;
}
std::int64_t rowLength(const at::Tensor& t) { return t.dim() >= 1 ? t.size(-1) : 1; }

at::Tensor cpuFloat(const at::Tensor& t) { return t.detach().to(at::kCPU, at::kFloat).contiguous(); }

void encodeInt8(const std::string& name, const at::Tensor& delta, ckpt::NamedTensors& out) {
  const at::Tensor x = cpuFloat(delta);
  const std::int64_t rows = rowsOf(x), cols = rowLength(x);
  at::Tensor q = at::empty(x.sizes(), at::TensorOptions().dtype(at::kChar));
  at::Tensor scale = at::empty({rows}, at::TensorOptions().dtype(at::kFloat));
  const float* px = x.data_ptr<float>();
  auto* pq = q.data_ptr<std::int8_t>();
  float* ps = scale.data_ptr<float>();
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* row = px + r * cols;
    float absmax = 0.0f;
    for (std::int64_t c = 0; c < cols; ++c) absmax = std::max(absmax, std::fabs(row[c]));
    const float s = absmax / 127.0f;
    ps[r] = s;
    for (std::int64_t c = 0; c < cols; ++c) {
      // s == 0 only for a zero row; a non-finite input (never a valid delta) encodes as 0.
      const float v = s > 0.0f ? std::nearbyint(row[c] / s) : 0.0f;
      pq[r * cols + c] = static_cast<std::int8_t>(std::isfinite(v) ? std::clamp(v, -127.0f, 127.0f) : 0.0f);
    }
  }
  out.emplace_back(name, q);
  out.emplace_back(name + kScaleSuffix, scale);
}

Expected<at::Tensor> decodeInt8(const std::string& name, const at::Tensor& q, const at::Tensor* scale) {
  if (!scale) return makeError("int8 tensor " + safeQuote(name) + " has no scale " + safeQuote(name + kScaleSuffix));
  const std::int64_t rows = rowsOf(q), cols = rowLength(q);
  if (scale->scalar_type() != at::kFloat)
    return makeError("scale " + safeQuote(name + kScaleSuffix) + " has dtype " + c10::toString(scale->scalar_type()) +
                     ", expected Float");
  if (scale->dim() != 1 || scale->size(0) != rows)
    return makeError("scale " + safeQuote(name + kScaleSuffix) + " has shape " + c10::str(scale->sizes()) +
                     ", expected [" + std::to_string(rows) + "]");
  const at::Tensor s = scale->detach().to(at::kCPU).contiguous();
  const at::Tensor qc = q.detach().to(at::kCPU).contiguous();
  at::Tensor x = at::empty(q.sizes(), at::TensorOptions().dtype(at::kFloat));
  const float* ps = s.data_ptr<float>();
  const auto* pq = qc.data_ptr<std::int8_t>();
  float* px = x.data_ptr<float>();
  for (std::int64_t r = 0; r < rows; ++r) {
    if (!std::isfinite(ps[r]) || ps[r] < 0.0f)
      return makeError("scale " + safeQuote(name + kScaleSuffix) + " holds an invalid value at row " +
                       std::to_string(r));
    for (std::int64_t c = 0; c < cols; ++c) px[r * cols + c] = static_cast<float>(pq[r * cols + c]) * ps[r];
  }
  return x;
}

void sortByName(ckpt::NamedTensors& tensors) {
  std::sort(tensors.begin(), tensors.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
}

}  // namespace

std::string codecName(Codec codec) {
  switch (codec) {
    case Codec::F32:
      return "f32";
    case Codec::BF16:
      return "bf16";
    case Codec::Int8:
      return "int8";
  }
  return "?";
}

Expected<Codec> parseCodec(const std::string& name) {
  for (const Codec c : {Codec::F32, Codec::BF16, Codec::Int8}) {
    if (codecName(c) == name) return c;
  }
  return makeError("unknown codec " + safeQuote(name) + " (expected f32, bf16 or int8)");
}

ckpt::NamedTensors encodeDeltas(const ckpt::NamedTensors& deltas, Codec codec) {
  ckpt::NamedTensors out;
  for (const auto& [name, delta] : deltas) {
    switch (codec) {
      case Codec::F32:
        out.emplace_back(name, cpuFloat(delta));
        break;
      // torch's float -> bfloat16 conversion rounds to nearest, ties to even.
      case Codec::BF16:
        out.emplace_back(name, cpuFloat(delta).to(at::kBFloat16));
        break;
      case Codec::Int8:
        encodeInt8(name, delta, out);
        break;
    }
  }
  sortByName(out);
  return out;
}

Expected<ckpt::NamedTensors> decodeDeltas(const ckpt::NamedTensors& encoded, Codec codec) {
  std::unordered_map<std::string, const at::Tensor*> scales;
  std::set<std::string> names;
  for (const auto& [name, tensor] : encoded) {
    if (!names.insert(name).second) return makeError("duplicate tensor " + safeQuote(name));
    if (!tensor.defined()) return makeError("tensor " + safeQuote(name) + " is undefined");
    if (isScaleName(name)) {
      if (codec != Codec::Int8)
        return makeError("stray tensor " + safeQuote(name) + ": codec " + codecName(codec) + " has no scales");
      scales.emplace(name.substr(0, name.size() - kScaleSuffix.size()), &tensor);
    }
  }
  const at::ScalarType wanted = codec == Codec::F32 ? at::kFloat : codec == Codec::BF16 ? at::kBFloat16 : at::kChar;
  ckpt::NamedTensors out;
  for (const auto& [name, tensor] : encoded) {
    if (isScaleName(name)) continue;
    if (tensor.scalar_type() != wanted)
      return makeError("tensor " + safeQuote(name) + " has dtype " + c10::toString(tensor.scalar_type()) +
                       ", expected " + c10::toString(wanted) + " for codec " + codecName(codec));
    if (codec != Codec::Int8) {
      out.emplace_back(name, cpuFloat(tensor));  // bf16 -> f32 is exact
      continue;
    }
    const auto it = scales.find(name);
    auto decoded = decodeInt8(name, tensor, it != scales.end() ? it->second : nullptr);
    if (!decoded) return makeError(decoded.error());
    out.emplace_back(name, std::move(*decoded));
    if (it != scales.end()) scales.erase(it);
  }
  if (!scales.empty())
    return makeError("stray tensor " + safeQuote(scales.begin()->first + kScaleSuffix) +
                     ": a scale without its tensor");
  sortByName(out);
  return out;
}

std::map<std::string, double> codecError(const ckpt::NamedTensors& deltas, Codec codec) {
  std::map<std::string, double> errors;
  auto decoded = decodeDeltas(encodeDeltas(deltas, codec), codec);
  if (!decoded) return errors;  // unreachable: our own encoding always decodes
  std::unordered_map<std::string, const at::Tensor*> index;
  for (const auto& [name, tensor] : *decoded) index.emplace(name, &tensor);
  for (const auto& [name, delta] : deltas) {
    const at::Tensor a = cpuFloat(delta);
    const at::Tensor b = cpuFloat(*index.at(name));
    const float* pa = a.data_ptr<float>();
    const float* pb = b.data_ptr<float>();
    double worst = 0.0;
    for (std::int64_t i = 0, n = a.numel(); i < n; ++i) {
      const double diff = std::fabs(static_cast<double>(pa[i]) - static_cast<double>(pb[i]));
      worst = std::isnan(diff) ? diff : std::max(worst, diff);  // a NaN must show, not vanish in max
      if (std::isnan(worst)) break;
    }
    errors[name] = worst;
  }
  return errors;
}

std::int64_t encodedBytes(const ckpt::NamedTensors& encoded) {
  std::int64_t bytes = 0;
  for (const auto& [name, tensor] : encoded) bytes += tensor.numel() * static_cast<std::int64_t>(tensor.element_size());
  return bytes;
}

}  // namespace es::sync
