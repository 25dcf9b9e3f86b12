// The manifest's "swarm" object → SwarmPolicy. Every value is bounded: a stranger's manifest
// decides how often we publish, how long we wait and how much we keep, so zero, negative and
// huge values are refused rather than clamped (a clamped value would differ between versions).
#include "core/train/manifest_json.h"

namespace es::train::manifest {
namespace {

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

Reader compression(std::string& out) {
  return [&out](const json& v) -> std::string {
    // The codecs of sync::parseCodec (es_sync links Torch's codec code; this library cannot).
    for (const char* codec : {"f32", "bf16", "int8"})
      if (v.is_string() && v.get<std::string>() == codec) {
        out = codec;
        return {};
      }
    return "must be \"f32\", \"bf16\" or \"int8\"";
  };
}

}  // namespace

std::string readSwarmPolicy(const json& object, SwarmPolicy& p) {
  return readObject(object, "swarm", {
      {"sync_every", integer(p.syncEvery, 1, 100000)},
      {"experts_per_peer", integer(p.expertsPerPeer, 1, 1024)},
      {"lease_rounds", integer(p.leaseRounds, 1, 1000)},
      {"snapshot_every", integer(p.snapshotEvery, 1, 1000)},
      {"quorum", real(p.quorum, 0.01, 1)},
      {"compression", compression(p.compression)},
      {"deadline", [&p](const json& v) { return readObject(v, "swarm.deadline", deadlineReaders(p)); }},
      {"merge_warmup", [&p](const json& v) { return readObject(v, "swarm.merge_warmup", warmupReaders(p)); }}});
}

std::string checkSwarmPolicy(const SwarmPolicy& p, const model::ModelConfig& model) {
  if (p.expertsPerPeer > model.nExperts)
    return "swarm.experts_per_peer: " + std::to_string(p.expertsPerPeer) + " exceeds model.n_experts (" +
           std::to_string(model.nExperts) + ")";
  if (p.deadlineMaxSeconds < p.deadlineMinSeconds) return "swarm.deadline.max_seconds: below swarm.deadline.min_seconds";
  return {};
}

}  // namespace es::train::manifest
