// Our MoE transformer as Hugging Face's Mixtral (transformers' MixtralForCausalLM), which has our
// block exactly (checked against transformers 4.40's modeling_mixtral.py):
//  - RMSNorm x·rsqrt(mean(x²)+eps)·w before attention and before the MoE (eps = norm_eps);
//  - RoPE over rotate-half pairs (i, i+h/2) with inv_freq = theta^(-2i/h): the same pairing as
//    ours, so q and k need no permutation (unlike Meta-LLaMA conversions);
//  - attention with as many key/value heads as query heads, scaled by 1/sqrt(h), causal, no bias;
//  - router: softmax over the expert logits, top-k, gates renormalised over the k chosen;
//  - SwiGLU experts w2·(silu(w1·x) ⊙ w3·x); untied lm_head; no sliding window.
// Tensor names (ours -> theirs), L = layer, E = expert:
//   tok_emb.weight               -> model.embed_tokens.weight
//   layers.L.attn_norm.weight    -> model.layers.L.input_layernorm.weight
//   layers.L.attn.wqkv.weight    -> model.layers.L.self_attn.{q,k,v}_proj.weight (rows [0,d), [d,2d), [2d,3d))
//   layers.L.attn.wo.weight      -> model.layers.L.self_attn.o_proj.weight
//   layers.L.ffn_norm.weight     -> model.layers.L.post_attention_layernorm.weight
//   layers.L.moe.router.weight   -> model.layers.L.block_sparse_moe.gate.weight
//   layers.L.moe.experts.E.wN    -> model.layers.L.block_sparse_moe.experts.E.wN.weight
//   norm.weight                  -> model.norm.weight
//   lm_head.weight               -> lm_head.weight
#pragma once

#include "core/checkpoint/safetensors.h"
#include "core/common/expected.h"
#include "core/model/model_config.h"

#include <string>

namespace es::hf {

// config.json for MixtralForCausalLM with our shape; dtype float32, no special token ids.
std::string mixtralConfigJson(const model::ModelConfig& config);

// generation_config.json: greedy by default, no special token ids.
std::string generationConfigJson();

// Our tensors (every name of tensor_names.h, each exactly once, with the config's shapes) renamed
// and split into Mixtral's. Error on a missing, unknown or misshapen tensor.
Expected<ckpt::NamedTensors> mixtralTensors(const ckpt::NamedTensors& ours, const model::ModelConfig& config);

}  // namespace es::hf
