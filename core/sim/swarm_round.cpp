#include "core/sim/swarm_round.h"

#include "core/model/tensor_names.h"
#include "core/sync/contribution_file.h"
#include "core/sync/round_merge.h"
#include "core/sync/update_ceiling.h"
#include "core/sync/validate.h"
#include "core/train/trainer_weights.h"

#include <torch/torch.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

namespace es::sim::detail {
namespace {

const char* kRun = "simulated-swarm";

// Deltas of the peer's trainable tensors against the round's base, in the trainer's order.
ckpt::NamedTensors contributionDeltas(const train::Trainer& trainer, const ckpt::NamedTensors& local,
                                      const ckpt::NamedTensors& base) {
  std::map<std::string, std::size_t> index;
  for (std::size_t i = 0; i < local.size(); ++i) index[local[i].first] = i;
  ckpt::NamedTensors deltas;
  for (const auto& name : trainer.trainableTensorNames()) {
    const std::size_t i = index.at(name);
    deltas.emplace_back(name, local[i].second - base[i].second);
  }
  return deltas;
}

ContributionBytes measureBytes(int round, int peer, const ckpt::NamedTensors& deltas, sync::SparseSpec sparse) {
  ContributionBytes b;
  b.round = round;
  b.peer = peer;
  b.f32 = sync::encodedBytes(sync::encodeDeltas(deltas, sync::Codec::F32));
  b.bf16 = sync::encodedBytes(sync::encodeDeltas(deltas, sync::Codec::BF16));
  b.int8 = sync::encodedBytes(sync::encodeDeltas(deltas, sync::Codec::Int8));
  if (sparse.keep > 0 && sparse.valueBits == 8) b.sparse = sync::encodedBytes(sync::encodeSparse(deltas, sparse));
  // Packed (values at their bits, Rice-coded index gaps): what a wire format would take.
  if (sparse.keep > 0 && sparse.valueBits < 8)
    b.sparse = sync::sparseWireBytes(sync::encodeSparse(deltas, sparse), sparse);
  // SPES's peers upload the full f32 weights of what they trained: same tensors, 4 bytes each.
  for (const auto& [name, t] : deltas) b.spesReference += t.numel() * 4;
  return b;
}

// A sparse run's wait rounds: the client's rule (sync::sparseWaitRounds) unless the experiment
// names its own.
int waitRounds(const SimConfig& config) {
  return config.sparseWaitRounds > 0 ? config.sparseWaitRounds : sync::sparseWaitRounds(config.sparse);
}

// What a contribution closing at `step` may move a weight: one round's steps, or a sparse run's
// sparseWaitRounds rounds (from step 0 at most).
sync::UpdateCeiling contributionCeiling(const SimConfig& config, std::int64_t step) {
  const std::int64_t rounds = config.sparse.keep > 0 ? waitRounds(config) : 1;
  return sync::updateCeiling(config.train, std::max<std::int64_t>(0, step - rounds * config.syncEvery), step);
}

// Sparse: the peer's delta plus what it did not send before, each weight held to the
// contribution's update ceiling (contributionCeiling: one round's, or sparseWaitRounds rounds').
// What error feedback carries over can add up past what AdamW moves a weight in one round, and
// the receivers' validation would refuse the whole contribution (measured: every contribution of
// round 5 on at keep 64 of 4096). Top-k per chunk; the rest waits in the residual.
Expected<ckpt::NamedTensors> transportSparse(const ckpt::NamedTensors& deltas, const ckpt::NamedTensors& base,
                                             sync::ErrorFeedback& feedback, const SimConfig& config,
                                             std::int64_t step) {
  const auto ceiling = contributionCeiling(config, step);
  std::map<std::string, const at::Tensor*> baseByName;
  for (const auto& [name, t] : base) baseByName.emplace(name, &t);
  const auto corrected = feedback.corrected(deltas);
  ckpt::NamedTensors held;
  std::map<std::string, std::vector<std::int64_t>> shapes;
  for (const auto& [name, t] : corrected) {
    // perElement has 1/128 of slack over the bound; staying under the bound itself leaves it for
    // the int8 rounding of the largest kept value.
    const double most = ceiling.perElement(baseByName.at(name)->abs().max().item<double>()) / (1.0 + 1.0 / 128.0);
    held.emplace_back(name, t.clamp(-most, most));
    shapes[name] = t.sizes().vec();
  }
  auto decoded = sync::decodeSparse(sync::encodeSparse(held, config.sparse), config.sparse, shapes);
  if (!decoded) return decoded;
  feedback.keepUnsent(corrected, *decoded);
  std::map<std::string, at::Tensor> byName(decoded->begin(), decoded->end());
  ckpt::NamedTensors ordered;  // in the trainer's order, as the other codecs deliver them
  for (const auto& [name, t] : deltas) ordered.emplace_back(name, byName.at(name));
  return ordered;
}

// What a receiver gets: the decoded deltas after encoding with the run's codec, optionally
// through a contribution file on disk.
Expected<ckpt::NamedTensors> transport(const ckpt::NamedTensors& deltas, sync::ContributionHeader& header,
                                       const SimConfig& config) {
  if (config.contributionDir.empty()) return sync::decodeDeltas(sync::encodeDeltas(deltas, config.codec), config.codec);
  const std::string path =
      config.contributionDir + "/round-" + std::to_string(header.round) + "-" + header.sender + ".safetensors";
  if (auto saved = sync::saveContribution(path, header, deltas); !saved) return makeError(saved.error());
  auto loaded = sync::loadContribution(path);
  std::remove(path.c_str());  // read once; a long run would otherwise pile up files
  if (!loaded) return makeError(loaded.error());
  header = loaded->header;  // validate what arrived, not what was meant to be sent
  return std::move(loaded->deltas);
}

bool sameWeights(const ckpt::NamedTensors& a, const ckpt::NamedTensors& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (a[i].first != b[i].first || !torch::equal(a[i].second, b[i].second)) return false;
  return true;
}

// Peer p sees the contributions in its own arrival order (rotated by p, reversed for odd p):
// mergeRound promises that the order does not change the result, and the identity check after
// the merge holds it to that.
std::vector<sync::RoundEntry> arrivalOrder(const std::vector<sync::RoundEntry>& entries, std::size_t p) {
  std::vector<sync::RoundEntry> order = entries;
  if (order.empty()) return order;
  std::rotate(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(p % order.size()), order.end());
  if (p % 2 == 1) std::reverse(order.begin(), order.end());
  return order;
}

// Every peer's contribution as it arrives at the others (encoded, decoded), its bytes measured.
Expected<std::vector<sync::RoundEntry>> sendContributions(std::vector<Peer>& peers, const RoundInput& in,
                                                          const sync::RoundContext& context,
                                                          std::vector<ckpt::NamedTensors>& local,
                                                          std::map<std::string, ckpt::NamedTensors>& arrivedDeltas,
                                                          RoundOutcome& out) {
  std::vector<sync::ContributionHeader> headers;
  std::vector<ckpt::NamedTensors> arrivals;
  for (std::size_t p = 0; p < peers.size(); ++p) {
    local.push_back(train::trainerWeights(*peers[p].trainer));
    const auto deltas = contributionDeltas(*peers[p].trainer, local.back(), in.base);
    out.bytes.push_back(measureBytes(in.round, static_cast<int>(p), deltas, in.config.sparse));
    const bool sparse = in.config.sparse.keep > 0;
    sync::ContributionHeader header{
        kRun, in.round, peers[p].id, context.baseHash,
        sparse ? sync::sparseCodecName(in.config.sparse) : sync::codecName(in.config.codec)};
    auto arrived = in.config.sparse.keep > 0 ? transportSparse(deltas, in.base, peers[p].feedback, in.config, in.step)
                                             : transport(deltas, header, in.config);
    if (!arrived) return makeError(peers[p].id + " round " + std::to_string(in.round) + ": " + arrived.error());
    headers.push_back(header);
    arrivals.push_back(std::move(*arrived));
  }
  std::vector<sync::RoundEntry> entries;
  for (std::size_t p = 0; p < peers.size(); ++p) {
    arrivedDeltas.emplace(peers[p].id, arrivals[p]);
    entries.push_back(
        {headers[p], sync::heldDeltas(std::move(arrivals[p])), {peers[p].claims.begin(), peers[p].claims.end()}});
  }
  return entries;
}

}  // namespace

Expected<RoundOutcome> syncRound(std::vector<Peer>& peers, const RoundInput& in, const MergeObserver& observer,
                                 const train::LogFn& log) {
  RoundOutcome out;
  const SimConfig& config = in.config;
  const sync::RoundContext context{kRun, in.round, sync::stateFingerprint(in.base)};

  // 1. Every peer builds, measures and "sends" its contribution.
  std::vector<ckpt::NamedTensors> local;
  std::map<std::string, ckpt::NamedTensors> arrivedDeltas;  // sender → decoded deltas (for the observer)
  auto entries = sendContributions(peers, in, context, local, arrivedDeltas, out);
  if (!entries) return makeError(entries.error());

  // 2. Every peer merges by itself — the client's own round function (sync::mergeRound:
  //    validation, the accepted senders' ownership, aggregate, warm-up), fed in its own arrival
  //    order — and adopts the result (the optimizer moments stay, as in SPES).
  sync::RoundPolicy policy{config.aggregate, std::nullopt, config.outer, {}};
  policy.aggregate.scatterMean = config.sparse.keep > 0 && config.sparseMean;  // the client's rule for a sparse run
  if (config.warmup) policy.warmup = config.warmupConfig;
  policy.validation.ceiling =
      sync::updateCeiling(config.train, std::max<std::int64_t>(0, in.step - config.syncEvery), in.step);
  if (config.sparse.keep > 0) {  // as the client's mergePolicy: the run's rule for its codec (or the experiment's W)
    policy.validation.sparseCeiling = contributionCeiling(config, in.step);
    policy.validation.sparseWaitRounds = sync::sparseWaitRounds(config.sparse);
  }
  ckpt::NamedTensors firstMerged;
  std::vector<sync::Contribution> accepted;
  sync::Ownership owners;
  for (std::size_t p = 0; p < peers.size(); ++p) {
    auto merge = sync::mergeRound(in.base, context, arrivalOrder(*entries, p), policy, in.step, config.model,
                                  peers[p].outerMomentum, peers[p].ledger);
    if (!merge) return makeError(peers[p].id + ": " + merge.error());
    peers[p].outerMomentum = std::move(merge->momentum);
    peers[p].ledger = std::move(merge->ledger);
    if (auto set = train::setTrainerWeights(*peers[p].trainer, merge->merged); !set)
      return makeError(peers[p].id + " adopting the merge: " + set.error());
    if (p != 0) continue;
    for (const auto& v : merge->verdicts) {
      if (!v.accepted) {
        ++out.rejected;
        log(v.sender + " round " + std::to_string(in.round) + " rejected: " + v.reason);
        continue;
      }
      out.lowestAgreement = std::min(out.lowestAgreement, v.agreement);
      if (!v.credited) ++out.uncredited;
    }
    for (const auto& [who, factor] : merge->expertCuts)
      log(who.first + " round " + std::to_string(in.round) + ": expert " + std::to_string(who.second) + " cut to " +
          std::to_string(factor) + " of its move (sync/expert_bound.h)");
    out.alpha = merge->alpha;
    firstMerged = std::move(merge->merged);
    for (const auto& sender : merge->accepted) accepted.push_back({sender, arrivedDeltas.at(sender)});
    owners = std::move(merge->owners);
  }

  // 4. Same inputs → same state: every peer must now hold exactly what peer 0 computed (weights
  //    and the outer rule's momentum).
  for (auto& peer : peers)
    out.identical = out.identical && sameWeights(train::trainerWeights(*peer.trainer), firstMerged) &&
                    sameWeights(peer.outerMomentum, peers.front().outerMomentum) &&  // the outer rule's state too
                    peer.ledger == peers.front().ledger;                             // and what weighs the next
  out.merged = std::move(firstMerged);

  if (observer) {
    std::vector<std::vector<int>> claimLists;
    for (const auto& peer : peers) claimLists.push_back(peer.claims);
    observer(MergeRecord{in.round, in.step, out.alpha, in.base, local, accepted, claimLists, owners, out.merged,
                         peers.front().outerMomentum});
  }
  return out;
}

}  // namespace es::sim::detail
