#include "core/model/model_config.h"

#include "core/common/json_depth.h"

#include <nlohmann/json.hpp>

namespace es::model {
namespace {

using nlohmann::json;

}  // namespace

// Upper bounds too: the shape comes from a run manifest, possibly a stranger's, and each of these
// multiplies into the memory every peer allocates (see the parameter cap below).
std::string ModelConfig::validate() const {
  auto within = [](const char* field, int v, int hi) -> std::string {
    if (v >= 1 && v <= hi) return {};
    return std::string(field) + " must be in [1, " + std::to_string(hi) + "], got " + std::to_string(v);
  };
  for (const auto& problem :
       {within("vocab_size", vocabSize, 65536), within("d_model", dModel, 8192), within("n_layers", nLayers, 256),
        within("n_heads", nHeads, 128), within("n_experts", nExperts, 1024),
        within("expert_hidden", expertHidden, 65536), within("seq_len", seqLen, 8192)})
    if (!problem.empty()) return problem;
  if (dModel % nHeads != 0) return "d_model must be divisible by n_heads";
  if (headDim() % 2 != 0) return "d_model / n_heads must be even (RoPE rotates pairs)";
  if (topK < 1 || topK > nExperts) return "top_k must be in [1, n_experts]";
  if (!(ropeTheta > 0 && ropeTheta <= 1e9)) return "rope_theta must be in (0, 1e9]";
  if (!(normEps > 0 && normEps <= 0.1)) return "norm_eps must be in (0, 0.1]";
  // 2^33 parameters = 32 GiB of float32 weights, held four times by a swarm peer.
  if (totalParameters() > (std::int64_t(1) << 33))
    return "the model has " + std::to_string(totalParameters()) + " parameters, more than 2^33";
  return {};
}

std::int64_t ModelConfig::expertParameters() const { return 3LL * dModel * expertHidden; }

std::int64_t ModelConfig::totalParameters() const {
  const std::int64_t d = dModel;
  const std::int64_t perLayer = 2 * d           // two RMSNorms
                                + 4 * d * d     // wqkv + wo
                                + nExperts * d  // router
                                + nExperts * expertParameters();
  return 2LL * vocabSize * d + nLayers * perLayer + d;
}

std::int64_t ModelConfig::activeParametersPerToken() const {
  const std::int64_t d = dModel;
  const std::int64_t perLayer = 4 * d * d + nExperts * d + topK * expertParameters();
  return nLayers * perLayer + static_cast<std::int64_t>(vocabSize) * d;  // + lm_head
}

std::string ModelConfig::toJson() const {
  json j = {{"vocab_size", vocabSize}, {"d_model", dModel},  {"n_layers", nLayers},           {"n_heads", nHeads},
            {"n_experts", nExperts},   {"top_k", topK},      {"expert_hidden", expertHidden}, {"seq_len", seqLen},
            {"rope_theta", ropeTheta}, {"norm_eps", normEps}};
  return j.dump();
}

Expected<ModelConfig> ModelConfig::fromJson(std::string_view text) {
  // A config is one flat object, but it also arrives inside a snapshot's metadata from a
  // stranger: refuse deep nesting before the value.dump() below can recurse on it (json_depth.h).
  if (jsonNestingDepth(text) > 8) return makeError("model config: nests deeper than 8 levels");
  const json j = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return makeError("model config: not a JSON object");
  ModelConfig c;
  for (const auto& item : j.items()) {
    // Not a structured binding: clang (the fuzz build) cannot capture one in the lambdas below.
    const std::string& key = item.key();
    const json& value = item.value();
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
    if (key == "vocab_size")
      ok = readInt(c.vocabSize);
    else if (key == "d_model")
      ok = readInt(c.dModel);
    else if (key == "n_layers")
      ok = readInt(c.nLayers);
    else if (key == "n_heads")
      ok = readInt(c.nHeads);
    else if (key == "n_experts")
      ok = readInt(c.nExperts);
    else if (key == "top_k")
      ok = readInt(c.topK);
    else if (key == "expert_hidden")
      ok = readInt(c.expertHidden);
    else if (key == "seq_len")
      ok = readInt(c.seqLen);
    else if (key == "rope_theta")
      ok = readDouble(c.ropeTheta);
    else if (key == "norm_eps")
      ok = readDouble(c.normEps);
    else
      return makeError("model config: unknown key \"" + key + "\"");
    if (!ok) return makeError("model config: bad value for \"" + key + "\": " + value.dump());
  }
  if (auto problem = c.validate(); !problem.empty()) return makeError("model config: " + problem);
  return c;
}

bool ModelConfig::operator==(const ModelConfig& o) const {
  return vocabSize == o.vocabSize && dModel == o.dModel && nLayers == o.nLayers && nHeads == o.nHeads &&
         nExperts == o.nExperts && topK == o.topK && expertHidden == o.expertHidden && seqLen == o.seqLen &&
         ropeTheta == o.ropeTheta && normEps == o.normEps;
}

}  // namespace es::model
