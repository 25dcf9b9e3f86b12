#include "core/spes/spes_peer.h"
#include "core/spes/spes_peer_impl.h"

#include "core/checkpoint/round_dirs.h"
#include "core/checkpoint/safetensors.h"
#include "core/checkpoint/training_state.h"
#include "core/common/atomic_file.h"
#include "core/model/tensor_names.h"
#include "core/spes/merged_sample.h"
#include "core/sync/contribution_file.h"
#include "core/sync/merge.h"
#include "core/sync/outer_step.h"
#include "core/sync/round_merge.h"
#include "core/sync/update_ceiling.h"
#include "core/sync/validate.h"
#include "core/train/trainer_impl.h"
#include "core/train/trainer_weights.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <random>
#include <thread>

namespace es::node {
namespace peer_detail {

namespace fs = std::filesystem;
using ckpt::NamedTensors;

const char* const kStateFile = "training-state.safetensors";
const char* const kBaseFile = "base.safetensors";

// `tensors` in the order of `order` (the trainer's parameter order); error if a name is missing.
Expected<NamedTensors> inOrder(const NamedTensors& order, const ckpt::SafetensorsFile& file) {
  NamedTensors out;
  for (const auto& [name, t] : order) {
    auto found = file.find(name);
    if (!found.defined()) return makeError("base state lacks \"" + name + "\"");
    out.emplace_back(name, found);
  }
  return out;
}

// Why a snapshot's tensor cannot be our state: not float32, another shape than ours, or a value
// that is not finite ("" when every tensor fits). `ordered` is in `base`'s order (inOrder).
std::string unfitSnapshotTensor(const NamedTensors& base, const NamedTensors& ordered) {
  for (std::size_t i = 0; i < base.size(); ++i) {
    const auto& [name, t] = ordered[i];
    if (t.scalar_type() != at::kFloat) return "tensor \"" + name + "\" is not float32";
    if (t.sizes() != base[i].second.sizes()) return "tensor \"" + name + "\" has another shape than the run's";
    if (!at::isfinite(t).all().item<bool>()) return "tensor \"" + name + "\" holds a value that is not finite";
  }
  return {};
}

NamedTensors sharedOnly(const NamedTensors& tensors) {
  NamedTensors out;
  for (const auto& [name, t] : tensors)
    if (model::isSharedTensor(name)) out.emplace_back(name, t);
  return out;
}

// Test-only (SpesPeerConfig::testPoison): the three attacks validation must stop, "zero", and "reverse":
// the shared update turned around and scaled by 10 — at the norm bound, where validation may let it
// through and the robust aggregate must keep it from steering the shared weights. ("stale", a
// random base in the header, is staleBaseHash below.)
void poison(NamedTensors& deltas, const std::string& kind, const train::TrainerOptions& options,
            const NamedTensors& weights, const sync::UpdateCeiling& ceiling) {
  if (kind == "nan") {
    deltas.front().second.view(-1)[0] = std::numeric_limits<float>::quiet_NaN();
  } else if (kind == "norm") {
    for (auto& [name, t] : deltas) t = t * 1e6 + 1e-3;
  } else if (kind == "zero") {  // no work at all (issue 37 item 1): refused, not merged, not banned
    for (auto& [name, t] : deltas) t = torch::zeros_like(t);
  } else if (kind == "expert") {  // every expert weight moved 0.8 × the ceiling, its own way (issue 37 item 4)
    std::map<std::string, const at::Tensor*> byName;
    for (const auto& [n, w] : weights) byName[n] = &w;
    for (auto& [name, t] : deltas)
      if (!model::isSharedTensor(name))
        t = torch::sign(t) * (0.8 * ceiling.perElement(byName.at(name)->abs().max().item<double>()));
  } else if (kind == "reverse") {
    for (auto& [name, t] : deltas)
      if (model::isSharedTensor(name)) t = t * -10.0;
  } else if (kind == "foreign") {
    const auto& mine = options.localExperts;
    for (int e = 0; e < options.model.nExperts; ++e) {
      if (std::find(mine.begin(), mine.end(), e) != mine.end()) continue;
      const auto name = model::expertTensorName(0, e, "w1");
      for (const auto& [n, t] : weights)
        if (n == name) deltas.emplace_back(name, torch::full_like(t, 1e-3));
      return;
    }
  }
}

// Test-only, "stale": the contribution names a random base of the real one's length (so its size is
// the one predicted): honest peers cannot tell it from a peer that merged another set, so they skip
// it as stale — never a ban — and stop waiting for it after kStaleRounds (issue 15, item 1).
std::string staleBaseHash(const std::string& real) {
  static std::mt19937_64 random{std::random_device{}()};
  std::string fake = real;
  for (char& c : fake) c = "0123456789abcdef"[random() % 16];
  return fake;
}

// The merge's shared rule; create() has refused anything parseSharedRule does not know.
// A sparse run averages each shared element over its senders (sync::AggregatePolicy::scatterMean).
sync::AggregatePolicy aggregatePolicy(const SpesPeerConfig& config) {
  sync::AggregatePolicy policy{sync::parseSharedRule(config.aggregate).value_or(sync::SharedRule::Mean),
                               config.clipIterations, config.clipTauFactor};
  policy.scatterMean = sync::parseSparseCodec(config.codec).has_value();
  return policy;
}

// Reads the round's contribution files. One that cannot be read, or that names another sender
// than the peer that announced it, gets its verdict here; the rest go to the round's merge.
std::vector<sync::RoundEntry> readEntries(const std::vector<IncomingContribution>& incoming, const NamedTensors& base,
                                          std::vector<ContributionVerdict>& verdicts,
                                          std::map<std::string, std::int64_t>& bytesOf) {
  // The model's shapes: a sparse file's declared ones must be these before it is decoded.
  auto shapes = std::make_shared<sync::TensorShapes>();
  for (const auto& [name, t] : base) (*shapes)[name] = t.sizes().vec();
  std::vector<sync::RoundEntry> entries;
  for (const auto& c : incoming) {
    ContributionVerdict v;
    v.sender = c.sender;
    std::error_code ec;
    v.bytes = static_cast<std::int64_t>(fs::file_size(c.path, ec));
    // A file that is not there (removed under its transfer) says nothing of its sender: lost, and
    // nobody is banned for it (the fetched snapshot that was gone at afd6a98 got five honest peers
    // banned). Bytes that are there and wrong are the sender's.
    if (ec || !std::ifstream(c.path, std::ios::binary)) {
      v.lost = true;
      v.reason = "its file could not be read here: " + (ec ? ec.message() : std::string("cannot open"));
      verdicts.push_back(std::move(v));
      continue;
    }
    // The header now; the deltas when the merge's passes read them, one file at a time.
    auto header = sync::readContributionHeader(c.path);
    if (!header) {
      v.lost = header.failure().local;  // EMFILE, EIO: this machine's failure (issue 37 item 8)
      v.reason = (v.lost ? "its file could not be read here: " : "unreadable: ") + header.error();
    } else if (header->sender != c.sender.str())
      v.reason = "file names sender \"" + header->sender + "\"";
    if (!v.reason.empty()) {
      verdicts.push_back(std::move(v));
      continue;
    }
    bytesOf[c.sender.str()] = v.bytes;
    auto deltas = sync::contributionDeltas(c.path, *header, shapes);
    entries.push_back({std::move(*header), std::move(deltas), c.claims});
  }
  return entries;
}

sync::RoundPolicy roundPolicy(const SpesPeerConfig& config) {
  sync::RoundPolicy policy{aggregatePolicy(config), std::nullopt, config.outer, {}};
  if (config.warmupAlpha0 > 0)
    policy.warmup =
        sync::WarmupConfig{config.warmupInterval, config.warmupAlpha0, config.warmupDecaySteps, config.warmupTopk};
  return policy;
}

sync::RoundPolicy mergePolicy(const SpesPeerConfig& config, std::int64_t round) {
  auto policy = roundPolicy(config);
  policy.validation.ceiling =
      sync::updateCeiling(config.trainer.train, (round - 1) * config.syncEvery, round * config.syncEvery);
  if (const auto sparse = sync::parseSparseCodec(config.codec)) {  // what the senders' feedback held back
    policy.validation.sparseWaitRounds = sync::sparseWaitRounds(*sparse);
    policy.validation.sparseCeiling =
        sync::updateCeiling(config.trainer.train,
                            std::max<std::int64_t>(0, (round - policy.validation.sparseWaitRounds) * config.syncEvery),
                            round * config.syncEvery);
  }
  return policy;
}

Expected<NamedTensors> momentumIn(const ckpt::SafetensorsFile& file, const NamedTensors& base,
                                  const sync::OuterRule& rule, std::int64_t round) {
  if (rule.plain() || round < 1) return NamedTensors{};
  const auto expected = sync::zeroMomentum(base, rule);  // the names and shapes it must have
  NamedTensors out;
  for (const auto& [name, zeros] : expected) {
    auto t = file.find(name);
    if (!t.defined()) return makeError("the state lacks the outer step's momentum \"" + name + "\"");
    if (t.scalar_type() != at::kFloat || t.sizes() != zeros.sizes() || !at::isfinite(t).all().item<bool>())
      return makeError("the outer step's momentum \"" + name + "\" is not finite float32 of the run's shape");
    out.emplace_back(name, t);
  }
  return out;
}

}  // namespace peer_detail

using namespace peer_detail;
namespace fs = std::filesystem;

SpesPeer::SpesPeer() : impl_(std::make_unique<Impl>()) {}
SpesPeer::~SpesPeer() = default;

Expected<std::unique_ptr<SpesPeer>> SpesPeer::create(const SpesPeerConfig& config,
                                                     std::shared_ptr<const std::vector<std::uint16_t>> train,
                                                     std::shared_ptr<const std::vector<std::uint16_t>> val) {
  if (config.syncEvery < 1) return makeError("sync_every must be positive");
  auto codec = sync::parseContributionCodec(config.codec);
  if (!codec) return makeError(codec.error());
  if (!(config.feedbackDecay >= 0.5 && config.feedbackDecay <= 1.0))
    return makeError("the error feedback's decay must be in [0.5, 1]");
  if (!sync::parseSharedRule(config.aggregate))
    return makeError("unknown aggregate \"" + config.aggregate + "\": must be \"mean\" or \"centered_clip\"");
  if (config.clipIterations < 1 || !(config.clipTauFactor > 0.0) || !std::isfinite(config.clipTauFactor))
    return makeError("centered clipping needs clip_iterations >= 1 and clip_tau_factor > 0");
  if (!(config.outer.lr > 0.0 && config.outer.lr <= 2.0) ||
      !(config.outer.momentum >= 0.0 && config.outer.momentum < 1.0))
    return makeError("the outer step needs 0 < lr <= 2 and 0 <= momentum < 1");
  auto trainer = train::Trainer::create(config.trainer, train, val);
  if (!trainer) return makeError(trainer.error());
  std::unique_ptr<SpesPeer> peer(new SpesPeer());
  auto& d = *peer->impl_;
  d.config = config;
  d.trainer = std::move(*trainer);
  d.trainTokens = train;
  d.valTokens = val;
  d.base = train::trainerWeights(*d.trainer);  // every peer starts from the same seeded weights
  if (codec->isSparse()) {
    d.sparse = codec->sparse;
    d.feedback.emplace(config.feedbackDecay);
  }
  if (auto s = d.load(); !s) return makeError(s.error());
  return peer;
}

train::StepStats SpesPeer::step() { return impl_->trainer->trainStep(); }
double SpesPeer::evaluate() { return impl_->trainer->evaluate(); }
std::int64_t SpesPeer::stepCount() const { return impl_->trainer->step(); }
std::int64_t SpesPeer::mergedRound() const { return impl_->baseRound; }
bool SpesPeer::resumed() const { return impl_->resumed; }
std::string SpesPeer::resumeNote() const { return impl_->resumeNote; }
std::string SpesPeer::baseSharedFingerprint() const { return sync::stateFingerprint(sharedOnly(impl_->base)); }
std::string SpesPeer::baseFingerprint() const { return impl_->fingerprint(); }

Expected<ContributionWritten> SpesPeer::writeContribution(std::int64_t round, const std::string& path) {
  impl_->snapshot = train::trainerWeights(*impl_->trainer);
  return impl_->writePending(round, path);
}

NamedTensors SpesPeer::Impl::pendingDeltas() const {
  std::map<std::string, std::size_t> index;
  for (std::size_t i = 0; i < snapshot.size(); ++i) index[snapshot[i].first] = i;
  NamedTensors deltas;
  for (const auto& name : trainer->trainableTensorNames()) {
    const auto i = index.at(name);
    deltas.emplace_back(name, snapshot[i].second - base[i].second);
  }
  return deltas;
}

Expected<ContributionWritten> SpesPeer::Impl::writePending(std::int64_t round, const std::string& path, bool rewrite) {
  NamedTensors deltas = pendingDeltas();
  std::optional<SparseSend> sparseSend;
  if (feedback) {
    auto sent = feedBack(round, deltas, rewrite);
    if (!sent) return makeError(sent.error());
    deltas = sent->held;
    sparseSend = std::move(*sent);
  }
  if (!config.testPoison.empty())
    poison(deltas, config.testPoison, config.trainer, base,
           sync::updateCeiling(config.trainer.train, (round - 1) * config.syncEvery, round * config.syncEvery));
  ContributionWritten out;
  out.round = round;
  out.path = path;
  out.baseHash = fingerprint();
  // The honest int8 encoder turns a non-finite value into 0; a liar would not use it, so the NaN
  // test poison goes out as f32 (any codec is accepted and validated after decoding).
  const std::string codec = config.testPoison == "nan" ? "f32" : config.codec;
  const std::string named = config.testPoison == "stale" ? staleBaseHash(out.baseHash) : out.baseHash;
  const sync::ContributionHeader header{config.runId, round, config.selfId, named, codec};
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  // A sparse file is the one feedBack encoded (its residual is what that file does not carry),
  // unless a test poison changed the deltas since.
  const auto saved = sparseSend && config.testPoison.empty()
                         ? sync::saveEncodedContribution(path, header, sparseSend->encoded)
                         : sync::saveContribution(path, header, deltas);
  if (!saved) return makeError(saved.error());
  out.bytes = static_cast<std::int64_t>(fs::file_size(path, ec));
  return out;
}

bool SpesPeer::isEvalRound(std::int64_t round, std::int64_t syncEvery, std::int64_t evalInterval) {
  const std::int64_t every = std::max<std::int64_t>(1, evalInterval);
  return round <= 1 || (round * syncEvery) / every != ((round - 1) * syncEvery) / every;
}

Expected<MergeResult> SpesPeer::merge(std::int64_t round, const std::vector<IncomingContribution>& incoming,
                                      bool evaluate) {
  auto& d = *impl_;
  if (d.snapshot.empty())
    return makeError("merge of round " + std::to_string(round) + " without a contribution of ours");
  MergeResult result;
  result.round = round;
  const sync::RoundContext context{d.config.runId, round, d.fingerprint()};
  std::map<std::string, std::int64_t> bytesOf;  // sender → file size, for the verdicts
  auto entries = readEntries(incoming, d.base, result.verdicts, bytesOf);
  // The round's merge: the same function the simulator runs (issue 13, item 2).
  auto outcome = sync::mergeRound(d.base, context, std::move(entries), mergePolicy(d.config, round),
                                  round * d.config.syncEvery, d.config.trainer.model, d.momentum, d.ledger);
  if (!outcome) return makeError(outcome.error());
  return d.adoptMerge(std::move(*outcome), std::move(result), bytesOf, evaluate);
}

Expected<MergeResult> SpesPeer::Impl::adoptMerge(sync::RoundMerge outcome, MergeResult result,
                                                 const std::map<std::string, std::int64_t>& bytesOf, bool evaluate) {
  for (const auto& e : outcome.verdicts) {
    const auto bytes = bytesOf.find(e.sender);
    result.verdicts.push_back({PeerId(e.sender), e.accepted, e.stale, e.staleBase, e.reason,
                               bytes == bytesOf.end() ? 0 : bytes->second, e.lost, e.noWork});
    for (const auto& [who, factor] : outcome.expertCuts)
      if (who.first == e.sender) result.verdicts.back().expertCuts[who.second] = factor;
    result.verdicts.back().agreement = e.agreement;
    result.verdicts.back().credited = e.credited;
    result.verdicts.back().outByShards = e.outByShards;
  }
  std::sort(result.verdicts.begin(), result.verdicts.end(),
            [](const auto& a, const auto& b) { return a.sender < b.sender; });
  result.accepted = static_cast<int>(outcome.accepted.size());
  result.alpha = outcome.alpha;
  NamedTensors merged = std::move(outcome.merged);
  // Keep what this peer learned since it wrote its contribution (training never waited).
  auto local = train::trainerWeights(*trainer);
  if (evaluate) {  // the merged state alone, then our progress on top
    if (auto s = train::setTrainerWeights(*trainer, merged); !s) return makeError(s.error());
    result.valLoss = trainer->evaluate();
    if (config.tokenizer) result.sample = sampleMergedModel(trainer->impl().model, *valTokens, *config.tokenizer);
  }
  NamedTensors adopted;
  for (std::size_t i = 0; i < merged.size(); ++i)
    adopted.emplace_back(merged[i].first, merged[i].second + (local[i].second - snapshot[i].second));
  if (auto s = train::setTrainerWeights(*trainer, adopted); !s) return makeError(s.error());
  result.fingerprint = outcome.fingerprint;
  result.sharedFingerprint = sync::stateFingerprint(sharedOnly(merged));
  previousBase = std::move(base);
  base = std::move(merged);
  previousMomentum = std::move(momentum);
  momentum = std::move(outcome.momentum);
  previousLedger = std::move(ledger);
  ledger = std::move(outcome.ledger);
  baseRound = result.round;
  snapshot.clear();
  persist();
  return result;
}

Expected<std::string> SpesPeer::writeSnapshot(const std::string& dir) const {
  const auto& d = *impl_;
  std::error_code ec;
  fs::create_directories(dir, ec);
  // Named by round and state: peers that merged the same state write the same file (same
  // info-hash), and two different states of one round never share a name.
  const auto path = dir + "/snapshot-round-" + std::to_string(d.baseRound) + "-" + d.fingerprint() + ".safetensors";
  if (auto s = ckpt::saveSafetensors(
          path, sync::withState(d.base, d.momentum, d.ledger),
          {{"format", "expertswarm-snapshot"}, {"round", std::to_string(d.baseRound)}, {"run", d.config.runId}});
      !s)
    return makeError(s.error());
  return path;
}

Expected<std::int64_t> SpesPeer::adoptSnapshot(const std::string& path, std::int64_t expectedRound, int skipSteps) {
  auto& d = *impl_;
  auto file = ckpt::loadSafetensors(path);
  if (!file) return makeError(file.error());
  const auto& meta = file->metadata;
  if (!meta.count("format") || meta.at("format") != "expertswarm-snapshot" || !meta.count("round") ||
      !meta.count("run") || meta.at("run") != d.config.runId)
    return makeError("\"" + path + "\" is not a snapshot of this run");
  std::int64_t round = 0;
  try {
    round = std::stoll(meta.at("round"));
  } catch (const std::exception&) {
    return makeError("\"" + path + "\": bad round");
  }
  if (round != expectedRound || round < 1)
    return makeError("\"" + path + "\" says round " + std::to_string(round) + ", announced as round " +
                     std::to_string(expectedRound));
  auto ordered = inOrder(d.base, *file);
  if (!ordered) return makeError(ordered.error());
  if (auto bad = unfitSnapshotTensor(d.base, *ordered); !bad.empty()) return makeError("\"" + path + "\": " + bad);
  auto momentum = momentumIn(*file, d.base, roundPolicy(d.config).outer, round);
  if (!momentum) return makeError("\"" + path + "\": " + momentum.error());
  auto ledger = sync::ledgerIn(*file, round);
  if (!ledger) return makeError("\"" + path + "\": " + ledger.error());
  if (auto s = train::setTrainerWeights(*d.trainer, *ordered); !s) return makeError(s.error());
  d.base = std::move(*ordered);
  d.momentum = std::move(*momentum);
  d.ledger = std::move(*ledger);
  d.previousLedger = {};
  d.baseRound = round;
  d.previousBase.clear();
  d.previousMomentum.clear();
  d.snapshot.clear();
  if (d.feedback) d.feedback->setResidual({});  // movement of the state we left
  d.beforePending.clear();
  // The schedule continues where the swarm is: at the round's end, or as far into the next as the
  // swarm got (the round still ends at a multiple of sync_every).
  d.trainer->impl().step = round * d.config.syncEvery + std::clamp(skipSteps, 0, d.config.syncEvery - 1);
  d.persist();
  return round;
}

std::vector<int> SpesPeer::localExperts() const { return impl_->trainer->localExperts(); }

void SpesPeer::setPersistedCallback(std::function<void(std::int64_t round, std::string error)> callback) {
  impl_->onPersisted = std::move(callback);
}

void SpesPeer::waitForWrites() {
  if (impl_->writer.joinable()) impl_->writer.join();
}

Status SpesPeer::setTrainTokens(std::shared_ptr<const std::vector<std::uint16_t>> tokens) {
  auto& d = *impl_;
  if (auto s = d.trainer->setTrainTokens(tokens); !s) return s;
  d.trainTokens = std::move(tokens);
  return {};
}

Status SpesPeer::setLocalExperts(const std::vector<int>& experts) {
  auto& d = *impl_;
  // A new trainer with the new trainable set, loaded from the current full state: weights, step,
  // RNG and data cursor carry over; moments survive for tensors that stay trainable.
  auto options = d.config.trainer;
  options.localExperts = experts;
  auto fresh = train::Trainer::create(options, d.trainTokens, d.valTokens);
  if (!fresh) return makeError(fresh.error());
  const auto dir = d.config.stateDir.empty() ? fs::temp_directory_path().string() : d.config.stateDir;
  std::error_code ec;
  fs::create_directories(dir, ec);
  const auto handover = dir + "/claims-handover.tmp.safetensors";
  if (auto s = d.trainer->saveState(handover); !s) return s;
  auto loaded = (*fresh)->loadState(handover);
  fs::remove(handover, ec);
  if (!loaded) return loaded;
  d.trainer = std::move(*fresh);
  d.config.trainer.localExperts = experts;
  return {};
}

Status SpesPeer::exportWeights(const std::string& path) const {
  const auto config = impl_->config.trainer.model.toJson();
  if (auto s = ckpt::saveSafetensors(
          path, impl_->base,
          {{"format", "expertswarm-model"}, {"round", std::to_string(impl_->baseRound)}, {"model_config", config}});
      !s)
    return s;
  // The config beside the weights, for readers that do not look into safetensors metadata.
  return writeFileAtomically(path + ".config.json", config + "\n");
}

}  // namespace es::node
