#include "core/model/moe_transformer.h"

#include "core/model/torch_compat.h"

#include <torch/torch.h>

#include <cmath>
#include <stdexcept>

namespace es::model {
namespace {

torch::nn::Linear linear(int in, int out) { return torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(false)); }

bool endsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

CausalSelfAttentionImpl::CausalSelfAttentionImpl(const ModelConfig& config)
    : nHeads_(config.nHeads), headDim_(config.headDim()) {
  wqkv = register_module("wqkv", linear(config.dModel, 3 * config.dModel));
  wo = register_module("wo", linear(config.dModel, config.dModel));
}

torch::Tensor CausalSelfAttentionImpl::forward(const torch::Tensor& x, const torch::Tensor& cos,
                                               const torch::Tensor& sin, const torch::Tensor& mask) {
  const int64_t B = x.size(0), T = x.size(1), D = x.size(2);
  auto qkv = wqkv->forward(x).view({B, T, 3, nHeads_, headDim_}).permute({2, 0, 3, 1, 4});  // [3, B, H, T, h]
  auto q = applyRope(qkv[0], cos, sin);
  auto k = applyRope(qkv[1], cos, sin);
  auto v = qkv[2];
#if ES_TORCH_AT_LEAST(2, 0)
  (void)mask;
  auto y = at::scaled_dot_product_attention(q, k, v, /*attn_mask=*/{}, /*dropout_p=*/0.0, /*is_causal=*/true);
#else
  auto scores = torch::matmul(q, k.transpose(-2, -1)) * (1.0 / std::sqrt(double(headDim_)));  // [B, H, T, T]
  auto y = torch::matmul(torch::softmax(scores + mask, -1), v);                               // [B, H, T, h]
#endif
  return wo->forward(y.transpose(1, 2).reshape({B, T, D}));  // [B, T, d]
}

BlockImpl::BlockImpl(const ModelConfig& config) {
  attnNorm = register_module("attn_norm", RmsNorm(config.dModel, config.normEps));
  attn = register_module("attn", CausalSelfAttention(config));
  ffnNorm = register_module("ffn_norm", RmsNorm(config.dModel, config.normEps));
  moe = register_module("moe", MoeLayer(config));
}

BlockOutput BlockImpl::forward(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin,
                               const torch::Tensor& mask, const torch::Tensor& lbWeights) {
  auto h = x + attn->forward(attnNorm->forward(x), cos, sin, mask);  // [B, T, d]
  auto flat = ffnNorm->forward(h).reshape({-1, h.size(-1)});         // [B·T, d]
  auto moeOut = moe->forward(flat, lbWeights);
  return {h + moeOut.y.view_as(h), moeOut.loadBalance, moeOut.zLoss};
}

MoeTransformerImpl::MoeTransformerImpl(const ModelConfig& config) : config_(config) {
  if (auto problem = config.validate(); !problem.empty())
    throw std::invalid_argument("invalid model config: " + problem);
  tokEmb = register_module("tok_emb", torch::nn::Embedding(config.vocabSize, config.dModel));
  layers = register_module("layers", torch::nn::ModuleList());
  for (int l = 0; l < config.nLayers; ++l) {
    blocks_.emplace_back(config);
    layers->push_back(blocks_.back());
  }
  norm = register_module("norm", RmsNorm(config.dModel, config.normEps));
  lmHead = register_module("lm_head", linear(config.dModel, config.vocabSize));

  // RoPE tables for every position up to seq_len: angle(t, i) = t · theta^(-2i/h).
  const int half = config.headDim() / 2;
  auto inv = torch::pow(config.ropeTheta, -torch::arange(0, half, torch::kDouble) / half);
  auto angles = torch::outer(torch::arange(0, config.seqLen, torch::kDouble), inv).to(torch::kFloat);
  ropeCos_ = register_buffer("rope_cos", angles.cos());  // [seq, h/2]
  ropeSin_ = register_buffer("rope_sin", angles.sin());
  causalMask_ =
      register_buffer("causal_mask", torch::full({config.seqLen, config.seqLen}, -INFINITY).triu(1));  // [seq, seq]

  torch::NoGradGuard noGrad;
  const double residualStd = 0.02 / std::sqrt(2.0 * config.nLayers);
  for (auto& item : named_parameters()) {
    const std::string& name = item.key();
    auto& p = item.value();
    if (p.dim() < 2) continue;  // norm weights stay at 1
    const bool residual = name.find(".attn.wo.") != std::string::npos || endsWith(name, ".w2");
    torch::nn::init::normal_(p, 0.0, residual ? residualStd : 0.02);
  }
}

ForwardOutput MoeTransformerImpl::forward(const torch::Tensor& tokens, const torch::Tensor& lbWeights) {
  const int64_t T = tokens.size(1);
  TORCH_CHECK(T <= config_.seqLen, "sequence of ", T, " tokens exceeds seq_len ", config_.seqLen);
  auto weights = lbWeights.defined() ? lbWeights : torch::ones({config_.nExperts}, ropeCos_.options());
  auto cos = ropeCos_.narrow(0, 0, T), sin = ropeSin_.narrow(0, 0, T);
  auto mask = causalMask_.narrow(0, 0, T).narrow(1, 0, T);

  auto x = tokEmb->forward(tokens);  // [B, T, d]
  torch::Tensor loadBalance = torch::zeros({}, x.options()), zLoss = torch::zeros({}, x.options());
  for (auto& block : blocks_) {
    auto out = block->forward(x, cos, sin, mask, weights);
    x = out.x;
    loadBalance = loadBalance + out.loadBalance;
    zLoss = zLoss + out.zLoss;
  }
  auto logits = lmHead->forward(norm->forward(x));  // [B, T, vocab]
  return {logits, loadBalance / config_.nLayers, zLoss / config_.nLayers};
}

void MoeTransformerImpl::setExpertDispatch(ExpertDispatch dispatch) {
  for (auto& block : blocks_) block->moe->dispatch = dispatch;
}

}  // namespace es::model
