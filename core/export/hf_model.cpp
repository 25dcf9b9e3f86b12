#include "core/export/hf_model.h"

#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include <map>

namespace es::hf {
namespace {

std::string shapeText(const at::Tensor& t) {
  std::string s = "[";
  for (std::int64_t i = 0; i < t.dim(); ++i) s += (i ? ", " : "") + std::to_string(t.size(i));
  return s + "]";
}

// Every tensor of our model with its expected shape and its Mixtral name ("" for wqkv, split).
std::map<std::string, std::pair<std::vector<std::int64_t>, std::string>> ourLayout(const model::ModelConfig& c) {
  const std::int64_t d = c.dModel, h = c.expertHidden, v = c.vocabSize;
  std::map<std::string, std::pair<std::vector<std::int64_t>, std::string>> layout;
  layout["tok_emb.weight"] = {{v, d}, "model.embed_tokens.weight"};
  layout["norm.weight"] = {{d}, "model.norm.weight"};
  layout["lm_head.weight"] = {{v, d}, "lm_head.weight"};
  for (int l = 0; l < c.nLayers; ++l) {
    const std::string ours = "layers." + std::to_string(l) + ".", theirs = "model.layers." + std::to_string(l) + ".";
    layout[ours + "attn_norm.weight"] = {{d}, theirs + "input_layernorm.weight"};
    layout[ours + "attn.wqkv.weight"] = {{3 * d, d}, ""};
    layout[ours + "attn.wo.weight"] = {{d, d}, theirs + "self_attn.o_proj.weight"};
    layout[ours + "ffn_norm.weight"] = {{d}, theirs + "post_attention_layernorm.weight"};
    layout[ours + "moe.router.weight"] = {{c.nExperts, d}, theirs + "block_sparse_moe.gate.weight"};
    for (int e = 0; e < c.nExperts; ++e) {
      const std::string expert = "moe.experts." + std::to_string(e) + ".";
      const std::string target = theirs + "block_sparse_moe.experts." + std::to_string(e) + ".";
      layout[ours + expert + "w1"] = {{h, d}, target + "w1.weight"};
      layout[ours + expert + "w3"] = {{h, d}, target + "w3.weight"};
      layout[ours + expert + "w2"] = {{d, h}, target + "w2.weight"};
    }
  }
  return layout;
}

}  // namespace

std::string mixtralConfigJson(const model::ModelConfig& c) {
  nlohmann::ordered_json j;
  j["architectures"] = {"MixtralForCausalLM"};
  j["model_type"] = "mixtral";
  j["vocab_size"] = c.vocabSize;
  j["hidden_size"] = c.dModel;
  j["intermediate_size"] = c.expertHidden;
  j["num_hidden_layers"] = c.nLayers;
  j["num_attention_heads"] = c.nHeads;
  j["num_key_value_heads"] = c.nHeads;
  j["head_dim"] = c.headDim();
  j["hidden_act"] = "silu";
  j["max_position_embeddings"] = c.seqLen;
  j["initializer_range"] = 0.02;
  j["rms_norm_eps"] = c.normEps;
  j["rope_theta"] = c.ropeTheta;
  j["sliding_window"] = nullptr;
  j["attention_dropout"] = 0.0;
  j["num_local_experts"] = c.nExperts;
  j["num_experts_per_tok"] = c.topK;
  j["output_router_logits"] = false;
  j["router_aux_loss_coef"] = 0.0;
  j["router_jitter_noise"] = 0.0;
  j["tie_word_embeddings"] = false;
  j["use_cache"] = true;
  // Our runs have no special tokens; Mixtral's defaults (1 and 2) are plain bytes to us.
  j["bos_token_id"] = nullptr;
  j["eos_token_id"] = nullptr;
  j["pad_token_id"] = nullptr;
  j["torch_dtype"] = "float32";
  return j.dump(2) + "\n";
}

std::string generationConfigJson() {
  nlohmann::ordered_json j;
  j["do_sample"] = false;
  j["bos_token_id"] = nullptr;
  j["eos_token_id"] = nullptr;
  j["pad_token_id"] = nullptr;
  return j.dump(2) + "\n";
}

Expected<ckpt::NamedTensors> mixtralTensors(const ckpt::NamedTensors& ours, const model::ModelConfig& config) {
  auto layout = ourLayout(config);
  ckpt::NamedTensors out;
  const std::int64_t d = config.dModel;
  for (const auto& [name, tensor] : ours) {
    const auto it = layout.find(name);
    if (it == layout.end()) return makeError("tensor \"" + name + "\" is not part of the model");
    const auto& [shape, target] = it->second;
    if (tensor.sizes() != c10::IntArrayRef(shape))
      return makeError("tensor \"" + name + "\" has shape " + shapeText(tensor) + ", not the config's");
    if (target.empty()) {  // wqkv: q, k and v stacked by rows
      const std::string prefix = "model." + name.substr(0, name.size() - std::string("wqkv.weight").size());
      const std::string self = prefix.substr(0, prefix.size() - std::string("attn.").size()) + "self_attn.";
      out.emplace_back(self + "q_proj.weight", tensor.narrow(0, 0, d).to(torch::kFloat32).contiguous());
      out.emplace_back(self + "k_proj.weight", tensor.narrow(0, d, d).to(torch::kFloat32).contiguous());
      out.emplace_back(self + "v_proj.weight", tensor.narrow(0, 2 * d, d).to(torch::kFloat32).contiguous());
    } else {
      out.emplace_back(target, tensor.to(torch::kFloat32).contiguous());
    }
    layout.erase(it);
  }
  if (!layout.empty()) return makeError("tensor \"" + layout.begin()->first + "\" is missing");
  return out;
}

}  // namespace es::hf
