// Tensor names are a wire format: checkpoints, contributions and merges address tensors by these
// names, so they never change within a format version. Scheme (v1), L = layer, E = expert:
//
//   tok_emb.weight                        [vocab, d]       shared
//   layers.L.attn_norm.weight             [d]              shared
//   layers.L.attn.wqkv.weight             [3d, d]          shared (q, k, v stacked in that order)
//   layers.L.attn.wo.weight               [d, d]           shared
//   layers.L.ffn_norm.weight              [d]              shared
//   layers.L.moe.router.weight            [n_experts, d]   shared
//   layers.L.moe.experts.E.w1             [hidden, d]      expert (L, E): SwiGLU gate
//   layers.L.moe.experts.E.w3             [hidden, d]      expert (L, E): SwiGLU up
//   layers.L.moe.experts.E.w2             [d, hidden]      expert (L, E): down projection
//   norm.weight                           [d]              shared
//   lm_head.weight                        [vocab, d]       shared (untied from tok_emb)
//
// Every tensor is either shared (trained and averaged by all peers) or belongs to exactly one
// expert (trained by its owners). "Expert e" of a peer's claim means index e in every layer.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace es::model {

struct ExpertRef {
  int layer = 0;
  int expert = 0;
  bool operator==(const ExpertRef& o) const { return layer == o.layer && expert == o.expert; }
};

// The expert a tensor belongs to, or nullopt for a shared tensor. Only names of exactly the form
// "layers.<L>.moe.experts.<E>.<w1|w2|w3>" (decimal, no leading zeros) are expert tensors.
std::optional<ExpertRef> expertOf(std::string_view tensorName);

inline bool isExpertTensor(std::string_view name) { return expertOf(name).has_value(); }
inline bool isSharedTensor(std::string_view name) { return !isExpertTensor(name); }

// "layers.<layer>.moe.experts.<expert>.<part>" with part one of w1, w2, w3.
std::string expertTensorName(int layer, int expert, std::string_view part);

}  // namespace es::model
