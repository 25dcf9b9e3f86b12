// Issue 37's proof at the merge (bench/sybil_cost): for each attack on the round's merge and
// H ∈ {3, 5} honest peers, the smallest number of attacker keys (1–32) that achieves each harm,
// under the rules of a3cdfca (bounds from the round's medians), under the run's update ceiling
// (core/sync/update_ceiling.h) alone, and under today's: the ceiling and the work ledger
// (core/sync/work_ledger.h) — the honest peers merged for the last 8 rounds, the keys fresh
// ("ledger") or merged for as long as the honest peers ("ledger=", the rule's limit: equal work
// per key is head count again), or ("earned") fresh keys that sent their attack beside the honest
// peers for 8 rounds and hold whatever standing those merges credited them (work_credit.h: only
// work that agrees with the merge earns a round). It drives sync::mergeRound — the function every client and
// the simulator run — on synthetic contributions shaped like a round of the bundled run
// (tst_update_ceiling: an honest round's RMS is 0.11–0.20 × the round's lr sum), so it sweeps
// hundreds of rounds in seconds. What it does not cover: the node's votes, fetch slots and stalls
// (items 2, 3 and 5: bench/sybil_nodes) and magnet joins (item 6).
//
// Harms, in one round: ban — an honest contribution rejected (its sender banned by honest peers);
// freeze — the merged shared update moves less than 10 % of the honest mean along it; turned —
// the merged shared update points away from the honest mean (cosine < 0); expert — an attacker's
// expert accepted with a move over 10 × an honest owner's RMS.
// Usage: sybil_cost [--clip-shard-elements N]  (issue 38: centered clipping per shard of at most N
// elements, AggregatePolicy::clipShardElements; the shared tensors here hold 8256; 0 = one clip)
#include "core/model/tensor_names.h"
#include "core/sync/round_merge.h"
#include "core/sync/update_ceiling.h"
#include "core/sync/work_ledger.h"

#include <torch/torch.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

using namespace es;
using sync::NamedTensors;

namespace {

constexpr double kLrSum = 0.1;  // round 2 of the bundled run (tst_update_ceiling)
constexpr std::int64_t kRound = 9;
std::int64_t clipShardElements = 0;        // --clip-shard-elements
constexpr std::int64_t kHonestRounds = 8;  // the honest peers' merged rounds under the ledger rules

enum class Rules { Median, Ceiling, Ledger, LedgerEqual, Earned };
const char* rulesName(Rules r) {
  switch (r) {
    case Rules::Median:
      return "median";
    case Rules::Ceiling:
      return "ceiling";
    case Rules::Ledger:
      return "ledger";
    case Rules::LedgerEqual:
      return "ledger=";
    case Rules::Earned:
      return "earned";
  }
  return "?";
}

// The ledger the round's base came with: the honest peers (and under "ledger=" the keys) merged in
// each of the last kHonestRounds rounds. ("earned" starts from the honest peers' and adds what the
// keys' own attack rounds credited them: earnedLedger.)
sync::WorkLedger ledgerFor(Rules rules, int h, int keys) {
  std::vector<std::string> worked;
  if (rules == Rules::Ledger || rules == Rules::LedgerEqual || rules == Rules::Earned)
    for (int i = 0; i < h; ++i) worked.push_back("honest-" + std::to_string(i));
  if (rules == Rules::LedgerEqual)
    for (int k = 0; k < keys; ++k) worked.push_back("key-" + std::to_string(k));
  sync::WorkLedger ledger;
  if (worked.empty()) return ledger;
  for (std::int64_t r = kRound - kHonestRounds; r < kRound; ++r) ledger = ledger.after(r, worked);
  return ledger;
}
constexpr int kExperts = 8;
const std::string kRun = "bench";

std::string expertName(int e) { return model::expertTensorName(0, e, "w1"); }

NamedTensors makeBase() {
  torch::manual_seed(1);
  NamedTensors base{{"tok_embeddings.weight", torch::randn({64, 64}) * 0.02},
                    {"layers.0.attention.wq.weight", torch::randn({64, 64}) * 0.02},
                    {"norm.weight", torch::ones({64})}};
  for (int e = 0; e < kExperts; ++e) base.emplace_back(expertName(e), torch::randn({32, 64}) * 0.02);
  return base;
}

struct Round {
  NamedTensors base = makeBase();
  NamedTensors direction;  // what honest training agrees on, per shared tensor
  Round() {
    torch::manual_seed(2);
    for (const auto& [name, t] : base)
      if (!model::expertOf(name)) direction.emplace_back(name, torch::randn(t.sizes()) * (0.12 * kLrSum));
  }
};

// Honest peer i: the direction plus its own noise (RMS ≈ 0.13 × lr sum), and its expert moved alike.
NamedTensors honest(const Round& round, int i, int expert) {
  torch::manual_seed(100 + i);
  NamedTensors d;
  for (const auto& [name, t] : round.direction) d.emplace_back(name, t + torch::randn(t.sizes()) * (0.06 * kLrSum));
  d.emplace_back(expertName(expert), torch::randn({32, 64}) * (0.1 * kLrSum));
  return d;
}

struct Attack {
  const char* name;
  std::function<NamedTensors(const Round&, int key)> deltas;
  bool ownsExpert = false;  // the key claims an expert of its own (the last one)
};

NamedTensors scaledDirection(const Round& round, double scale) {
  NamedTensors d;
  for (const auto& [name, t] : round.direction) d.emplace_back(name, t * scale);
  return d;
}

// An honest shared update, and the key's own expert (the last) moved by `value` at every weight.
std::function<NamedTensors(const Round&, int)> soleOwnerMoving(double value) {
  return [value](const Round& r, int) {
    auto d = scaledDirection(r, 1.0);
    d.emplace_back(expertName(kExperts - 1), torch::full({32, 64}, value));
    return d;
  };
}

std::vector<Attack> attacks() {
  const double ceiling = sync::adamStepBound(0.9, 0.95) * kLrSum;  // per weight, before decay
  return {
      {"vanishing (1e-9 x honest)", [](const Round& r, int) { return scaledDirection(r, 1e-9); }},
      {"zero", [](const Round& r, int) { return scaledDirection(r, 0.0); }},
      {"noise just over the floor",
       [](const Round& r, int key) {
         torch::manual_seed(900 + key);
         NamedTensors d;
         for (const auto& [name, t] : r.direction) d.emplace_back(name, torch::randn(t.sizes()) * (2e-3 * kLrSum));
         return d;
       }},
      {"reversed, at the ceiling",
       [ceiling](const Round& r, int) {
         NamedTensors d;
         for (const auto& [name, t] : r.direction) d.emplace_back(name, -torch::sign(t) * (0.99 * ceiling));
         return d;
       }},
      {"reversed, 10 x honest", [](const Round& r, int) { return scaledDirection(r, -10.0); }},
      {"sole owner, at the ceiling", soleOwnerMoving(0.99 * ceiling), true},
      {"sole owner, 2 x the ceiling", soleOwnerMoving(2.0 * ceiling), true},
  };
}

struct Harms {
  bool ban = false, freeze = false, turned = false, expert = false;
};

at::Tensor sharedUpdate(const NamedTensors& merged, const NamedTensors& base) {
  std::vector<at::Tensor> parts;
  for (std::size_t i = 0; i < base.size(); ++i)
    if (!model::expertOf(base[i].first))
      parts.push_back((merged[i].second.to(at::kDouble) - base[i].second.to(at::kDouble)).reshape({-1}));
  return torch::cat(parts);
}

// The merge of round `number`: h honest peers and `keys` keys sending `attack`.
sync::RoundMerge mergeWith(const Round& round, const Attack& attack, int h, int keys, Rules rules, std::int64_t number,
                           const sync::WorkLedger& ledger) {
  const std::string baseHash = sync::stateFingerprint(round.base);
  const sync::RoundContext context{kRun, number, baseHash};
  std::vector<sync::RoundEntry> entries;
  auto entry = [&](const std::string& sender, NamedTensors d, std::set<int> claims) {
    sync::RoundEntry e;
    e.header.run = kRun;
    e.header.round = number;
    e.header.sender = sender;
    e.header.baseHash = baseHash;
    e.header.codec = "f32";
    e.deltas = sync::heldDeltas(std::move(d));
    e.claims = std::move(claims);
    entries.push_back(std::move(e));
  };
  for (int i = 0; i < h; ++i)
    entry("honest-" + std::to_string(i), honest(round, i, i % (kExperts - 1)), {i % (kExperts - 1)});
  for (int k = 0; k < keys; ++k)
    entry("key-" + std::to_string(k), attack.deltas(round, k),
          attack.ownsExpert && k == 0 ? std::set<int>{kExperts - 1} : std::set<int>{});
  sync::RoundPolicy policy;
  policy.aggregate = {sync::SharedRule::CenteredClip, 3, 1.0};
  policy.aggregate.clipShardElements = clipShardElements;
  if (rules != Rules::Median) policy.validation.ceiling = {kLrSum, sync::adamStepBound(0.9, 0.95), 0.1};
  auto merge = sync::mergeRound(round.base, context, std::move(entries), policy, 100, {}, {}, ledger);
  if (!merge) {
    std::fprintf(stderr, "merge failed: %s\n", merge.error().c_str());
    std::exit(1);
  }
  return std::move(*merge);
}

// "earned": after the honest peers' kHonestRounds, the keys sent their attack beside them for as
// many rounds; their standing is what those merges credited them (work_credit.h).
Harms oneRound(const Round& round, const Attack& attack, int h, int keys, Rules rules) {
  auto ledger = ledgerFor(rules, h, keys);
  std::int64_t number = kRound;
  if (rules == Rules::Earned)
    for (std::int64_t r = 0; r < kHonestRounds; ++r, ++number)
      ledger = mergeWith(round, attack, h, keys, rules, number, ledger).ledger;
  const auto merged = mergeWith(round, attack, h, keys, rules, number, ledger);
  const auto* merge = &merged;
  Harms out;
  for (const auto& v : merge->verdicts)
    if (v.sender.rfind("honest-", 0) == 0 && !v.accepted && !v.noWork && !v.stale) out.ban = true;
  // The honest mean's shared update: what the round should have moved.
  at::Tensor want;
  for (int i = 0; i < h; ++i) {
    const auto d = honest(round, i, 0);
    std::vector<at::Tensor> parts;
    for (const auto& [name, t] : d)
      if (!model::expertOf(name)) parts.push_back(t.to(at::kDouble).reshape({-1}));
    const auto flat = torch::cat(parts);
    want = want.defined() ? want + flat : flat;
  }
  want = want / double(h);
  const at::Tensor got = sharedUpdate(merge->merged, round.base);
  const double along = (got * want).sum().item<double>() / want.norm().item<double>();
  out.freeze = along < 0.1 * want.norm().item<double>();
  out.turned = along < 0;
  const auto& expert = merge->merged[round.base.size() - 1].second;  // the last expert, the attacker's
  const at::Tensor moved = expert.to(at::kDouble) - round.base.back().second.to(at::kDouble);
  const double rms = moved.norm().item<double>() / std::sqrt(double(moved.numel()));
  out.expert = attack.ownsExpert && rms > 10 * 0.1 * kLrSum;  // 10 x an honest owner's RMS
  return out;
}

std::string smallest(const std::function<bool(int)>& achieved) {
  for (int k = 1; k <= 32; ++k)
    if (achieved(k)) return std::to_string(k);
  return "none";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::string(argv[1]) == "--clip-shard-elements") {
    clipShardElements = std::atoll(argv[2]);
  } else if (argc != 1) {
    std::fprintf(stderr, "usage: sybil_cost [--clip-shard-elements N]\n");
    return 2;
  }
  torch::set_num_threads(1);
  const Round round;
  std::printf("%-32s %-8s %2s %6s %6s %6s %6s\n", "attack", "rules", "H", "ban", "freeze", "turned", "expert");
  for (const auto& attack : attacks())
    for (const Rules rules : {Rules::Median, Rules::Ceiling, Rules::Ledger, Rules::LedgerEqual, Rules::Earned})
      for (const int h : {3, 5}) {
        std::map<int, Harms> byKeys;
        const auto harms = [&](int k) -> const Harms& {
          if (!byKeys.count(k)) byKeys[k] = oneRound(round, attack, h, k, rules);
          return byKeys[k];
        };
        std::printf("%-32s %-8s %2d %6s %6s %6s %6s\n", attack.name, rulesName(rules), h,
                    smallest([&](int k) { return harms(k).ban; }).c_str(),
                    smallest([&](int k) { return harms(k).freeze; }).c_str(),
                    smallest([&](int k) { return harms(k).turned; }).c_str(),
                    attack.ownsExpert ? smallest([&](int k) { return harms(k).expert; }).c_str() : "-");
        std::fflush(stdout);
      }
  return 0;
}
