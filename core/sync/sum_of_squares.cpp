#include "core/sync/sum_of_squares.h"

#include <torch/torch.h>

#include <cstdint>

namespace es::sync {

double sumOfSquares(const at::Tensor& tensor) {
  const at::Tensor t = tensor.detach().to(at::kCPU, at::kDouble).contiguous();
  const double* p = t.data_ptr<double>();
  double sum = 0.0;
  for (std::int64_t i = 0, n = t.numel(); i < n; ++i) sum += p[i] * p[i];
  return sum;
}

}  // namespace es::sync
