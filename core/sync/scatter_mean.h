// The scatter-mean of a sparse run (AggregatePolicy::scatterMean, issue 39): before the shared
// tensors are aggregated, each accepted sender's shared value x_ij is scaled by
//   W_t / S_tj    W_t: the weight of the senders carrying tensor t,
//                 S_tj: the weight of those whose x_ij is not zero (sent it)
// so that the aggregate's weighted mean over all senders is the weighted mean over the senders
// that sent element j — and centered clipping measures the same scaled vectors. Weights as the
// aggregate's (all 1 when no sender has merged work). Experts are left as they are (their
// owners' mean); an element nobody with weight sent keeps factor 1.
// Arithmetic: float64 element-wise (correctly rounded), weights summed in sender order, the
// scaled value rounded to float32 once — the same bits on every peer.
#pragma once

#include "core/common/expected.h"
#include "core/sync/delta_source.h"

#include <vector>

namespace es::sync {

// One more pass over `senders` (their shared tensors); then each sender's source hands out its
// scaled deltas. A source's error is returned.
Status scaleToScatterMean(std::vector<SenderDeltas>& senders);

}  // namespace es::sync
