// What the merged model writes, for the donors (issue 17 item 4): on eval rounds the peer continues
// the run's fixed prompt greedily with the merged state, so every peer that merged the same state
// writes the same text, and the ledger keeps it round by round (the window's Model tab).
// The fixed prompt is the first kSamplePromptTokens tokens of the run's validation text: of the
// run, the same on every peer, and no new run.json key (which would change every run id).
#pragma once

#include "core/model/moe_transformer.h"
#include "core/node/node_reports.h"
#include "core/train/bpe_tokenizer.h"

#include <cstdint>
#include <optional>
#include <vector>

namespace es::node {

constexpr int kSamplePromptTokens = 12;
constexpr int kSampleTokens = 32;

// At most kSamplePromptTokens + kSampleTokens, fewer in a context shorter than that. None when the
// validation text is too short.
std::optional<ModelSample> sampleMergedModel(model::MoeTransformer& model, const std::vector<std::uint16_t>& valTokens,
                                             const train::BpeTokenizer& tokenizer);

}  // namespace es::node
