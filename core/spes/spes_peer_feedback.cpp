// SpesPeer's error feedback in a sparse run (issue 39; sync/sparse_codec.h): the residual goes
// into each contribution, what the file does not carry stays for the next, and the residual is
// training state (persisted and restored with the round folder).
#include "core/spes/spes_peer_impl.h"

#include "core/sync/contribution_codec.h"
#include "core/sync/update_ceiling.h"

#include <torch/torch.h>

#include <algorithm>

namespace es::node {

const char* const peer_detail::kFeedbackFile = "feedback.safetensors";

// The sparse ceiling of `round` (sparse_layout.h, sparseWaitRounds): each sent value is held
// under it, as validation will hold it (its 1/128 of slack is left to int8 rounding: the
// largest kept value is exact, the others round to at most it).
Expected<SpesPeer::Impl::SparseSend> SpesPeer::Impl::feedBack(std::int64_t round, const NamedTensors& deltas,
                                                              bool rewrite) {
  if (rewrite)
    feedback->setResidual(beforePending);
  else
    beforePending = feedback->residual();
  const std::int64_t waited = sync::sparseWaitRounds(*sparse);
  const auto ceiling = sync::updateCeiling(
      config.trainer.train, std::max<std::int64_t>(0, (round - waited) * config.syncEvery), round * config.syncEvery);
  std::map<std::string, const at::Tensor*> baseOf;
  for (const auto& [name, t] : base) baseOf.emplace(name, &t);
  const auto corrected = feedback->corrected(deltas);
  SparseSend out;
  for (const auto& [name, t] : corrected) {
    const double most = ceiling.perElement(baseOf.at(name)->abs().max().item<double>()) / (1.0 + 1.0 / 128.0);
    out.held.emplace_back(name, t.clamp(-most, most));
  }
  const sync::ContributionCodec codec{std::nullopt, *sparse};
  out.encoded = sync::encodeContribution(out.held, codec);
  auto sent = sync::decodeContribution(out.encoded, codec);
  if (!sent) return makeError("the sparse contribution of round " + std::to_string(round) + ": " + sent.error());
  feedback->keepUnsent(corrected, *sent);
  return out;
}

// Float32, finite, each a trainable tensor of the base's shape; absent file: no residual yet.
Expected<std::map<std::string, at::Tensor>> SpesPeer::Impl::readFeedback(const std::string& dir) const {
  std::map<std::string, at::Tensor> residual;
  const std::string path = dir + "/" + peer_detail::kFeedbackFile;
  if (!feedback || !std::filesystem::exists(path)) return residual;
  auto file = ckpt::loadSafetensors(path);
  if (!file) return makeError(file.error());
  std::map<std::string, const at::Tensor*> baseOf;
  for (const auto& [name, t] : base) baseOf.emplace(name, &t);
  for (const auto& [name, t] : file->tensors) {
    const auto b = baseOf.find(name);
    if (b == baseOf.end() || t.scalar_type() != at::kFloat || t.sizes() != b->second->sizes() ||
        !at::isfinite(t).all().item<bool>())
      return makeError("its error feedback \"" + name + "\" is not finite float32 of a model tensor's shape");
    residual.emplace(name, t);
  }
  return residual;
}

Status SpesPeer::Impl::saveFeedback(const std::string& dir, std::int64_t round,
                                    const std::map<std::string, at::Tensor>& residual) {
  if (residual.empty()) return {};
  NamedTensors tensors(residual.begin(), residual.end());
  return ckpt::saveSafetensors(dir + "/" + peer_detail::kFeedbackFile, tensors, {{"round", std::to_string(round)}});
}

}  // namespace es::node
