#include "core/sync/sparse_layout.h"

#include <algorithm>
#include <cmath>

namespace es::sync {
namespace {

const std::string kPrefix = "sparse/";

// A positive decimal without sign or leading zero, at most 5 digits (kMaxSparseChunk has 5).
std::optional<std::int64_t> positiveDecimal(const std::string& text) {
  if (text.empty() || text.size() > 5 || text[0] == '0') return std::nullopt;
  std::int64_t value = 0;
  for (const char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    value = value * 10 + (c - '0');
  }
  return value;
}

}  // namespace

bool validSparseSpec(const SparseSpec& spec) {
  return spec.keep > 0 && spec.keep <= spec.chunk && spec.chunk <= kMaxSparseChunk &&
         (spec.valueBits == 8 || spec.valueBits == 2);
}

std::string sparseCodecName(const SparseSpec& spec) {
  return kPrefix + std::to_string(spec.keep) + "/" + std::to_string(spec.chunk);
}

std::optional<SparseSpec> parseSparseCodec(const std::string& name) {
  if (name.compare(0, kPrefix.size(), kPrefix) != 0) return std::nullopt;
  const std::string rest = name.substr(kPrefix.size());
  const auto slash = rest.find('/');
  if (slash == std::string::npos) return std::nullopt;
  const auto keep = positiveDecimal(rest.substr(0, slash));
  const auto chunk = positiveDecimal(rest.substr(slash + 1));
  if (!keep || !chunk) return std::nullopt;
  const SparseSpec spec{*chunk, *keep, 8};
  if (!validSparseSpec(spec)) return std::nullopt;
  return spec;
}

std::int64_t sparseChunks(std::int64_t elements, const SparseSpec& spec) {
  return (elements + spec.chunk - 1) / spec.chunk;
}

std::int64_t sparseKept(std::int64_t elements, const SparseSpec& spec) {
  return elements / spec.chunk * spec.keep + std::min(elements % spec.chunk, spec.keep);
}

std::vector<ckpt::TensorInfo> sparseTensors(const std::string& name, const std::vector<std::int64_t>& shape,
                                            const SparseSpec& spec) {
  std::int64_t n = 1;
  for (const auto d : shape) n *= d;
  const std::int64_t kept = sparseKept(n, spec);
  return {{name, ckpt::DType::I8, {kept}, 0, 0},
          {name + ".__index", ckpt::DType::I16, {kept}, 0, 0},
          {name + ".__scale", ckpt::DType::F32, {sparseChunks(n, spec)}, 0, 0},
          {name + ".__shape", ckpt::DType::I64, {static_cast<std::int64_t>(shape.size())}, 0, 0}};
}

int sparseWaitRounds(const SparseSpec& spec) {
  int w = 1;
  while (spec.keep * std::int64_t(w + 1) * (w + 1) <= spec.chunk) ++w;
  return w;
}

}  // namespace es::sync
