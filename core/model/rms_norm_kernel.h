// RMSNorm's forward and backward as one pass each over a block of rows (issue 41: LibTorch's
// composite — pow, mean, add, rsqrt, two multiplies, and autograd's backward through each — made
// ~15 passes over the activations, memory-bound, and each a parallel region of its own). Plain
// C++ on float rows; each function is compiled for AVX-512, AVX2 and the x86-64 baseline and the
// CPU picks one at load time (GCC target_clones). A row's result never depends on the thread
// count; the weight's gradient is summed in a fixed order of row blocks.
#pragma once

#include <cstdint>

namespace es::model {

// y[r] = x[r] · rstd[r] · w, rstd[r] = 1 / sqrt(mean(x[r]²) + eps), for rows [0, rows) of d floats.
void rmsNormRows(const float* x, const float* w, float* y, float* rstd, std::int64_t rows, std::int64_t d, float eps);

// For rows [0, rows): gx[r] = rstd · (g·w − x · rstd² · mean(g·w·x)), and gw += Σ_r g·x·rstd
// (gw is this block's own d floats, summed by the caller).
void rmsNormRowsBackward(const float* x, const float* w, const float* g, const float* rstd, float* gx, float* gw,
                         std::int64_t rows, std::int64_t d);

}  // namespace es::model
