#include "core/infer/generate.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

namespace es::infer {
namespace {

std::int64_t pick(const torch::Tensor& logits, const SampleOptions& options, at::Generator& generator) {
  auto l = logits.to(torch::kCPU, torch::kDouble);  // [vocab]
  if (options.temperature <= 0) return l.argmax().item<std::int64_t>();
  l = l / options.temperature;
  if (options.topK > 0 && options.topK < l.size(0)) {
    const auto kth = std::get<0>(l.topk(options.topK)).min();
    l = l.masked_fill(l < kth, -INFINITY);
  }
  return torch::multinomial(torch::softmax(l, 0), 1, /*replacement=*/false, generator).item<std::int64_t>();
}

}  // namespace

Expected<std::vector<std::int64_t>> generate(model::MoeTransformer& model, const std::vector<std::int64_t>& prompt,
                                             const SampleOptions& options) {
  const auto& config = model->config();
  if (prompt.empty()) return makeError("the prompt is empty");
  if (options.tokens < 1) return makeError("tokens must be at least 1");
  if (options.temperature < 0) return makeError("temperature must not be negative");
  if (options.topK < 0) return makeError("top-k must not be negative");
  for (const auto id : prompt)
    if (id < 0 || id >= config.vocabSize)
      return makeError("prompt token " + std::to_string(id) + " is not in the vocabulary");
  if (std::int64_t(prompt.size()) + options.tokens > config.seqLen)
    return makeError("the prompt (" + std::to_string(prompt.size()) + " tokens) and " + std::to_string(options.tokens) +
                     " new tokens exceed the model's context of " + std::to_string(config.seqLen) + " tokens");
  torch::NoGradGuard noGrad;
  auto generator = at::make_generator<at::CPUGeneratorImpl>(options.seed);
  model::KvCache cache;
  const auto device = model->parameters().front().device();                  // the trainer's model may be on a GPU
  auto input = torch::tensor(prompt, torch::kLong).unsqueeze(0).to(device);  // [1, T]
  std::vector<std::int64_t> out;
  for (int i = 0; i < options.tokens; ++i) {
    auto logits = model->logitsCached(input, cache);  // [1, T, vocab]
    const auto next = pick(logits[0][logits.size(1) - 1], options, generator);
    out.push_back(next);
    input = torch::full({1, 1}, next, torch::TensorOptions(torch::kLong).device(device));
  }
  return out;
}

Expected<TextLoss> textLoss(model::MoeTransformer& model, const std::vector<std::int64_t>& tokens) {
  if (tokens.size() < 2) return makeError("the text has fewer than 2 tokens");
  torch::NoGradGuard noGrad;
  const std::int64_t window = model->config().seqLen + 1, n = std::int64_t(tokens.size());
  auto all = torch::tensor(tokens, torch::kLong).to(model->parameters().front().device());
  double sum = 0;
  std::int64_t count = 0;
  for (std::int64_t start = 0; start + 1 < n; start += window - 1) {
    const auto piece = all.narrow(0, start, std::min(window, n - start));  // overlaps the next by one
    auto logits = model->forward(piece.narrow(0, 0, piece.size(0) - 1).unsqueeze(0)).logits[0];
    auto targets = piece.narrow(0, 1, piece.size(0) - 1);
    sum += torch::nn::functional::cross_entropy(logits.to(torch::kDouble), targets,
                                                torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum))
               .item<double>();
    count += targets.size(0);
  }
  return TextLoss{count, sum / double(count)};
}

}  // namespace es::infer
