#include "core/sync/reduction_bytes.h"

#include "core/sync/contribution_file.h"
#include "core/sync/fetch_size.h"
#include "core/sync/reducer_plan.h"
#include "core/sync/shard_file.h"
#include "core/sync/shard_plan.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <numeric>
#include <random>
#include <string>

namespace es::sync {
namespace {

// A 64-digit sender name in each file's header (a peer id has 40: the model errs a few bytes a
// file high, on both sides alike).
std::string modelPeerId(int p) {
  char buf[65];
  std::snprintf(buf, sizeof buf, "%064x", p);
  return buf;
}

// A shard file's metadata as the writer makes it (contributionMetadata, shard_file.h), with the
// model's header: a run id of 64 digits, round 10⁶, a 16-digit base hash.
ckpt::Metadata shardMetadata(const std::string& shard, const std::string& sender, const char* codec) {
  auto meta = contributionMetadata({std::string(64, 'r'), 1000000, sender, std::string(16, 'b'), codec}, kShardFormat);
  (*meta)["shard"] = shard;  // the header above is valid: never an error
  return *meta;
}

// Each shard's file in a contributor's folder (int8; every sender's name has the same length, so
// one size a shard) — what a contributor that carries it sends each of its reducers.
std::vector<std::int64_t> shardFileSizes(const std::vector<Shard>& shards) {
  std::vector<std::int64_t> sizes;
  for (const auto& shard : shards)
    sizes.push_back(shardFileBytes(shard, "int8", shardMetadata(shard.id, modelPeerId(0), "int8")));
  return sizes;
}

// Contributor `claims`' file of shard s (0 when it carries none of it: another owner's expert).
std::int64_t carried(const Shard& shard, std::int64_t size, const std::set<int>& claims) {
  return shard.expert >= 0 && !claims.count(shard.expert) ? 0 : size;
}

// Each peer audits `audits` shards a round it does not reduce, drawn at random (a fixed seed here;
// the client draws from its own randomness).
void addAudits(const std::vector<Shard>& shards, const std::vector<std::int64_t>& sizes,
               const std::vector<std::set<int>>& chosen, const std::vector<std::set<int>>& claims, int audits,
               PeerBytes& out) {
  const int n = int(claims.size());
  std::mt19937_64 draw(38);
  for (int p = 0; p < n; ++p)
    for (int a = 0; a < audits; ++a) {
      std::size_t s = draw() % shards.size();
      while (chosen[s].count(p)) s = draw() % shards.size();
      for (int i = 0; i < n; ++i) {
        if (i == p) continue;
        const auto bytes = carried(shards[s], sizes[s], claims[std::size_t(i)]);
        out.received[std::size_t(p)] += bytes, out.sent[std::size_t(i)] += bytes;
      }
    }
}

}  // namespace

std::int64_t PeerBytes::mostReceived() const { return *std::max_element(received.begin(), received.end()); }
std::int64_t PeerBytes::mostSent() const { return *std::max_element(sent.begin(), sent.end()); }
double PeerBytes::meanReceived() const {
  return double(std::accumulate(received.begin(), received.end(), std::int64_t(0))) / double(received.size());
}

std::vector<std::set<int>> evenClaims(int peers, int experts) {
  std::vector<std::set<int>> claims(std::size_t(std::max(peers, 0)));
  for (int p = 0; p < peers; ++p)
    for (int e = 0; e < experts; ++e)
      if (peers <= experts ? e % peers == p : p % experts == e) claims[std::size_t(p)].insert(e);
  return claims;
}

PeerBytes allToAllBytes(const model::ModelConfig& config, const std::vector<std::set<int>>& claims) {
  const int n = int(claims.size());
  PeerBytes out(n);
  for (int i = 0; i < n; ++i) {
    const ContributionHeader header{std::string(64, 'r'), 1000000, modelPeerId(i), std::string(16, 'b'), "int8"};
    const auto bytes = contributionBytes(config, claims[std::size_t(i)], header);
    for (int j = 0; j < n; ++j)
      if (j != i) out.received[std::size_t(j)] += bytes;
    out.sent[std::size_t(i)] += bytes * (n - 1);
  }
  return out;
}

PeerBytes shardedBytes(const model::ModelConfig& config, const std::vector<std::set<int>>& claims, int replicas,
                       int audits, std::size_t* shardCount) {
  const int n = int(claims.size());
  const auto shards = planShards(config, shardElementsFor(config, n));
  if (shardCount) *shardCount = shards.size();
  std::vector<std::string> ids;
  std::map<std::string, int> index;
  std::map<int, std::set<std::string>> owners;
  for (int p = 0; p < n; ++p) {
    ids.push_back(modelPeerId(p));
    index[ids.back()] = p;
    for (int e : claims[std::size_t(p)]) owners[e].insert(ids.back());
  }
  const auto reducers = assignReducers(shards, ids, owners, std::string(16, 'f'), replicas);
  const auto sizes = shardFileSizes(shards);
  PeerBytes out(n);
  std::vector<std::set<int>> chosen(shards.size());
  for (std::size_t s = 0; s < shards.size(); ++s) {
    for (int k = 0; k < replicas && k < n; ++k) chosen[s].insert(index.at(reducers[s][std::size_t(k)]));
    for (int i = 0; i < n; ++i) {  // contributors send it to every reducer but themselves
      const auto bytes = carried(shards[s], sizes[s], claims[std::size_t(i)]);
      for (int r : chosen[s])
        if (r != i) out.received[std::size_t(r)] += bytes, out.sent[std::size_t(i)] += bytes;
    }
    const auto merged = shardFileBytes(shards[s], "f32", shardMetadata(shards[s].id, modelPeerId(0), "f32"));
    const int fetchers = n - int(chosen[s].size());
    for (int j = 0; j < n; ++j)
      if (!chosen[s].count(j)) out.received[std::size_t(j)] += merged;
    for (int r : chosen[s]) out.sent[std::size_t(r)] += merged * fetchers / int(chosen[s].size());  // split seeding
  }
  if (n > replicas) addAudits(shards, sizes, chosen, claims, audits, out);
  return out;
}

bool shardingPays(const model::ModelConfig& config, int peers, int replicas, int audits) {
  if (peers <= replicas) return false;
  const auto claims = evenClaims(peers, config.nExperts);
  return shardedBytes(config, claims, replicas, audits).mostReceived() < allToAllBytes(config, claims).mostReceived();
}

}  // namespace es::sync
