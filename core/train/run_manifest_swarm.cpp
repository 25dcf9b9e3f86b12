// The manifest's "swarm" object → SwarmPolicy. Every value is bounded: a stranger's manifest
// decides how often we publish, how long we wait and how much we keep, so zero, negative and
// huge values are refused rather than clamped (a clamped value would differ between versions).
#include "core/train/manifest_json.h"

#include <algorithm>
#include <string>
#include <vector>

namespace es::train::manifest {
namespace {

// One of `names` (the names es_sync parses: this library cannot link it).
Reader oneOf(std::string& out, std::vector<std::string> names) {
  return [&out, names](const json& v) -> std::string {
    for (const auto& name : names)
      if (v.is_string() && v.get<std::string>() == name) {
        out = name;
        return {};
      }
    std::string list;
    for (std::size_t i = 0; i < names.size(); ++i)
      list += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + ("\"" + names[i] + "\"");
    return "must be " + list;
  };
}

Readers deadlineReaders(SwarmPolicy& p) {
  // Below factor 1 a round closes before a typical peer's contribution; a day is the longest wait.
  return {{"factor", real(p.deadlineFactor, 1, 100)},
          {"min_seconds", real(p.deadlineMinSeconds, 1, 86400)},
          {"max_seconds", real(p.deadlineMaxSeconds, 1, 86400)}};
}

Readers warmupReaders(SwarmPolicy& p) {
  return {{"interval", integer(p.warmupInterval, 1, 1000000)},
          {"alpha0", real(p.warmupAlpha0, 0, 1)},
          {"decay_steps", integer(p.warmupDecaySteps, 1, std::int64_t(1) << 40)},
          {"topk", integer(p.warmupTopk, 1, 1024)}};
}

// A stranger picks how our merge treats everyone's shared deltas, so every number is bounded:
// centered clipping moves geometrically towards the honest cluster, so 10 iterations (each two
// passes over all contributions) are plenty; τ below 0.1 × the median distance would all but
// stop learning, above 100 × it clips nothing (the mean with extra work).
Readers aggregateReaders(SwarmPolicy& p) {
  return {{"rule", oneOf(p.aggregate, {"mean", "centered_clip"})},
          {"clip_iterations", integer(p.clipIterations, 1, 10)},
          {"clip_tau_factor", real(p.clipTauFactor, 0.1, 100)}};
}

// The outer step multiplies every round's merged delta: lr above 2 or momentum near 1 (a step
// of lr / (1 − μ) × the delta in the long run) diverges, and lr near 0 stops learning.
Readers outerStepReaders(SwarmPolicy& p) {
  return {{"lr", real(p.outerLr, 0.05, 2)},
          {"momentum", real(p.outerMomentum, 0, 0.99)},
          {"on", oneOf(p.outerOn, {"shared", "experts", "all"})}};
}

// Peer ids (p2p::peerIdOf: 40 lower-case hex digits), unique, at most 16: a few always-on peers.
Reader anchorList(std::vector<std::string>& out) {
  return [&out](const json& list) -> std::string {
    if (!list.is_array() || list.size() > 16) return "must be a list of at most 16 peer ids";
    for (const auto& item : list) {
      const bool id = item.is_string() && item.get<std::string>().size() == 40 &&
                      item.get<std::string>().find_first_not_of("0123456789abcdef") == std::string::npos;
      if (!id) return "each must be a peer id: 40 lower-case hex digits";
      if (std::find(out.begin(), out.end(), item.get<std::string>()) != out.end()) return "names a peer twice";
      out.push_back(item.get<std::string>());
    }
    return {};
  };
}

// The codecs of sync::parseCodec, and "sparse" (es_sync links Torch's codec code; this library cannot).
Reader compression(std::string& out) { return oneOf(out, {"f32", "bf16", "int8", "sparse"}); }

// sync::kMaxSparseChunk bounds the chunk (int16 indices); keep ≤ chunk is checkSwarmPolicy's. A
// decay of 0 would drop everything unsent, 1 keep it all for ever.
Readers sparseReaders(SwarmPolicy& p) {
  return {{"keep", integer(p.sparseKeep, 1, 32768)},
          {"chunk", integer(p.sparseChunk, 1, 32768)},
          {"feedback_decay", real(p.feedbackDecay, 0.5, 1)}};
}

// Reducers a shard: 1 (no replica: a lie is caught by the audits and the vote alone) to 16; an
// audit fetches one shard from every sender (~0.9 MiB for the bundled model), 64 of them ~58 MiB a
// round; shard_from is checked against replicas by checkSwarmPolicy.
Readers reductionReaders(SwarmPolicy& p) {
  return {{"replicas", integer(p.reductionReplicas, 1, 16)},
          {"audits", integer(p.reductionAudits, 0, 64)},
          {"shard_from", integer(p.shardFrom, 0, 1000000)}};
}

}  // namespace

std::string readSwarmPolicy(const json& object, SwarmPolicy& p) {
  return readObject(
      object, "swarm",
      {{"sync_every", integer(p.syncEvery, 1, 100000)},
       {"experts_per_peer", integer(p.expertsPerPeer, 1, 1024)},
       {"lease_rounds", integer(p.leaseRounds, 1, 1000)},
       {"snapshot_every", integer(p.snapshotEvery, 1, 1000)},
       {"quorum", real(p.quorum, 0.01, 1)},
       {"identity_work_bits", integer(p.identityWorkBits, 0, 30)},  // p2p::kMaxIdentityWorkBits
       {"anchors", anchorList(p.anchors)},
       {"compression", compression(p.compression)},
       {"sparse", [&p](const json& v) { return readObject(v, "swarm.sparse", sparseReaders(p)); }},
       {"deadline", [&p](const json& v) { return readObject(v, "swarm.deadline", deadlineReaders(p)); }},
       {"merge_warmup", [&p](const json& v) { return readObject(v, "swarm.merge_warmup", warmupReaders(p)); }},
       {"aggregate", [&p](const json& v) { return readObject(v, "swarm.aggregate", aggregateReaders(p)); }},
       {"outer_step", [&p](const json& v) { return readObject(v, "swarm.outer_step", outerStepReaders(p)); }},
       {"reduction", [&p](const json& v) { return readObject(v, "swarm.reduction", reductionReaders(p)); }}});
}

std::string checkSwarmPolicy(const SwarmPolicy& p, const model::ModelConfig& model) {
  if (p.expertsPerPeer > model.nExperts)
    return "swarm.experts_per_peer: " + std::to_string(p.expertsPerPeer) + " exceeds model.n_experts (" +
           std::to_string(model.nExperts) + ")";
  if (p.sparseKeep > p.sparseChunk) return "swarm.sparse.keep: exceeds swarm.sparse.chunk";
  if (p.deadlineMaxSeconds < p.deadlineMinSeconds)
    return "swarm.deadline.max_seconds: below swarm.deadline.min_seconds";
  if (p.shardFrom > 0 && p.shardFrom <= p.reductionReplicas)
    return "swarm.reduction.shard_from: must exceed swarm.reduction.replicas (every sender a reducer) or be 0";
  if (p.shardFrom > 0 && p.compression == "sparse")
    return "swarm.reduction.shard_from: a sparse run is never sharded (its error feedback is per tensor)";
  return {};
}

}  // namespace es::train::manifest
