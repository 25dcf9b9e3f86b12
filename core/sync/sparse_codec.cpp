#include "core/sync/sparse_codec.h"

#include "core/common/safe_quote.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <numeric>

// Plain loops over float32, as the int8 codec (delta_codec.cpp): the selection and the rounding are
// the documented rule exactly, independent of torch kernels, so every peer decodes the same bits.

namespace es::sync {
namespace {

const std::string kIndexSuffix = ".__index";
const std::string kScaleSuffix = ".__scale";

std::int64_t keptIn(std::int64_t length, std::int64_t keep) { return std::min(length, keep); }

// The `keep` entries of largest |x| in [x, x + length), ties to the lower index, in index order.
std::vector<std::int64_t> topIndices(const float* x, std::int64_t length, std::int64_t keep) {
  std::vector<std::int64_t> order(static_cast<std::size_t>(length));
  std::iota(order.begin(), order.end(), 0);
  const auto k = static_cast<std::ptrdiff_t>(keptIn(length, keep));
  std::partial_sort(order.begin(), order.begin() + k, order.end(), [x](std::int64_t a, std::int64_t b) {
    const float fa = std::fabs(x[a]), fb = std::fabs(x[b]);
    return fa != fb ? fa > fb : a < b;
  });
  order.resize(static_cast<std::size_t>(k));
  std::sort(order.begin(), order.end());
  return order;
}

// The chunk's step s: max|kept| / 127 for int8 values; mean|kept| / 1.5 for 2-bit ones.
float chunkScale(const float* chunk, const std::vector<std::int64_t>& top, int valueBits) {
  float absmax = 0.0f;
  double sum = 0.0;
  for (const auto i : top) {
    const float a = std::isfinite(chunk[i]) ? std::fabs(chunk[i]) : 0.0f;
    absmax = std::max(absmax, a);
    sum += a;
  }
  if (valueBits != 2) return absmax / 127.0f;
  return top.empty() ? 0.0f : static_cast<float>(sum / double(top.size()) / 1.5);
}

void encodeOne(const std::string& name, const at::Tensor& delta, SparseSpec spec, ckpt::NamedTensors& out) {
  const at::Tensor x = delta.detach().to(at::kCPU, at::kFloat).contiguous().view({-1});
  const std::int64_t n = x.numel(), chunks = sparseChunks(n, spec), kept = sparseKept(n, spec);
  at::Tensor q = at::empty({kept}, at::TensorOptions().dtype(at::kChar));
  at::Tensor index = at::empty({kept}, at::TensorOptions().dtype(at::kShort));
  at::Tensor scale = at::empty({chunks}, at::TensorOptions().dtype(at::kFloat));
  const float* px = x.data_ptr<float>();
  auto* pq = q.data_ptr<std::int8_t>();
  auto* pi = index.data_ptr<std::int16_t>();
  float* ps = scale.data_ptr<float>();
  std::int64_t pos = 0;
  for (std::int64_t c = 0; c < chunks; ++c) {
    const float* chunk = px + c * spec.chunk;
    const auto top = topIndices(chunk, std::min(spec.chunk, n - c * spec.chunk), spec.keep);
    const float most = spec.valueBits == 2 ? 2.0f : 127.0f;
    ps[c] = chunkScale(chunk, top, spec.valueBits);
    for (const auto i : top) {
      float v = ps[c] > 0.0f ? std::nearbyint(chunk[i] / ps[c]) : 0.0f;
      if (spec.valueBits == 2 && v == 0.0f && ps[c] > 0.0f) v = chunk[i] < 0.0f ? -1.0f : 1.0f;  // no zero level
      pq[pos] = static_cast<std::int8_t>(std::isfinite(v) ? std::clamp(v, -most, most) : 0.0f);
      pi[pos++] = static_cast<std::int16_t>(i);
    }
  }
  out.emplace_back(name, q);
  out.emplace_back(name + kIndexSuffix, index);
  out.emplace_back(name + kScaleSuffix, scale);
}

Expected<const at::Tensor*> part(const std::map<std::string, const at::Tensor*>& byName, const std::string& name,
                                 at::ScalarType dtype, std::int64_t length) {
  const auto it = byName.find(name);
  if (it == byName.end()) return makeError("sparse contribution has no tensor " + safeQuote(name));
  const at::Tensor& t = *it->second;
  if (t.scalar_type() != dtype || t.dim() != 1 || t.size(0) != length)
    return makeError("tensor " + safeQuote(name) + " is " + c10::toString(t.scalar_type()) + " " + c10::str(t.sizes()) +
                     ", expected " + c10::toString(dtype) + " [" + std::to_string(length) + "]");
  return &t;
}

Expected<at::Tensor> decodeOne(const std::map<std::string, const at::Tensor*>& byName, const std::string& name,
                               const std::vector<std::int64_t>& shape, SparseSpec spec) {
  const std::int64_t n = std::accumulate(shape.begin(), shape.end(), std::int64_t{1}, std::multiplies<>());
  const std::int64_t chunks = sparseChunks(n, spec), kept = sparseKept(n, spec);
  auto q = part(byName, name, at::kChar, kept);
  auto index = part(byName, name + kIndexSuffix, at::kShort, kept);
  auto scale = part(byName, name + kScaleSuffix, at::kFloat, chunks);
  if (!q || !index || !scale) return makeError(!q ? q.error() : !index ? index.error() : scale.error());
  const at::Tensor qc = (*q)->contiguous(), ic = (*index)->contiguous(), sc = (*scale)->contiguous();
  const auto* pq = qc.data_ptr<std::int8_t>();
  const auto* pi = ic.data_ptr<std::int16_t>();
  const float* ps = sc.data_ptr<float>();
  at::Tensor x = at::zeros({n}, at::TensorOptions().dtype(at::kFloat));
  float* px = x.data_ptr<float>();
  std::int64_t pos = 0;
  for (std::int64_t c = 0; c < chunks; ++c) {
    const std::int64_t length = std::min(spec.chunk, n - c * spec.chunk);
    if (!std::isfinite(ps[c]) || ps[c] < 0.0f)
      return makeError("scale " + safeQuote(name + kScaleSuffix) + " holds an invalid value at chunk " +
                       std::to_string(c));
    for (std::int64_t k = 0, previous = -1; k < keptIn(length, spec.keep); ++k, ++pos) {
      const std::int64_t i = pi[pos];
      if (i <= previous || i >= length)  // strictly increasing inside the chunk: no entry twice
        return makeError("index " + safeQuote(name + kIndexSuffix) + " is out of order or range in chunk " +
                         std::to_string(c));
      if (spec.valueBits == 2 && (pq[pos] == 0 || pq[pos] < -2 || pq[pos] > 2))
        return makeError("value " + safeQuote(name) + " is not a 2-bit level in chunk " + std::to_string(c));
      px[c * spec.chunk + i] = static_cast<float>(pq[pos]) * ps[c];
      previous = i;
    }
  }
  return x.view(shape);
}

}  // namespace

// Bits of one chunk's indices as Rice-coded gaps (gap − 1 = q·2^b + r: q ones, a zero, b bits of r)
// with the chunk's best b in [0, 15], named in 4 bits. Written here because no library at hand
// has a bit-exact Golomb-Rice code; it is only counted for now, not written (an experiment).
std::int64_t riceIndexBits(const std::int16_t* index, std::int64_t kept) {
  std::int64_t best = -1;
  for (int b = 0; b < 16; ++b) {
    std::int64_t bits = 4, previous = -1;
    for (std::int64_t k = 0; k < kept; ++k) {
      bits += ((index[k] - previous - 1) >> b) + 1 + b;
      previous = index[k];
    }
    if (best < 0 || bits < best) best = bits;
  }
  return best;
}

std::int64_t sparseWireBytes(const ckpt::NamedTensors& encoded, SparseSpec spec) {
  std::map<std::string, const at::Tensor*> byName;
  for (const auto& [name, t] : encoded) byName.emplace(name, &t);
  std::int64_t bytes = 0;
  for (const auto& [name, t] : encoded) {
    if (!byName.count(name + kIndexSuffix)) continue;  // an index or scale tensor itself
    const at::Tensor index = byName.at(name + kIndexSuffix)->contiguous();
    const std::int64_t chunks = byName.at(name + kScaleSuffix)->numel(), kept = t.numel();
    const auto* pi = index.data_ptr<std::int16_t>();
    std::int64_t bits = kept * spec.valueBits, pos = 0;
    for (std::int64_t c = 0; c < chunks; ++c) {
      const std::int64_t inChunk = c + 1 < chunks ? spec.keep : kept - (chunks - 1) * spec.keep;
      bits += riceIndexBits(pi + pos, inChunk);
      pos += inChunk;
    }
    bytes += 4 * chunks + (bits + 7) / 8;
  }
  return bytes;
}

ckpt::NamedTensors encodeSparse(const ckpt::NamedTensors& deltas, SparseSpec spec) {
  TORCH_CHECK(validSparseSpec(spec), "invalid sparse spec");
  ckpt::NamedTensors out;
  for (const auto& [name, delta] : deltas) encodeOne(name, delta, spec, out);
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  return out;
}

Expected<ckpt::NamedTensors> decodeSparse(const ckpt::NamedTensors& encoded, SparseSpec spec,
                                          const std::map<std::string, std::vector<std::int64_t>>& shapes) {
  if (!validSparseSpec(spec)) return makeError("invalid sparse spec");
  std::map<std::string, const at::Tensor*> byName;
  for (const auto& [name, tensor] : encoded)
    if (!byName.emplace(name, &tensor).second) return makeError("duplicate tensor " + safeQuote(name));
  if (byName.size() != 3 * shapes.size())
    return makeError("sparse contribution holds " + std::to_string(byName.size()) + " tensors, expected " +
                     std::to_string(3 * shapes.size()));
  ckpt::NamedTensors out;
  for (const auto& [name, shape] : shapes) {
    auto x = decodeOne(byName, name, shape, spec);
    if (!x) return makeError(x.error());
    out.emplace_back(name, std::move(*x));
  }
  return out;
}

ckpt::NamedTensors ErrorFeedback::corrected(const ckpt::NamedTensors& deltas) const {
  ckpt::NamedTensors out;
  for (const auto& [name, delta] : deltas) {
    const auto r = residual_.find(name);
    // × 1 is exact: without decay the sum has the bits it had before decay existed.
    out.emplace_back(name, r == residual_.end() ? delta.to(at::kFloat) : delta.to(at::kFloat) + r->second * decay_);
  }
  return out;
}

void ErrorFeedback::keepUnsent(const ckpt::NamedTensors& corrected, const ckpt::NamedTensors& decoded) {
  std::map<std::string, const at::Tensor*> sent;
  for (const auto& [name, t] : decoded) sent.emplace(name, &t);
  residual_.clear();  // a tensor no longer sent (an expert that left) drops its residual
  for (const auto& [name, c] : corrected) {
    const auto s = sent.find(name);
    residual_[name] = s == sent.end() ? c.clone() : c - *s->second;
  }
}

}  // namespace es::sync
