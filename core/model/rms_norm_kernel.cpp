#include "core/model/rms_norm_kernel.h"

#include "core/model/vector_math.h"

#include <cmath>

namespace es::model {
namespace {

// Eight partial sums so that GCC keeps the reduction in vector registers without -ffast-math
// (it may not reorder one running float sum); the same order on every call.
constexpr int kLanes = 8;

ES_CPU_CLONES float dot(const float* a, const float* b, std::int64_t d) {
  float lanes[kLanes] = {};
  std::int64_t i = 0;
  for (; i + kLanes <= d; i += kLanes)
    for (int l = 0; l < kLanes; ++l) lanes[l] += a[i + l] * b[i + l];
  float sum = 0;
  for (; i < d; ++i) sum += a[i] * b[i];
  for (int l = 0; l < kLanes; ++l) sum += lanes[l];
  return sum;
}

ES_CPU_CLONES void scaleRow(const float* x, const float* w, float s, float* y, std::int64_t d) {
  for (std::int64_t i = 0; i < d; ++i) y[i] = x[i] * s * w[i];
}

// gx = s·(g·w) − x·c, gw += g·x·s; returns nothing: one pass once c is known.
ES_CPU_CLONES void backwardRow(const float* x, const float* w, const float* g, float s, float c, float* gx, float* gw,
                               std::int64_t d) {
  for (std::int64_t i = 0; i < d; ++i) {
    gx[i] = s * g[i] * w[i] - x[i] * c;
    gw[i] += g[i] * x[i] * s;
  }
}

// Σ g·w·x over a row, with the same lanes as dot().
ES_CPU_CLONES float weightedDot(const float* g, const float* w, const float* x, std::int64_t d) {
  float lanes[kLanes] = {};
  std::int64_t i = 0;
  for (; i + kLanes <= d; i += kLanes)
    for (int l = 0; l < kLanes; ++l) lanes[l] += g[i + l] * w[i + l] * x[i + l];
  float sum = 0;
  for (; i < d; ++i) sum += g[i] * w[i] * x[i];
  for (int l = 0; l < kLanes; ++l) sum += lanes[l];
  return sum;
}

}  // namespace

void rmsNormRows(const float* x, const float* w, float* y, float* rstd, std::int64_t rows, std::int64_t d, float eps) {
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* row = x + r * d;
    const float s = 1.0f / std::sqrt(dot(row, row, d) / float(d) + eps);
    rstd[r] = s;
    scaleRow(row, w, s, y + r * d, d);
  }
}

void rmsNormRowsBackward(const float* x, const float* w, const float* g, const float* rstd, float* gx, float* gw,
                         std::int64_t rows, std::int64_t d) {
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* row = x + r * d;
    const float* grad = g + r * d;
    const float s = rstd[r];
    const float c = s * s * s * weightedDot(grad, w, row, d) / float(d);
    backwardRow(row, w, grad, s, c, gx + r * d, gw, d);
  }
}

}  // namespace es::model
