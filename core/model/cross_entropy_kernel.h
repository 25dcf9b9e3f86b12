// Cross-entropy over a [rows, vocab] block of logits in one pass forward (after the row's max)
// and one backward (issue 41: log_softmax wrote the whole [2048, 4096] log-probabilities and kept
// them for the backward, nll_loss's backward zero-filled a tensor as large and scattered into it,
// and log_softmax's backward read both and wrote a third: the largest element-wise tensors of a
// step). Plain C++ on float rows, compiled for several CPUs (vector_math.h).
#pragma once

#include <cstdint>

namespace es::model {

// lse[r] = log Σ_j e^x[r][j]; loss[r] = lse[r] − x[r][target[r]]. Targets in [0, vocab).
void crossEntropyRows(const float* logits, const std::int64_t* targets, float* lse, float* loss, std::int64_t rows,
                      std::int64_t vocab);

// grad[r][j] = (e^(x[r][j] − lse[r]) − [j = target[r]]) · scale.
void crossEntropyRowsBackward(const float* logits, const std::int64_t* targets, const float* lse, float scale,
                              float* grad, std::int64_t rows, std::int64_t vocab);

}  // namespace es::model
