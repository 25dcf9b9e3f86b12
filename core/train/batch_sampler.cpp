#include "core/train/batch_sampler.h"

#include <torch/torch.h>

#include <stdexcept>

namespace es::train {

std::uint64_t splitMix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

BatchSampler::BatchSampler(TokenBuffer tokens, int seqLen, int batchSize, std::uint64_t seed)
    : tokens_(std::move(tokens)), seqLen_(seqLen), batchSize_(batchSize), seed_(seed) {
  if (!tokens_ || tokens_->size() < static_cast<std::size_t>(seqLen_) + 1)
    throw std::invalid_argument("BatchSampler: fewer tokens than one window");
}

Batch BatchSampler::at(std::uint64_t cursor) const {
  const std::uint64_t span = tokens_->size() - static_cast<std::uint64_t>(seqLen_);  // valid starts
  std::vector<std::int64_t> offsets(static_cast<std::size_t>(batchSize_));
  for (int i = 0; i < batchSize_; ++i) {
    const std::uint64_t key = splitMix64(seed_) ^ (cursor * static_cast<std::uint64_t>(batchSize_) + i);
    offsets[static_cast<std::size_t>(i)] = static_cast<std::int64_t>(splitMix64(key) % span);
  }
  return fromOffsets(offsets);
}

Batch BatchSampler::sequential(int index) const {
  std::vector<std::int64_t> offsets;
  for (int i = 0; i < batchSize_; ++i) {
    const std::int64_t start = (static_cast<std::int64_t>(index) * batchSize_ + i) * seqLen_;
    if (static_cast<std::size_t>(start + seqLen_ + 1) > tokens_->size()) break;
    offsets.push_back(start);
  }
  if (offsets.empty()) return {};
  return fromOffsets(offsets);
}

Batch BatchSampler::fromOffsets(const std::vector<std::int64_t>& offsets) const {
  const auto rows = static_cast<std::int64_t>(offsets.size());
  auto window = torch::empty({rows, seqLen_ + 1}, torch::kLong);  // [B, T+1]
  auto* out = window.data_ptr<std::int64_t>();
  const std::uint16_t* src = tokens_->data();
  for (std::int64_t r = 0; r < rows; ++r)
    for (int t = 0; t <= seqLen_; ++t) out[r * (seqLen_ + 1) + t] = src[offsets[static_cast<std::size_t>(r)] + t];
  return {window.narrow(1, 0, seqLen_).contiguous(), window.narrow(1, 1, seqLen_).contiguous()};
}

}  // namespace es::train
