// Issue 38's byte model (bench/reduction_scale, simulation only): per-peer bytes a round moves for
// N peers when every peer fetches every other's contribution (today) against the sharded,
// replicated reduction being built (core/sync/shard_plan.h, reducer_plan.h): each shard reduced by
// R = 3 peers that fetch it from every contributor, every other peer fetching the merged shard
// (float32: the merged state must be bit-identical, so its values travel whole). Sizes are the
// files' exact bytes (sync::contributionBytes, sync::shardFileBytes: the safetensors layout the
// writers use), int8 contributions. Not simulated: BitTorrent's swarming (sent bytes are the
// star case: each transfer uploaded by its source alone — the most a peer can be asked for),
// record gossip, the DHT and the real client's processes (the real-process part of the issue's
// proof is still to come). Each peer's audit of A random shards a round (default 1) is counted:
// it fetches those shards from every contributor, as a reducer does.
//   reduction_scale [--model default|gpu-1b] [--replicas R] [--audits A]
#include "bench/throughput_util.h"
#include "core/sync/fetch_size.h"
#include "core/sync/reducer_plan.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

using namespace es;

namespace {

struct PeerBytes {
  std::vector<std::int64_t> received, sent;
  explicit PeerBytes(int n) : received(n, 0), sent(n, 0) {}
  std::int64_t most(const std::vector<std::int64_t>& v) const { return *std::max_element(v.begin(), v.end()); }
  double mean(const std::vector<std::int64_t>& v) const {
    double s = 0;
    for (auto x : v) s += double(x);
    return s / double(v.size());
  }
};

std::string id(int p) {
  char buf[65];
  std::snprintf(buf, sizeof buf, "%064x", p);
  return buf;
}

// SPES's claims: with fewer peers than experts each takes every N-th expert; with more, each
// expert has N / E owners.
std::vector<std::set<int>> claimsFor(int n, int experts) {
  std::vector<std::set<int>> claims(n);
  for (int p = 0; p < n; ++p)
    for (int e = 0; e < experts; ++e)
      if (n <= experts ? e % n == p : p % experts == e) claims[p].insert(e);
  return claims;
}

PeerBytes allToAll(const model::ModelConfig& config, const std::vector<std::set<int>>& claims) {
  const int n = int(claims.size());
  PeerBytes out(n);
  for (int i = 0; i < n; ++i) {
    const sync::ContributionHeader header{std::string(64, 'r'), 1000000, id(i), std::string(16, 'b'), "int8"};
    const auto bytes = sync::contributionBytes(config, claims[i], header);
    for (int j = 0; j < n; ++j)
      if (j != i) out.received[j] += bytes;
    out.sent[i] += bytes * (n - 1);
  }
  return out;
}

ckpt::Metadata shardMetadata(const std::string& shard, const std::string& sender, const char* codec) {
  return {{"format", "expertswarm-shard"},
          {"version", "1"},
          {"run", std::string(64, 'r')},
          {"round", "1000000"},
          {"sender", sender},
          {"shard", shard},
          {"base_hash", std::string(16, 'b')},
          {"codec", codec}};
}

// Contributor i's file of shard s (0 when it carries none of it: another owner's expert).
std::int64_t shardBytes(const sync::Shard& shard, const std::set<int>& claims, const std::string& sender) {
  if (shard.expert >= 0 && !claims.count(shard.expert)) return 0;
  return sync::shardFileBytes(shard, "int8", shardMetadata(shard.id, sender, "int8"));
}

// Each peer audits `audits` shards a round it does not reduce, drawn at random (here a fixed seed;
// the client draws from its own randomness): it fetches the shard from every contributor and
// recomputes it, as its reducers did (rules/shard_outputs.h).
void addAudits(const std::vector<sync::Shard>& shards, const std::vector<std::set<int>>& chosen,
               const std::vector<std::set<int>>& claims, const std::vector<std::string>& ids, int audits,
               PeerBytes& out) {
  const int n = int(claims.size());
  std::mt19937_64 draw(38);
  for (int p = 0; p < n; ++p)
    for (int a = 0; a < audits; ++a) {
      std::size_t s = draw() % shards.size();
      while (chosen[s].count(p)) s = draw() % shards.size();
      for (int i = 0; i < n; ++i) {
        if (i == p) continue;
        const auto bytes = shardBytes(shards[s], claims[i], ids[i]);
        out.received[p] += bytes, out.sent[i] += bytes;
      }
    }
}

PeerBytes sharded(const model::ModelConfig& config, const std::vector<std::set<int>>& claims, int replicas, int audits,
                  std::size_t& shardCount) {
  const int n = int(claims.size());
  const auto shards = sync::planShards(config, sync::shardElementsFor(config, n));
  shardCount = shards.size();
  std::vector<std::string> ids;
  std::map<std::string, int> index;
  std::map<int, std::set<std::string>> owners;
  for (int p = 0; p < n; ++p) {
    ids.push_back(id(p));
    index[ids.back()] = p;
    for (int e : claims[p]) owners[e].insert(ids.back());
  }
  const auto reducers = sync::assignReducers(shards, ids, owners, std::string(16, 'f'), replicas);
  PeerBytes out(n);
  std::vector<std::set<int>> chosen(shards.size());
  for (std::size_t s = 0; s < shards.size(); ++s) {
    for (int k = 0; k < replicas && k < n; ++k) chosen[s].insert(index.at(reducers[s][k]));
    for (int i = 0; i < n; ++i) {  // contributors send it to every reducer but themselves
      const auto bytes = shardBytes(shards[s], claims[i], ids[i]);
      for (int r : chosen[s])
        if (r != i) out.received[r] += bytes, out.sent[i] += bytes;
    }
    const auto merged =
        sync::shardFileBytes(shards[s], "f32", shardMetadata(shards[s].id, ids[*chosen[s].begin()], "f32"));
    const int fetchers = n - int(chosen[s].size());
    for (int j = 0; j < n; ++j)
      if (!chosen[s].count(j)) out.received[j] += merged;
    for (int r : chosen[s]) out.sent[r] += merged * fetchers / int(chosen[s].size());  // the reducers split the seeding
  }
  if (n > replicas) addAudits(shards, chosen, claims, ids, audits, out);
  return out;
}

double mib(double bytes) { return bytes / (1024.0 * 1024.0); }

}  // namespace

int main(int argc, char** argv) {
  std::string preset = "default";
  int replicas = 3, audits = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--model"))
      preset = argv[i + 1];
    else if (!std::strcmp(argv[i], "--replicas"))
      replicas = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--audits"))
      audits = std::atoi(argv[i + 1]);
  }
  model::ModelConfig config;
  int batch = 0;
  if (!bench::applyModelPreset(preset, config, batch) || replicas < 1 || audits < 0) {
    std::fprintf(stderr, "usage: reduction_scale [--model default|gpu-1b] [--replicas R >= 1] [--audits A >= 0]\n");
    return 2;
  }
  std::printf(
      "model %s (%lld parameters), int8 contributions, R = %d, %d audited shard(s) per peer; MiB per peer per "
      "round\n",
      preset.c_str(), static_cast<long long>(config.totalParameters()), replicas, audits);
  std::printf("%5s %7s | %12s %12s | %12s %12s %12s %12s\n", "peers", "shards", "a2a recv max", "a2a sent max",
              "shd recv max", "shd recv mean", "shd sent max", "shd max/N=16");
  double at16 = 0;
  for (const int n : {4, 8, 16, 32, 64, 128, 256}) {
    const auto claims = claimsFor(n, config.nExperts);
    const auto a2a = allToAll(config, claims);
    std::size_t shards = 0;
    const auto shd = sharded(config, claims, replicas, audits, shards);
    const double busiest = double(std::max(shd.most(shd.received), shd.most(shd.sent)));
    if (n == 16) at16 = busiest;
    std::printf("%5d %7zu | %12.1f %12.1f | %12.1f %12.1f %12.1f %12s\n", n, shards, mib(a2a.most(a2a.received)),
                mib(a2a.most(a2a.sent)), mib(shd.most(shd.received)), mib(shd.mean(shd.received)),
                mib(shd.most(shd.sent)), at16 > 0 ? std::to_string(busiest / at16).substr(0, 5).c_str() : "-");
  }
  return 0;
}
