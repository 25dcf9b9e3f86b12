#include "core/sim/simulated_swarm.h"

#include "core/sim/sim_eval.h"
#include "core/sim/swarm_round.h"
#include "core/train/trainer_weights.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

namespace es::sim {
namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

std::string fmt(double value, int decimals = 4) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*f", decimals, value);
  return buffer;
}

std::vector<int> allExperts(int n) {
  std::vector<int> all(static_cast<std::size_t>(n));
  for (int e = 0; e < n; ++e) all[static_cast<std::size_t>(e)] = e;
  return all;
}

Status checkConfig(const SimConfig& c, Strategy strategy) {
  if (auto problem = c.model.validate(); !problem.empty()) return makeError("model config: " + problem);
  if (c.peers < 1 || c.syncEvery < 1 || c.steps < 1 || c.train.batchSize < 1)
    return makeError("peers, sync interval, steps and batch size must all be positive");
  if (strategy == Strategy::Spes && !c.claims.empty()) {
    if (static_cast<int>(c.claims.size()) != c.peers) return makeError("claims must list one set per peer");
    for (const auto& set : c.claims)
      if (set.empty()) return makeError("every peer must claim at least one expert");  // empty = all
  }
  return {};
}

// Steps at which a round ends (a merge in the swarm, a validation point in all strategies).
std::int64_t roundEnd(const SimConfig& c, int round) {
  return std::min<std::int64_t>(std::int64_t(round) * c.syncEvery, c.steps);
}
int roundCount(const SimConfig& c) { return (c.steps + c.syncEvery - 1) / c.syncEvery; }
bool evaluatesAfter(const SimConfig& c, int round) {
  const int every = std::max(1, c.evalEvery > 0 ? c.evalEvery / c.syncEvery : 1);
  return round % every == 0 || round == roundCount(c);
}

Expected<SimResult> runCentralized(const SimConfig& c, const train::RunData& data, const train::LogFn& log) {
  SimResult result;
  result.strategy = Strategy::Centralized;
  const auto start = Clock::now();
  auto evaluate = detail::Evaluator::create(c, data);
  if (!evaluate) return makeError(evaluate.error());
  train::TrainerOptions options{c.model, c.train, c.seed, c.dataSeed, {}};
  // Default: the same tokens per step as all peers together.
  options.train.batchSize = c.centralBatch > 0 ? c.centralBatch : c.train.batchSize * c.peers;
  auto created = train::Trainer::create(options, data.train, data.val);
  if (!created) return makeError(created.error());
  auto& trainer = **created;
  result.optimizerStateBytesPerPeer = trainer.optimizerStateBytes();

  auto initial = (*evaluate)(train::trainerWeights(trainer));
  if (!initial) return makeError(initial.error());
  result.curve.push_back({0, *initial, 0});
  for (int round = 1; round <= roundCount(c); ++round) {
    double lossSum = 0;
    std::int64_t n = 0;
    while (trainer.step() < roundEnd(c, round)) {
      const auto stats = trainer.trainStep();
      lossSum += stats.loss;
      result.tokensTrained += stats.tokens;
      ++n;
    }
    if (!evaluatesAfter(c, round)) continue;
    auto val = (*evaluate)(train::trainerWeights(trainer));
    if (!val) return makeError(val.error());
    result.curve.push_back({trainer.step(), *val, lossSum / double(std::max<std::int64_t>(n, 1))});
    log("centralized step " + std::to_string(trainer.step()) + ": val " + fmt(*val));
  }
  result.initialValLoss = result.curve.front().valLoss;
  result.finalValLoss = result.curve.back().valLoss;
  result.seconds = secondsSince(start);
  return result;
}

// Who trains which experts: all (FedAvg), the configured lists, or a fair split.
std::vector<std::vector<int>> claimsFor(Strategy strategy, const SimConfig& c) {
  const int nExperts = c.model.nExperts;
  if (strategy == Strategy::FedAvg)
    return std::vector<std::vector<int>>(static_cast<std::size_t>(c.peers), allExperts(nExperts));
  if (!c.claims.empty()) return c.claims;
  return assignExperts(c.peers, nExperts, c.expertsPerPeer > 0 ? c.expertsPerPeer : nExperts / c.peers);
}

// Each peer: its own disjoint shard, its own data stream, the run's seed (same initial weights).
Expected<std::vector<detail::Peer>> createPeers(Strategy strategy, const SimConfig& c, const train::RunData& data,
                                                SimResult& result) {
  const auto claims = claimsFor(strategy, c);
  const auto shards = splitTokens(data.train, c.peers, c.shardBlockTokens);
  std::vector<detail::Peer> peers;
  for (int p = 0; p < c.peers; ++p) {
    detail::Peer peer{"peer-" + std::to_string(p),         claims[static_cast<std::size_t>(p)], nullptr, {}, {},
                      sync::ErrorFeedback(c.feedbackDecay)};
    train::TrainerOptions options{c.model, c.train, c.seed, c.dataSeed + static_cast<std::uint64_t>(p), peer.claims};
    auto created = train::Trainer::create(options, shards[static_cast<std::size_t>(p)], data.val);
    if (!created) return makeError(peer.id + ": " + created.error());
    peer.trainer = std::move(*created);
    result.optimizerStateBytesPerPeer =
        std::max(result.optimizerStateBytesPerPeer, peer.trainer->optimizerStateBytes());
    peers.push_back(std::move(peer));
  }
  return peers;
}

Expected<SimResult> runSwarm(Strategy strategy, const SimConfig& c, const train::RunData& data, const train::LogFn& log,
                             const MergeObserver& observer) {
  SimResult result;
  result.strategy = strategy;
  const auto start = Clock::now();
  auto evaluate = detail::Evaluator::create(c, data);
  if (!evaluate) return makeError(evaluate.error());
  auto created = createPeers(strategy, c, data, result);
  if (!created) return makeError(created.error());
  auto& peers = *created;

  const std::string label =
      strategyName(strategy) + (c.warmup ? "+warmup" : "") + "/" +
      (c.sparse.keep > 0 ? "top" + std::to_string(c.sparse.keep) + "of" + std::to_string(c.sparse.chunk)
                         : sync::codecName(c.codec));
  auto base = train::trainerWeights(*peers.front().trainer);
  auto initial = (*evaluate)(base);
  if (!initial) return makeError(initial.error());
  result.curve.push_back({0, *initial, 0});
  for (int round = 1; round <= roundCount(c); ++round) {
    const std::int64_t end = roundEnd(c, round);
    double lossSum = 0;
    std::int64_t n = 0;
    for (auto& peer : peers) {
      while (peer.trainer->step() < end) {
        const auto stats = peer.trainer->trainStep();
        lossSum += stats.loss;
        result.tokensTrained += stats.tokens;
        ++n;
      }
    }
    const auto mergeStart = Clock::now();
    auto outcome = detail::syncRound(peers, {round, end, base, c}, observer, log);
    if (!outcome) return makeError(outcome.error());
    base = std::move(outcome->merged);
    result.merges += 1;
    result.warmupMerges += outcome->alpha > 0 ? 1 : 0;
    result.rejectedContributions += outcome->rejected;
    result.uncreditedContributions += outcome->uncredited;
    result.lowestAgreement = std::min(result.lowestAgreement, outcome->lowestAgreement);
    result.peersIdenticalAfterEveryMerge = result.peersIdenticalAfterEveryMerge && outcome->identical;
    result.bytes.insert(result.bytes.end(), outcome->bytes.begin(), outcome->bytes.end());
    const double mergeSeconds = secondsSince(mergeStart);
    if (!evaluatesAfter(c, round)) continue;
    auto val = (*evaluate)(base);
    if (!val) return makeError(val.error());
    result.curve.push_back({end, *val, lossSum / double(std::max<std::int64_t>(n, 1))});
    log(label + " step " + std::to_string(end) + ": val " + fmt(*val) + ", merge " + fmt(mergeSeconds, 2) + " s" +
        (outcome->alpha > 0 ? ", warm-up alpha " + fmt(outcome->alpha, 3) : "") +
        (outcome->identical ? "" : ", PEERS DIFFER"));
  }
  result.initialValLoss = result.curve.front().valLoss;
  result.finalValLoss = result.curve.back().valLoss;
  result.seconds = secondsSince(start);
  return result;
}

}  // namespace

std::string strategyName(Strategy strategy) {
  switch (strategy) {
    case Strategy::Spes:
      return "spes";
    case Strategy::FedAvg:
      return "fedavg";
    case Strategy::Centralized:
      return "centralized";
  }
  return "?";
}

MeanBytes meanContributionBytes(const SimResult& result) {
  MeanBytes mean;
  if (result.bytes.empty()) return mean;
  for (const auto& b : result.bytes) {
    mean.f32 += double(b.f32);
    mean.bf16 += double(b.bf16);
    mean.int8 += double(b.int8);
    mean.spesReference += double(b.spesReference);
    mean.sparse += double(b.sparse);
  }
  const double n = double(result.bytes.size());
  return {mean.f32 / n, mean.bf16 / n, mean.int8 / n, mean.spesReference / n, mean.sparse / n};
}

std::vector<std::vector<int>> assignExperts(int peers, int nExperts, int expertsPerPeer) {
  const int k = std::max(1, std::min(expertsPerPeer, nExperts));
  std::vector<std::vector<int>> claims(static_cast<std::size_t>(std::max(peers, 0)));
  for (int p = 0; p < peers; ++p) {
    for (int j = 0; j < k; ++j) claims[static_cast<std::size_t>(p)].push_back((p * k + j) % nExperts);
    std::sort(claims[static_cast<std::size_t>(p)].begin(), claims[static_cast<std::size_t>(p)].end());
  }
  return claims;
}

std::vector<train::TokenBuffer> splitTokens(const train::TokenBuffer& tokens, int parts, std::size_t blockTokens) {
  const std::size_t size = tokens->size(), n = static_cast<std::size_t>(std::max(parts, 1));
  std::vector<std::vector<std::uint16_t>> shards(n);
  if (blockTokens == 0) {  // contiguous: shard i is the i-th n-th, the last takes the remainder
    const std::size_t each = size / n;
    for (std::size_t i = 0; i < n; ++i)
      shards[i].assign(tokens->begin() + static_cast<std::ptrdiff_t>(each * i),
                       i + 1 == n ? tokens->end() : tokens->begin() + static_cast<std::ptrdiff_t>(each * (i + 1)));
  } else {  // interleaved: block b goes to shard b mod n
    for (std::size_t begin = 0, b = 0; begin < size; begin += blockTokens, ++b) {
      const std::size_t end = std::min(size, begin + blockTokens);
      shards[b % n].insert(shards[b % n].end(), tokens->begin() + static_cast<std::ptrdiff_t>(begin),
                           tokens->begin() + static_cast<std::ptrdiff_t>(end));
    }
  }
  std::vector<train::TokenBuffer> out;
  for (auto& shard : shards) out.push_back(std::make_shared<const std::vector<std::uint16_t>>(std::move(shard)));
  return out;
}

Expected<SimResult> runSimulation(Strategy strategy, const SimConfig& config, const train::RunData& data,
                                  const train::LogFn& log, const MergeObserver& observer) {
  if (auto ok = checkConfig(config, strategy); !ok) return makeError(ok.error());
  if (strategy == Strategy::Centralized) return runCentralized(config, data, log);
  return runSwarm(strategy, config, data, log, observer);
}

}  // namespace es::sim
