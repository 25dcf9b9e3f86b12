#include "core/sync/fetch_size.h"

#include "core/model/tensor_names.h"
#include "core/sync/contribution_file.h"
#include "core/sync/shard_figures_file.h"
#include "core/sync/shard_file.h"
#include "core/sync/sparse_layout.h"
#include "core/sync/work_ledger.h"

#include <algorithm>

namespace es::sync {
namespace {

using ckpt::DType;
using ckpt::TensorInfo;

std::int64_t numel(const TensorInfo& t) {
  std::int64_t n = 1;
  for (const auto d : t.shape) n *= d;
  return n;
}

void sortByName(std::vector<TensorInfo>& tensors) {
  std::sort(tensors.begin(), tensors.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
}

// The header (length prefix, JSON, padding) plus the data section, as saveSafetensors writes it.
std::int64_t fileBytes(std::vector<TensorInfo> tensors, const ckpt::Metadata& metadata) {
  sortByName(tensors);
  const auto header = ckpt::buildHeader(tensors, metadata);
  const std::uint64_t data = tensors.empty() ? 0 : tensors.back().end;
  return static_cast<std::int64_t>(header.size() + data);
}

// delta_codec.h: f32 and bf16 keep the names and shapes; int8 adds "<name>.__scale", float32, one
// value per row of the tensor viewed as [rows, last dim]. A sparse codec: sparse_layout.h.
std::vector<TensorInfo> encoded(const std::vector<TensorInfo>& tensors, const std::string& codec) {
  std::vector<TensorInfo> out;
  const auto sparse = parseSparseCodec(codec);
  for (auto t : tensors) {
    if (sparse) {
      for (auto& part : sparseTensors(t.name, t.shape, *sparse)) out.push_back(std::move(part));
      continue;
    }
    if (codec == "bf16") t.dtype = DType::BF16;
    if (codec == "int8") {
      t.dtype = DType::I8;
      std::int64_t rows = 1;
      for (std::size_t d = 0; d + 1 < t.shape.size(); ++d) rows *= t.shape[d];
      out.push_back({t.name + ".__scale", DType::F32, {rows}, 0, 0});
    }
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace

std::vector<TensorInfo> modelTensors(const model::ModelConfig& c) {
  const std::int64_t d = c.dModel, v = c.vocabSize, h = c.expertHidden;
  std::vector<TensorInfo> out{{"tok_emb.weight", DType::F32, {v, d}, 0, 0},
                              {"norm.weight", DType::F32, {d}, 0, 0},
                              {"lm_head.weight", DType::F32, {v, d}, 0, 0}};
  for (int l = 0; l < c.nLayers; ++l) {
    const std::string p = "layers." + std::to_string(l) + ".";
    out.push_back({p + "attn_norm.weight", DType::F32, {d}, 0, 0});
    out.push_back({p + "attn.wqkv.weight", DType::F32, {3 * d, d}, 0, 0});
    out.push_back({p + "attn.wo.weight", DType::F32, {d, d}, 0, 0});
    out.push_back({p + "ffn_norm.weight", DType::F32, {d}, 0, 0});
    out.push_back({p + "moe.router.weight", DType::F32, {c.nExperts, d}, 0, 0});
    for (int e = 0; e < c.nExperts; ++e) {
      out.push_back({model::expertTensorName(l, e, "w1"), DType::F32, {h, d}, 0, 0});
      out.push_back({model::expertTensorName(l, e, "w3"), DType::F32, {h, d}, 0, 0});
      out.push_back({model::expertTensorName(l, e, "w2"), DType::F32, {d, h}, 0, 0});
    }
  }
  sortByName(out);
  return out;
}

std::int64_t contributionBytes(const model::ModelConfig& config, const std::set<int>& claims,
                               const ContributionHeader& header) {
  std::vector<TensorInfo> trained;
  for (auto& t : modelTensors(config)) {
    const auto expert = model::expertOf(t.name);
    if (!expert || claims.empty() || claims.count(expert->expert)) trained.push_back(std::move(t));
  }
  // contribution_file.cpp's metadata, field for field.
  const ckpt::Metadata metadata = {{"format", "expertswarm-contribution"},
                                   {"version", "1"},
                                   {"run", header.run},
                                   {"round", std::to_string(header.round)},
                                   {"sender", header.sender},
                                   {"base_hash", header.baseHash},
                                   {"codec", header.codec}};
  return fileBytes(encoded(trained, header.codec), metadata);
}

std::vector<std::int64_t> contributionSizes(const model::ModelConfig& config, const std::set<int>& claims,
                                            const ContributionHeader& header) {
  std::vector<std::int64_t> sizes;
  for (const char* codec : {"f32", "bf16", "int8"}) {
    auto h = header;
    h.codec = codec;
    sizes.push_back(contributionBytes(config, claims, h));
  }
  if (parseSparseCodec(header.codec)) sizes.push_back(contributionBytes(config, claims, header));
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  return sizes;
}

std::int64_t snapshotBytes(const model::ModelConfig& config, const std::string& run, std::int64_t round,
                           const OuterRule& outer, std::int64_t ledgerBytes) {
  auto tensors = modelTensors(config);
  const std::size_t weights = tensors.size();
  for (std::size_t i = 0; i < weights; ++i)
    if (takesOuterStep(outer, tensors[i].name))
      tensors.push_back({kMomentumPrefix + tensors[i].name, DType::F32, tensors[i].shape, 0, 0});
  if (ledgerBytes > 0) tensors.push_back({kWorkLedgerTensor, DType::U8, {ledgerBytes}, 0, 0});
  return fileBytes(tensors, {{"format", "expertswarm-snapshot"}, {"round", std::to_string(round)}, {"run", run}});
}

std::int64_t shardFileBytes(const Shard& shard, const std::string& codec, const ckpt::Metadata& metadata) {
  std::vector<TensorInfo> pieces;
  for (const auto& p : shard.pieces)
    pieces.push_back(
        {p.tensor + "@" + std::to_string(p.rowBegin), DType::F32, {p.rowEnd - p.rowBegin, p.columns}, 0, 0});
  return fileBytes(encoded(pieces, codec), metadata);
}

std::vector<std::pair<std::string, std::int64_t>> contributionFolderFiles(const std::vector<Shard>& plan,
                                                                          const std::set<int>& claims,
                                                                          const ContributionHeader& header) {
  const auto metadata = contributionMetadata(header, kShardFormat);
  if (!metadata) return {};
  std::vector<std::pair<std::string, std::int64_t>> files;
  std::vector<ShardFigure> figures;  // every figure's text has one length: 16 hex digits
  for (const auto& shard : plan) {
    if (!carriesShard(shard, claims)) continue;
    auto meta = *metadata;
    meta["shard"] = shard.id;
    files.emplace_back(shardFileName(shard), shardFileBytes(shard, header.codec, meta));
    figures.push_back({shard.id, 0.0, shard.elements(), shard.expert});
  }
  files.emplace_back(kFiguresFileName, fileBytes({}, *figuresMetadata(header, figures)));
  std::sort(files.begin(), files.end());
  return files;
}

std::int64_t defaultDiskQuotaBytes(const model::ModelConfig& config) {
  std::int64_t modelBytes = 0;
  for (const auto& t : modelTensors(config)) modelBytes += numel(t) * 4;
  const ContributionHeader widest{std::string(64, 'r'), 1'000'000, std::string(64, 's'), std::string(64, 'b'), "f32"};
  return 3 * 32 * contributionBytes(config, {}, widest) + 16 * modelBytes;
}

}  // namespace es::sync
