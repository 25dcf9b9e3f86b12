// Inference with a key/value cache: each generated token costs one position's attention over the
// cached keys instead of a forward pass over the whole prefix. Same math as forward() (checked by
// tst_generate against it); no load-balance terms, no gradients.
#include "core/model/moe_transformer.h"

#include <torch/torch.h>

#include <cmath>

namespace es::model {

torch::Tensor CausalSelfAttentionImpl::forwardCached(const torch::Tensor& x, const torch::Tensor& cos,
                                                     const torch::Tensor& sin, const torch::Tensor& mask,
                                                     LayerKvCache& cache) {
  const int64_t B = x.size(0), T = x.size(1), D = x.size(2);
  auto qkv = wqkv->forward(x).view({B, T, 3, nHeads_, headDim_}).permute({2, 0, 3, 1, 4});  // [3, B, H, T, h]
  auto q = applyRope(qkv[0], cos, sin);
  auto k = applyRope(qkv[1], cos, sin);
  auto v = qkv[2];
  cache.k = cache.k.defined() ? torch::cat({cache.k, k}, 2) : k;  // [B, H, t + T, h]
  cache.v = cache.v.defined() ? torch::cat({cache.v, v}, 2) : v;
  auto scores = torch::matmul(q, cache.k.transpose(-2, -1)) * (1.0 / std::sqrt(double(headDim_)));  // [B, H, T, t+T]
  auto y = torch::matmul(torch::softmax(scores + mask, -1), cache.v);                               // [B, H, T, h]
  return wo->forward(y.transpose(1, 2).reshape({B, T, D}));
}

torch::Tensor MoeTransformerImpl::logitsCached(const torch::Tensor& tokens, KvCache& cache) {
  const int64_t T = tokens.size(1), start = cache.length;
  TORCH_CHECK(start + T <= config_.seqLen, "positions up to ", start + T, " exceed seq_len ", config_.seqLen);
  if (cache.layers.empty()) cache.layers.resize(blocks_.size());
  auto cos = ropeCos_.narrow(0, start, T), sin = ropeSin_.narrow(0, start, T);
  auto mask = causalMask_.narrow(0, start, T).narrow(1, 0, start + T);  // row p sees columns <= p
  auto ones = torch::ones({config_.nExperts}, ropeCos_.options());
  auto x = tokEmb->forward(tokens);  // [B, T, d]
  for (std::size_t l = 0; l < blocks_.size(); ++l) {
    auto& block = blocks_[l];
    auto h = x + block->attn->forwardCached(block->attnNorm->forward(x), cos, sin, mask, cache.layers[l]);
    auto flat = block->ffnNorm->forward(h).reshape({-1, h.size(-1)});
    x = h + block->moe->forward(flat, ones).y.view_as(h);
  }
  cache.length = start + T;
  return lmHead->forward(norm->forward(x));
}

}  // namespace es::model
