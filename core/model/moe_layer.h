// The sparse feed-forward block: a linear router, softmax, top-k, and SwiGLU experts.
//
// Expert compute is grouped: the (token, expert) assignments are sorted by expert and each expert
// runs one matmul over exactly the tokens routed to it, so the cost is top_k/n_experts of a
// dense pass (measured ~2x faster than a padded or dense pass on CPU, docs/PERFORMANCE.md).
// Every expert owns its own parameter tensors (not one stacked [E, ...] tensor) so that a peer
// can freeze the experts it does not own: frozen experts get no weight gradient at all.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/linear.h>

namespace es::model {

struct ModelConfig;

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

class MoeLayerImpl : public torch::nn::Module {
 public:
  explicit MoeLayerImpl(const ModelConfig& config);

  // x: [n, d]. lbWeights: [E] per-expert weight of the load-balancing term (SPES scales the
  // terms of a peer's local experts, see Trainer).
  MoeOutput forward(const torch::Tensor& x, const torch::Tensor& lbWeights);

  torch::nn::Linear router{nullptr};  // d -> E, no bias
  torch::nn::ModuleList experts{nullptr};

 private:
  int nExperts_;
  int topK_;
  std::vector<Expert> expertList_;  // the same modules as `experts`, typed
};
TORCH_MODULE(MoeLayer);

}  // namespace es::model
