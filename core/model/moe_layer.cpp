#include "core/model/moe_layer.h"

#include "core/model/model_config.h"
#include "core/model/torch_compat.h"

#include <torch/torch.h>

#include <algorithm>
#include <stdexcept>
#include <vector>

namespace es::model {
namespace {

// Each sorted assignment's index within its expert's run: i − (first sorted assignment of e).
torch::Tensor positionInExpert(const torch::Tensor& expertSorted, const torch::Tensor& counts) {
  const auto start = counts.cumsum(0) - counts;  // [E]
  return torch::arange(expertSorted.size(0), counts.options()) - start.index_select(0, expertSorted);
}

// Every expert's w1, w3 and w2 stacked to [E, out, in]; the gradients flow back to each expert's
// own tensors (a frozen expert's nowhere).
struct StackedWeights {
  torch::Tensor w1, w3, w2;
};
StackedWeights stackWeights(const std::vector<Expert>& experts) {
  std::vector<torch::Tensor> w1, w3, w2;
  for (const auto& expert : experts) {
    w1.push_back(expert->w1);
    w3.push_back(expert->w3);
    w2.push_back(expert->w2);
  }
  return {torch::stack(w1), torch::stack(w3), torch::stack(w2)};
}

}  // namespace

ExpertImpl::ExpertImpl(int dModel, int hidden) {
  w1 = register_parameter("w1", torch::empty({hidden, dModel}));
  w3 = register_parameter("w3", torch::empty({hidden, dModel}));
  w2 = register_parameter("w2", torch::empty({dModel, hidden}));
}

torch::Tensor ExpertImpl::forward(const torch::Tensor& x) {
  // x: [n, d]; gate and up: [n, hidden]
  return torch::mm(swiglu(torch::mm(x, w1.t()), torch::mm(x, w3.t())), w2.t());  // [n, d]
}

MoeLayerImpl::MoeLayerImpl(const ModelConfig& config) : nExperts_(config.nExperts), topK_(config.topK) {
  router = register_module("router",
                           torch::nn::Linear(torch::nn::LinearOptions(config.dModel, config.nExperts).bias(false)));
  experts = register_module("experts", torch::nn::ModuleList());
  for (int e = 0; e < config.nExperts; ++e) {
    expertList_.emplace_back(config.dModel, config.expertHidden);
    experts->push_back(expertList_.back());
  }
}

MoeOutput MoeLayerImpl::forward(const torch::Tensor& x, const torch::Tensor& lbWeights) {
  const int64_t n = x.size(0);
  auto logits = router->forward(x);                              // [n, E]
  auto probs = torch::softmax(logits, /*dim=*/-1);               // [n, E]
  auto [gates, chosen] = torch::topk(probs, topK_, /*dim=*/-1);  // [n, k] each
  gates = gates / gates.sum(-1, /*keepdim=*/true);               // renormalise over the chosen k

  // Sort the n·k assignments by expert; token_of[i] is the token of sorted assignment i.
  auto flatExpert = chosen.reshape({-1});  // [n·k]
  auto [expertSorted, order] = torch::sort(flatExpert, /*stable=*/true, /*dim=*/0, /*descending=*/false);
  auto tokenOf = torch::div(order, topK_, "floor");              // [n·k]
  auto gateSorted = gates.reshape({-1}).index_select(0, order);  // [n·k]
  // Assignments per expert. Not bincount: on a GPU it reads the input's min and max back to the
  // host (two waits per layer); a scatter of ones needs nothing from the host, and integer sums
  // do not depend on their order.
  auto counts =
      torch::zeros({nExperts_}, flatExpert.options()).scatter_add_(0, flatExpert, torch::ones_like(flatExpert));
  auto xSorted = x.index_select(0, tokenOf);                      // [n·k, d]
  auto expertOut = runExperts(x, xSorted, expertSorted, counts);  // [n·k, d]
  auto ySorted = expertOut * gateSorted.unsqueeze(1);             // [n·k, d]
  // Under bf16 autocast the experts' products are bf16; the residual stream stays f32.
  auto y = torch::zeros_like(x).index_add(0, tokenOf, ySorted.to(x.scalar_type()));  // [n, d]

  // Load balance (Switch): fraction of assignments f_e (no gradient) times mean probability P_e.
  auto fraction = counts.to(probs.scalar_type()) / static_cast<double>(n * topK_);  // [E]
  auto meanProb = probs.mean(0);                                                    // [E]
  auto loadBalance = nExperts_ * (lbWeights * fraction * meanProb).sum();
  auto zLoss = torch::logsumexp(logits, -1).pow(2).mean();
  return {y, loadBalance, zLoss, counts};
}

torch::Tensor MoeLayerImpl::runExperts(const torch::Tensor& x, const torch::Tensor& xSorted,
                                       const torch::Tensor& expertSorted, const torch::Tensor& counts) {
  if (dispatch == ExpertDispatch::Grouped) return expertsGrouped(xSorted, expertSorted, counts);
  auto countsCpu = counts.to(torch::kCPU);  // the one wait for the device per layer: sizes below
  const auto* countPtr = countsCpu.data_ptr<int64_t>();
  return batched(x, countPtr, xSorted.size(0)) ? expertsBatched(xSorted, expertSorted, counts, countPtr)
                                               : expertsLooped(xSorted, countPtr);
}

bool MoeLayerImpl::batched(const torch::Tensor& x, const std::int64_t* counts, std::int64_t assignments) const {
  if (dispatch != ExpertDispatch::Auto) return dispatch == ExpertDispatch::Batched;
  const std::int64_t busiest = *std::max_element(counts, counts + nExperts_);
  return x.is_cuda() && busiest * nExperts_ <= 2 * assignments;
}

torch::Tensor MoeLayerImpl::expertsLooped(const torch::Tensor& xSorted, const std::int64_t* counts) {
  // One split, not a narrow per expert: the backward of each narrow would materialise a zeroed
  // [n·k, d] gradient per expert and sum them (measured +5% tokens/s at 2 threads).
  const auto pieces = xSorted.split_with_sizes(c10::IntArrayRef(counts, static_cast<size_t>(nExperts_)), 0);
  std::vector<torch::Tensor> outputs;
  outputs.reserve(static_cast<size_t>(nExperts_));
  for (int e = 0; e < nExperts_; ++e) {
    if (counts[e] == 0) continue;  // an idle expert costs nothing (and gets no gradient)
    outputs.push_back(expertList_[static_cast<size_t>(e)]->forward(pieces[static_cast<size_t>(e)]));
  }
  return torch::cat(outputs, 0);  // [n·k, d]
}

// Sorted assignment i of expert e goes to row e·C + (i − start_e) of the padded block; the rows
// past an expert's count stay zero, add nothing to its weight gradient and are never read back.
// Idle experts' weights get a zero gradient here (the loop gives them none): AdamW treats both alike.
torch::Tensor MoeLayerImpl::expertsBatched(const torch::Tensor& xSorted, const torch::Tensor& expertSorted,
                                           const torch::Tensor& counts, const std::int64_t* hostCounts) {
  const int64_t capacity = *std::max_element(hostCounts, hostCounts + nExperts_);
  const int64_t d = xSorted.size(1);
  auto row = expertSorted * capacity + positionInExpert(expertSorted, counts);  // [n·k]
  auto block = torch::zeros({nExperts_ * capacity, d}, xSorted.options()).index_copy(0, row, xSorted);
  block = block.view({nExperts_, capacity, d});
  const auto w = stackWeights(expertList_);
  auto hidden = swiglu(torch::bmm(block, w.w1.transpose(1, 2)), torch::bmm(block, w.w3.transpose(1, 2)));
  auto out = torch::bmm(hidden, w.w2.transpose(1, 2));              // [E, C, d]
  return out.view({nExperts_ * capacity, d}).index_select(0, row);  // [n·k, d]
}

bool groupedExpertsAvailable() { return ES_HAVE_GROUPED_MM; }

// Expert e's sorted assignments fill rows [start_e, start_e + count_e) of a block whose groups are
// rounded up to kGroupRows rows, and an idle expert's group is kGroupRows rows too (so every group
// starts 16-byte aligned in any layout the backward takes, and none is empty: torchtitan pads its
// groups alike for the same kernel). The block has a size known without the counts,
// n·k + E·kGroupRows; the last group runs to its end. Padding rows are zero: they
// add nothing to a weight gradient and are never read back. Idle experts' weights get a zero
// gradient, as batched. Casts to autocast's type itself when autocast is on (whether a LibTorch
// lists the op for autocast varies by version).
torch::Tensor MoeLayerImpl::expertsGrouped(const torch::Tensor& xSorted, const torch::Tensor& expertSorted,
                                           const torch::Tensor& counts) {
#if ES_HAVE_GROUPED_MM
  constexpr int64_t kGroupRows = 16;
  const int64_t rows = xSorted.size(0) + nExperts_ * kGroupRows, d = xSorted.size(1);
  auto padded = (torch::div(counts + (kGroupRows - 1), kGroupRows, "floor") * kGroupRows).clamp_min(kGroupRows);
  auto ends = padded.cumsum(0);
  auto row = (ends - padded).index_select(0, expertSorted) + positionInExpert(expertSorted, counts);  // [n·k]
  auto offsets = ends.to(torch::kInt);
  offsets.narrow(0, nExperts_ - 1, 1).fill_(rows);  // on the device: no wait

  const auto device = xSorted.device().type();
  const auto type = autocastEnabled(device) ? autocastDtype(device) : xSorted.scalar_type();
  auto block = torch::zeros({rows, d}, xSorted.options().dtype(type)).index_copy(0, row, xSorted.to(type));
  const auto w = stackWeights(expertList_);
  // [E, out, in] transposed to [E, in, out]: the column-major layout the kernel takes.
  auto product = [&](const torch::Tensor& a, const torch::Tensor& stacked) {
    return at::_grouped_mm(a, stacked.to(type).transpose(1, 2), offsets);
  };
  auto out = product(swiglu(product(block, w.w1), product(block, w.w3)), w.w2);  // [rows, d]
  return out.index_select(0, row);                                               // [n·k, d]
#else
  (void)xSorted, (void)expertSorted, (void)counts;
  throw std::invalid_argument("grouped experts need LibTorch >= 2.9 (at::_grouped_mm); this is " TORCH_VERSION);
#endif
}

}  // namespace es::model
