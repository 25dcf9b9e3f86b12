// Writes small, valid seed inputs for every fuzz target with the project's own writers, so the
// fuzzers start from real files and tst_fuzz_corpus can assert that they still parse.
//   fuzz_make_seeds tests/fuzz/corpus
#include "core/checkpoint/safetensors.h"
#include "core/sync/contribution_file.h"
#include "core/sync/work_ledger.h"
#include "fuzz_corpus_constants.h"
#include "p2p/identity.h"
#include "p2p/identity_work.h"
#include "p2p/peer_record.h"

#include <libtorrent/bencode.hpp>
#include <libtorrent/entry.hpp>

#include <ATen/ATen.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <stdexcept>

namespace {

using namespace es;

void check(const Status& status) {
  if (!status) throw std::runtime_error(status.error());
}

void write(const std::string& path, const std::string& bytes) { std::ofstream(path, std::ios::binary) << bytes; }

// Deterministic values: the corpus does not change when regenerated.
at::Tensor ramp(at::IntArrayRef shape, double scale) {
  return at::arange(0, c10::multiply_integers(shape), at::kFloat).reshape(shape).sin().mul(scale);
}

void safetensorsSeeds(const std::string& dir) {
  check(ckpt::saveSafetensors(dir + "/seed-mixed.safetensors",
                              {{"w", ramp({2, 3}, 1.0)},
                               {"b", ramp({4}, 1.0).to(at::kBFloat16)},
                               {"ids", at::arange(3, at::kLong)},
                               {"empty", at::zeros({0, 5}, at::kByte)},
                               {"h", ramp({2}, 1.0).to(at::kHalf)},
                               {"i", at::ones({2, 2}, at::kInt)},
                               {"c", at::ones({3}, at::kChar)}},
                              {{"format", "pt"}, {"note", "seed"}}));
  check(ckpt::saveSafetensors(dir + "/seed-metadata-only.safetensors", {}, {{"k", "v"}}));
}

void contributionSeeds(const std::string& dir) {
  const ckpt::NamedTensors deltas = {{"layers.0.attn.wq", ramp({8, 16}, 1e-3)},
                                     {"layers.0.moe.experts.1.w1", ramp({16, 8}, 2e-3)},
                                     {"norm.weight", ramp({16}, 1e-4)},
                                     {"zero.row", at::zeros({2, 4})}};
  for (const char* codec : {"f32", "bf16", "int8"}) {
    const sync::ContributionHeader header{fuzz::kRunId, 7, "peer-0123abcd", "00ff00ff00ff00ff", codec};
    check(sync::saveContribution(dir + "/seed-" + codec + ".safetensors", header, deltas));
  }
  // Issue 39's sparse codec: chunks of 16, 4 kept (the tensors hold 2-8 chunks).
  const sync::ContributionHeader sparse{fuzz::kRunId, 7, "peer-0123abcd", "00ff00ff00ff00ff", "sparse/4/16"};
  check(sync::saveContribution(dir + "/seed-sparse.safetensors", sparse, deltas));
}

p2p::PeerRecord record(const p2p::Identity& id, std::int64_t seq, bool full) {
  p2p::PeerRecord r;
  r.run = fuzz::kRunId;
  r.pk = id.publicKey();
  r.seq = seq;
  r.round = 12;
  r.leaseUntil = 14;
  if (full) {
    r.claims = {0, 3};
    r.contrib = {{11, std::string(40, 'a')}, {12, std::string(64, 'b')}};
    r.snapshot = {{10, std::string(40, 'c')}};
    r.merged = {{11, std::string(16, 'd')}};
    r.sets = {{11, std::string(16, 'e')}};
    r.outputs = {{11, std::string(64, 'f')}};
    r.stats = {600, 1228800, 41234, 5200};
    r.freeMemory = 1 << 30;
    r.work = p2p::solveIdentityWork(id.publicKey(), 8);
  }
  auto bytes = p2p::signRecord(r, id);
  if (!bytes) throw std::runtime_error(bytes.error());
  return r;
}

std::string signedRecord(const p2p::Identity& id, std::int64_t seq, bool full) {
  return *p2p::signRecord(record(id, seq, full), id);
}

std::string frame(const std::string& bytes) {
  return std::string{static_cast<char>(bytes.size() >> 8), static_cast<char>(bytes.size() & 0xff)} + bytes;
}

void recordAndGossipSeeds(const std::string& recordDir, const std::string& gossipDir) {
  const auto alice = p2p::Identity::fromSeed({1});
  const auto bob = p2p::Identity::fromSeed({2});
  write(recordDir + "/seed-minimal", signedRecord(alice, 1, false));
  write(recordDir + "/seed-full", signedRecord(bob, 9, true));

  lt::entry handshake(lt::entry::dictionary_t);
  handshake["m"]["es_record"] = 31;
  handshake["m"]["ut_metadata"] = 2;
  handshake["p"] = 6881;
  std::string hs;
  lt::bencode(std::back_inserter(hs), handshake);
  // A newer record of alice, a replay of her old one, bob's, and bob's again (duplicate).
  write(gossipDir + "/seed-records", frame(hs) + frame(signedRecord(alice, 2, true)) +
                                         frame(signedRecord(alice, 1, false)) + frame(signedRecord(bob, 9, true)) +
                                         frame(signedRecord(bob, 9, true)));
  write(gossipDir + "/seed-one", frame(hs) + frame(signedRecord(alice, 1, false)));
}

}  // namespace

// Ledgers as merges build them: one sender, and three with different standing.
void workLedgerSeeds(const std::string& dir) {
  sync::WorkLedger one = sync::WorkLedger{}.after(1, {"a1b2"});
  write(dir + "/seed-one.txt", one.encode());
  sync::WorkLedger three;
  for (std::int64_t round = 1; round <= 12; ++round)
    three = three.after(round, round % 3 ? std::vector<std::string>{std::string(64, 'c'), "peer-b"}
                                         : std::vector<std::string>{"peer-a"});
  write(dir + "/seed-three.txt", three.encode());
}

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: fuzz_make_seeds CORPUS_DIR\n");
    return 2;
  }
  const std::string dir = argv[1];
  try {
    safetensorsSeeds(dir + "/safetensors");
    contributionSeeds(dir + "/contribution");
    recordAndGossipSeeds(dir + "/peer_record", dir + "/gossip");
    workLedgerSeeds(dir + "/work_ledger");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz_make_seeds: %s\n", e.what());
    return 1;
  }
  return 0;
}
