#include "core/sync/contribution_codec.h"

#include "core/common/safe_quote.h"
#include "core/sync/sparse_codec.h"

#include <torch/torch.h>

namespace es::sync {
namespace {

const std::string kShapeSuffix = ".__shape";
constexpr std::int64_t kMaxDims = 8;

bool isShapeName(const std::string& name) {
  return name.size() > kShapeSuffix.size() &&
         name.compare(name.size() - kShapeSuffix.size(), kShapeSuffix.size(), kShapeSuffix) == 0;
}

// One "<name>.__shape" tensor read strictly, its element count bounded before it is multiplied.
Expected<std::vector<std::int64_t>> shapeOf(const std::string& name, const at::Tensor& t) {
  if (t.scalar_type() != at::kLong || t.dim() != 1 || t.size(0) > kMaxDims)
    return makeError("tensor " + safeQuote(name) + " must be int64 [at most " + std::to_string(kMaxDims) + "]");
  const at::Tensor c = t.contiguous();
  const auto* p = c.data_ptr<std::int64_t>();
  std::vector<std::int64_t> shape(p, p + c.numel());
  std::int64_t elements = 1;
  for (const auto d : shape) {
    if (d < 0 || d > kMaxSparseDecodedElements) return makeError("tensor " + safeQuote(name) + " has a bad size");
    elements *= d;
    if (elements > kMaxSparseDecodedElements) return makeError("tensor " + safeQuote(name) + " is too large");
  }
  return shape;
}

// The shapes a sparse file declares, held to `expected` or to the total bound; `rest` gets the
// other tensors.
Expected<TensorShapes> declaredShapes(const ckpt::NamedTensors& encoded, const TensorShapes* expected,
                                      ckpt::NamedTensors& rest) {
  TensorShapes shapes;
  std::int64_t total = 0;
  for (const auto& [name, t] : encoded) {
    if (!isShapeName(name)) {
      rest.emplace_back(name, t);
      continue;
    }
    auto shape = shapeOf(name, t);
    if (!shape) return makeError(shape.error());
    const std::string delta = name.substr(0, name.size() - kShapeSuffix.size());
    if (expected) {
      const auto it = expected->find(delta);
      if (it == expected->end()) return makeError("tensor " + safeQuote(delta) + " is not one of the model's");
      if (it->second != *shape) return makeError("tensor " + safeQuote(delta) + " has another shape than the model's");
    }
    std::int64_t n = 1;
    for (const auto d : *shape) n *= d;
    total += n;
    if (!expected && total > kMaxSparseDecodedElements)
      return makeError("the contribution decodes to over " + std::to_string(kMaxSparseDecodedElements) + " elements");
    if (!shapes.emplace(delta, std::move(*shape)).second) return makeError("duplicate tensor " + safeQuote(name));
  }
  return shapes;
}

}  // namespace

Expected<ContributionCodec> parseContributionCodec(const std::string& name) {
  if (const auto spec = parseSparseCodec(name)) return ContributionCodec{std::nullopt, *spec};
  auto dense = parseCodec(name);
  if (!dense)
    return makeError("unknown codec " + safeQuote(name) + " (expected f32, bf16, int8 or sparse/<keep>/<chunk>)");
  return ContributionCodec{*dense, {}};
}

ckpt::NamedTensors encodeContribution(const ckpt::NamedTensors& deltas, const ContributionCodec& codec) {
  if (!codec.isSparse()) return encodeDeltas(deltas, *codec.dense);
  auto out = encodeSparse(deltas, codec.sparse);
  for (const auto& [name, delta] : deltas)
    out.emplace_back(name + kShapeSuffix, torch::tensor(delta.sizes().vec(), torch::kLong));
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  return out;
}

Expected<ckpt::NamedTensors> decodeContribution(const ckpt::NamedTensors& encoded, const ContributionCodec& codec,
                                                const TensorShapes* expected) {
  if (!codec.isSparse()) return decodeDeltas(encoded, *codec.dense);
  ckpt::NamedTensors rest;
  auto shapes = declaredShapes(encoded, expected, rest);
  if (!shapes) return makeError(shapes.error());
  return decodeSparse(rest, codec.sparse, *shapes);
}

}  // namespace es::sync
