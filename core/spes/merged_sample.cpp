#include "core/spes/merged_sample.h"

#include "core/infer/generate.h"

#include <algorithm>

namespace es::node {

std::optional<ModelSample> sampleMergedModel(model::MoeTransformer& model, const std::vector<std::uint16_t>& valTokens,
                                             const train::BpeTokenizer& tokenizer) {
  // A small context (tests' tiny models) gets a shorter prompt and sample, never none.
  const int seqLen = model->config().seqLen;
  const int promptTokens = std::min(kSamplePromptTokens, seqLen / 2);
  const int sampleTokens = std::min(kSampleTokens, seqLen - promptTokens);
  if (promptTokens < 1 || valTokens.size() < std::size_t(promptTokens)) return std::nullopt;
  const std::vector<std::int64_t> prompt(valTokens.begin(), valTokens.begin() + promptTokens);
  auto generated = infer::generate(model, prompt, {sampleTokens, /*temperature=*/0.0, /*topK=*/0, /*seed=*/0});
  if (!generated) return std::nullopt;
  try {  // ids come from our own tokenizer's shards and model: decode() throws only on a bug
    return ModelSample{tokenizer.decode({prompt.begin(), prompt.end()}),
                       tokenizer.decode({generated->begin(), generated->end()})};
  } catch (const std::out_of_range&) {
    return std::nullopt;
  }
}

}  // namespace es::node
