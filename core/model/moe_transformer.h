// Decoder-only Mixture-of-Experts transformer (nanoGPT's shape, Mixtral's FFN):
//   tok_emb -> N x [RMSNorm -> causal self-attention with RoPE -> residual,
//                   RMSNorm -> MoE FFN (top-k of E SwiGLU experts) -> residual]
//   -> RMSNorm -> lm_head (untied).
// Parameter names follow core/model/tensor_names.h (a wire format). Buffers (RoPE tables, causal
// mask) are derived from the config and are not part of any checkpoint.
#pragma once

#include "core/model/model_config.h"
#include "core/model/moe_layer.h"

#include <torch/nn/module.h>
#include <torch/nn/modules/embedding.h>

namespace es::model {

// y = x / sqrt(mean(x²) + eps) · weight (LibTorch has no RMSNorm before 2.4): fused on float32 CPU
// tensors (core/model/rms_norm.cpp), LibTorch's composite elsewhere. rmsNormReference is that
// composite, always.
torch::Tensor rmsNorm(const torch::Tensor& x, const torch::Tensor& weight, double eps);
torch::Tensor rmsNormReference(const torch::Tensor& x, const torch::Tensor& weight, double eps);

class RmsNormImpl : public torch::nn::Module {
 public:
  RmsNormImpl(int dim, double eps);
  torch::Tensor forward(const torch::Tensor& x);
  torch::Tensor weight;

 private:
  double eps_;
};
TORCH_MODULE(RmsNorm);

// Rotates channel pairs (i, i + h/2) of x: [B, H, T, h] by the angles in cos/sin: [T, h/2]. Fused
// on float32 CPU tensors (core/model/rope.cpp); applyRopeReference is LibTorch's composite, always.
torch::Tensor applyRope(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin);
torch::Tensor applyRopeReference(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin);

// One layer's keys and values so far: [B, H, t, h] each (undefined before the first call).
struct LayerKvCache {
  torch::Tensor k, v;
};

// Every layer's cache plus the number of positions it holds (generation, core/model/generate.h).
struct KvCache {
  std::vector<LayerKvCache> layers;
  std::int64_t length = 0;
};

class CausalSelfAttentionImpl : public torch::nn::Module {
 public:
  explicit CausalSelfAttentionImpl(const ModelConfig& config);
  // x: [B, T, d]; cos/sin: [T, head_dim/2]; mask: [T, T] additive (0 / -inf)
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin,
                        const torch::Tensor& mask);
  // Inference with a key/value cache (kv_cache.cpp): x holds the T tokens after the cache's
  // keys; mask: [T, cached + T] additive. Appends this call's keys and values to `cache`.
  torch::Tensor forwardCached(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin,
                              const torch::Tensor& mask, LayerKvCache& cache);
  torch::nn::Linear wqkv{nullptr}, wo{nullptr};

 private:
  int nHeads_;
  int headDim_;
};
TORCH_MODULE(CausalSelfAttention);

struct BlockOutput {
  torch::Tensor x;
  torch::Tensor loadBalance;
  torch::Tensor zLoss;
};

class BlockImpl : public torch::nn::Module {
 public:
  explicit BlockImpl(const ModelConfig& config);
  BlockOutput forward(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin,
                      const torch::Tensor& mask, const torch::Tensor& lbWeights);
  RmsNorm attnNorm{nullptr}, ffnNorm{nullptr};
  CausalSelfAttention attn{nullptr};
  MoeLayer moe{nullptr};
};
TORCH_MODULE(Block);

struct ForwardOutput {
  torch::Tensor logits;       // [B, T, vocab]
  torch::Tensor loadBalance;  // scalar, mean over layers
  torch::Tensor zLoss;        // scalar, mean over layers
};

class MoeTransformerImpl : public torch::nn::Module {
 public:
  // Builds the model with its initial weights drawn from torch's current RNG: normal(0, 0.02),
  // residual projections (attn.wo, experts' w2) scaled by 1/sqrt(2·n_layers), norms at 1.
  explicit MoeTransformerImpl(const ModelConfig& config);

  // tokens: [B, T] int64 with T <= seq_len. lbWeights: [E] (default all ones).
  ForwardOutput forward(const torch::Tensor& tokens, const torch::Tensor& lbWeights = {});

  // Inference only (kv_cache.cpp): logits [B, T, vocab] of `tokens` [B, T] that follow the
  // cache's positions; cache.length + T <= seq_len. Fills `cache` for the next call.
  torch::Tensor logitsCached(const torch::Tensor& tokens, KvCache& cache);

  const ModelConfig& config() const { return config_; }
  void setExpertDispatch(ExpertDispatch dispatch);  // every layer's (benches, tests)

 private:
  ModelConfig config_;
  torch::nn::Embedding tokEmb{nullptr};
  torch::nn::ModuleList layers{nullptr};
  std::vector<Block> blocks_;  // the modules of `layers`, typed
  RmsNorm norm{nullptr};
  torch::nn::Linear lmHead{nullptr};
  torch::Tensor ropeCos_, ropeSin_, causalMask_;  // buffers
};
TORCH_MODULE(MoeTransformer);

}  // namespace es::model
