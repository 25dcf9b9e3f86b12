// `expertswarm export`: a Hugging Face model folder from a merged state (issue 17, item 1):
//   config.json, generation_config.json, model.safetensors   (hf_model.h: Mixtral)
//   tokenizer.json, tokenizer_config.json                     (hf_tokenizer.h)
//   README.md                                                 (a model card: run, rounds, tokens, peers, loss)
//   expertswarm.json                                          (where it came from, machine-readable)
// Atomic as a folder: everything is written into "<out>.partial-<pid>" and renamed to <out>; an
// earlier export there (it has expertswarm.json) is replaced only after the new one is complete.
// A folder that is not an export of ours is never touched. No Qt: std::filesystem + POSIX.
#pragma once

#include "core/checkpoint/safetensors.h"
#include "core/common/expected.h"
#include "core/model/model_config.h"
#include "core/train/bpe_tokenizer.h"

#include <cstdint>
#include <optional>
#include <string>

namespace es::hf {

struct ModelCard {
  std::string runId;    // the run's v2 info-hash (hex)
  std::string runName;  // from the run manifest: a stranger's text, quoted safely in the card
  std::int64_t round = 0;
  std::int64_t tokensSeen = 0;           // by the swarm (all peers), 0 when unknown
  int peersContributed = 0;              // distinct peers whose contributions were accepted
  std::optional<double> validationLoss;  // the newest measured, if any
};

struct ExportInput {
  model::ModelConfig config;
  const ckpt::NamedTensors* weights = nullptr;  // our names (tensor_names.h)
  const train::BpeTokenizer* tokenizer = nullptr;
  ModelCard card;
};

Status exportHuggingFace(const ExportInput& input, const std::string& outDir);

// The model card's text (README.md).
std::string modelCardMarkdown(const ModelCard& card, const model::ModelConfig& config);

}  // namespace es::hf
