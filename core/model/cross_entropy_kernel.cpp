#include "core/model/cross_entropy_kernel.h"

#include "core/model/vector_math.h"

#include <cmath>

namespace es::model {
namespace {

constexpr int kLanes = 16;  // partial maxima and sums: the reduction stays in vector registers

// The row's largest logit — NaN when any logit is NaN or infinite (Σ x·0 is 0 only when every x
// is finite): max() drops a NaN, and the loss must not look finite when the logits are not.
ES_CPU_CLONES float rowMax(const float* x, std::int64_t n) {
  float lanes[kLanes], poison[kLanes] = {};
  for (float& l : lanes) l = x[0];
  std::int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l) {
      lanes[l] = std::max(lanes[l], x[i + l]);
      poison[l] += x[i + l] * 0.0f;
    }
  float m = x[0], bad = 0;
  for (; i < n; ++i) {
    m = std::max(m, x[i]);
    bad += x[i] * 0.0f;
  }
  for (int l = 0; l < kLanes; ++l) {
    m = std::max(m, lanes[l]);
    bad += poison[l];
  }
  return m + bad;
}

ES_CPU_CLONES float sumExpMinus(const float* x, float shift, std::int64_t n) {
  float lanes[kLanes] = {};
  std::int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l) lanes[l] += vmath::exp(x[i + l] - shift);
  float sum = 0;
  for (; i < n; ++i) sum += vmath::exp(x[i] - shift);
  for (const float l : lanes) sum += l;
  return sum;
}

ES_CPU_CLONES void softmaxTimes(const float* x, float shift, float scale, float* out, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) out[i] = vmath::exp(x[i] - shift) * scale;
}

}  // namespace

void crossEntropyRows(const float* logits, const std::int64_t* targets, float* lse, float* loss, std::int64_t rows,
                      std::int64_t vocab) {
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* x = logits + r * vocab;
    const float m = rowMax(x, vocab);
    lse[r] = m + std::log(sumExpMinus(x, m, vocab));
    loss[r] = lse[r] - x[targets[r]];
  }
}

void crossEntropyRowsBackward(const float* logits, const std::int64_t* targets, const float* lse, float scale,
                              float* grad, std::int64_t rows, std::int64_t vocab) {
  for (std::int64_t r = 0; r < rows; ++r) {
    float* g = grad + r * vocab;
    softmaxTimes(logits + r * vocab, lse[r], scale, g, vocab);
    g[targets[r]] -= scale;
  }
}

}  // namespace es::model
