#include "core/model/model_config.h"

#include <nlohmann/json.hpp>

namespace es::model {
namespace {

using nlohmann::json;

}  // namespace

std::string ModelConfig::validate() const {
  auto positive = [](int v) { return v > 0; };
  if (!positive(vocabSize) || vocabSize > 65536) return "vocab_size must be in [1, 65536]";
  if (!positive(dModel) || !positive(nLayers) || !positive(nHeads) || !positive(expertHidden) ||
      !positive(seqLen))
    return "d_model, n_layers, n_heads, expert_hidden and seq_len must be positive";
  if (dModel % nHeads != 0) return "d_model must be divisible by n_heads";
  if (headDim() % 2 != 0) return "d_model / n_heads must be even (RoPE rotates pairs)";
  if (nExperts < 1) return "n_experts must be at least 1";
  if (topK < 1 || topK > nExperts) return "top_k must be in [1, n_experts]";
  if (!(ropeTheta > 0) || !(normEps > 0)) return "rope_theta and norm_eps must be positive";
  return {};
}

std::int64_t ModelConfig::expertParameters() const {
  return 3LL * dModel * expertHidden;
}

std::int64_t ModelConfig::totalParameters() const {
  const std::int64_t d = dModel;
  const std::int64_t perLayer = 2 * d                       // two RMSNorms
                                + 4 * d * d                 // wqkv + wo
                                + nExperts * d              // router
                                + nExperts * expertParameters();
  return 2LL * vocabSize * d + nLayers * perLayer + d;
}

std::int64_t ModelConfig::activeParametersPerToken() const {
  const std::int64_t d = dModel;
  const std::int64_t perLayer = 4 * d * d + nExperts * d + topK * expertParameters();
  return nLayers * perLayer + static_cast<std::int64_t>(vocabSize) * d;  // + lm_head
}

std::string ModelConfig::toJson() const {
  json j = {{"vocab_size", vocabSize}, {"d_model", dModel},       {"n_layers", nLayers},
            {"n_heads", nHeads},       {"n_experts", nExperts},   {"top_k", topK},
            {"expert_hidden", expertHidden}, {"seq_len", seqLen}, {"rope_theta", ropeTheta},
            {"norm_eps", normEps}};
  return j.dump();
}

Expected<ModelConfig> ModelConfig::fromJson(std::string_view text) {
  const json j = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return makeError("model config: not a JSON object");
  ModelConfig c;
  for (const auto& [key, value] : j.items()) {
    auto readInt = [&](int& out) -> bool {
      if (!value.is_number_integer()) return false;
      const auto v = value.get<std::int64_t>();
      if (v < -(1LL << 30) || v > (1LL << 30)) return false;
      out = static_cast<int>(v);
      return true;
    };
    auto readDouble = [&](double& out) -> bool {
      if (!value.is_number()) return false;
      out = value.get<double>();
      return true;
    };
    bool ok = true;
    if (key == "vocab_size") ok = readInt(c.vocabSize);
    else if (key == "d_model") ok = readInt(c.dModel);
    else if (key == "n_layers") ok = readInt(c.nLayers);
    else if (key == "n_heads") ok = readInt(c.nHeads);
    else if (key == "n_experts") ok = readInt(c.nExperts);
    else if (key == "top_k") ok = readInt(c.topK);
    else if (key == "expert_hidden") ok = readInt(c.expertHidden);
    else if (key == "seq_len") ok = readInt(c.seqLen);
    else if (key == "rope_theta") ok = readDouble(c.ropeTheta);
    else if (key == "norm_eps") ok = readDouble(c.normEps);
    else return makeError("model config: unknown key \"" + key + "\"");
    if (!ok) return makeError("model config: bad value for \"" + key + "\": " + value.dump());
  }
  if (auto problem = c.validate(); !problem.empty()) return makeError("model config: " + problem);
  return c;
}

bool ModelConfig::operator==(const ModelConfig& o) const {
  return vocabSize == o.vocabSize && dModel == o.dModel && nLayers == o.nLayers &&
         nHeads == o.nHeads && nExperts == o.nExperts && topK == o.topK &&
         expertHidden == o.expertHidden && seqLen == o.seqLen && ropeTheta == o.ropeTheta &&
         normEps == o.normEps;
}

}  // namespace es::model
