// The sparse feed-forward block: a linear router, softmax, top-k, and SwiGLU experts.
//
// Expert compute is grouped: the (token, expert) assignments are sorted by expert and each expert
// runs one matmul over exactly the tokens routed to it, so the cost is top_k/n_experts of a
// dense pass (measured ~2x faster than a padded or dense pass on CPU, docs/PERFORMANCE.md).
// Every expert owns its own parameter tensors (not one stacked [E, ...] tensor) so that a peer
// can freeze the experts it does not own: frozen experts get no weight gradient at all.
//
// On a GPU the per-expert loop is 16 experts × ~8 launches per layer, and the host's dispatch
// of those launches, not the arithmetic, most likely sets the pace (docs/PERFORMANCE.md: the H200
// ran the loop at 10 % MFU; scripts/gpu-check times both ways). There
// the experts run batched instead: the weights stacked per call, the sorted assignments laid out
// in an [E, C, d] block padded to the busiest expert's count C, three bmm — the same function,
// summed in another order. Only while padding at most doubles the experts' work (a router that
// sends most tokens to one expert falls back to the loop).
// Grouped (LibTorch >= 2.9, asked for by name only until a GPU has measured it): every expert's
// product in one at::_grouped_mm launch, its groups laid out and bounded on the device — no wait
// for the host per layer and no padding to the busiest expert.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/linear.h>

namespace es::model {

struct ModelConfig;

// silu(a) ⊙ b: fused on float32 CPU tensors (core/model/swiglu.cpp), LibTorch's composite
// elsewhere; swigluReference is that composite, always.
torch::Tensor swiglu(const torch::Tensor& a, const torch::Tensor& b);
torch::Tensor swigluReference(const torch::Tensor& a, const torch::Tensor& b);

// One SwiGLU expert: w2 · (silu(w1 · x) ⊙ (w3 · x)).
class ExpertImpl : public torch::nn::Module {
 public:
  ExpertImpl(int dModel, int hidden);
  torch::Tensor forward(const torch::Tensor& x);  // [n, d] -> [n, d]

  torch::Tensor w1, w3, w2;  // [hidden, d], [hidden, d], [d, hidden]
};
TORCH_MODULE(Expert);

struct MoeOutput {
  torch::Tensor y;                // [n, d]
  torch::Tensor loadBalance;      // scalar: E · Σ_e w_e · f_e · P_e (Switch Transformer)
  torch::Tensor zLoss;            // scalar: mean over tokens of logsumexp(router logits)²
  torch::Tensor tokensPerExpert;  // [E] int64, assignments (token, slot) per expert
};

// How the experts' products are launched. Auto: batched on a GPU (when padding allows), the loop
// on the CPU, where arithmetic is the cost and padding would only add to it.
enum class ExpertDispatch { Auto, Loop, Batched, Grouped };

// Whether this LibTorch has the grouped product (ExpertDispatch::Grouped throws without it).
bool groupedExpertsAvailable();

class MoeLayerImpl : public torch::nn::Module {
 public:
  explicit MoeLayerImpl(const ModelConfig& config);

  // x: [n, d]. lbWeights: [E] per-expert weight of the load-balancing term (SPES scales the
  // terms of a peer's local experts, see Trainer).
  MoeOutput forward(const torch::Tensor& x, const torch::Tensor& lbWeights);

  torch::nn::Linear router{nullptr};  // d -> E, no bias
  torch::nn::ModuleList experts{nullptr};
  ExpertDispatch dispatch = ExpertDispatch::Auto;  // benches and tests compare the ways

 private:
  bool batched(const torch::Tensor& x, const std::int64_t* counts, std::int64_t assignments) const;
  // xSorted: [n·k, d], the assignments sorted by expert; counts: per expert, on the host.
  torch::Tensor expertsLooped(const torch::Tensor& xSorted, const std::int64_t* counts);
  torch::Tensor expertsBatched(const torch::Tensor& xSorted, const torch::Tensor& expertSorted,
                               const torch::Tensor& counts, const std::int64_t* hostCounts);
  // counts stay on the device: the groups' bounds are computed there.
  torch::Tensor expertsGrouped(const torch::Tensor& xSorted, const torch::Tensor& expertSorted,
                               const torch::Tensor& counts);
  torch::Tensor runExperts(const torch::Tensor& x, const torch::Tensor& xSorted, const torch::Tensor& expertSorted,
                           const torch::Tensor& counts);

  int nExperts_;
  int topK_;
  std::vector<Expert> expertList_;  // the same modules as `experts`, typed
};
TORCH_MODULE(MoeLayer);

}  // namespace es::model
