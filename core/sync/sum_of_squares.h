// The one way a merge adds squares: a sequential float64 loop over a tensor's elements (each
// converted to float64 first), in memory order. Every figure that peers must agree on bit for bit
// — a contribution's norms (validate.h), centered clipping's distances (robust_aggregate.h), a
// shard's figure (shard_figures.h) — is built from it, so one order of addition serves them all:
// a vectorised or threaded sum would round differently on another machine. Written here, not
// taken from LibTorch: at::sum's reduction order depends on the CPU's vector width and threads.
#pragma once

#include <ATen/core/Tensor.h>

namespace es::sync {

double sumOfSquares(const at::Tensor& tensor);

}  // namespace es::sync
