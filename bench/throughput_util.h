// Helpers of bench/train_throughput: child processes, `name: value` parsing, the GEMM peak and
// the training FLOP model. Kept apart from main so each file stays small.
#pragma once

#include "core/model/model_config.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace es::model {
enum class ExpertDispatch;  // core/model/moe_layer.h
}

namespace es::bench {

// `name: value [unit]` lines of a child's stdout, value parsed as the first number after ':'.
using Figures = std::map<std::string, double>;

// Runs `argv` through popen (stdout captured, stderr passed through) with `env` prefixed as
// NAME=value pairs. Returns the parsed figures, or nullopt when the child failed. Adds
// "other_cpu_load": cores kept busy by other processes while the child ran (/proc/stat busy time
// minus the child's and our own CPU time, over the wall time) — the noise on a shared machine.
std::optional<Figures> runChild(const std::vector<std::string>& argv, const std::vector<std::string>& env = {});

// Quotes one argument for /bin/sh.
std::string shellQuote(const std::string& arg);

// Peak resident set of this process, in bytes (getrusage: Linux reports KiB).
std::int64_t peakRssBytes();

// torch::mm of two n×n matrices at the current torch thread count: the best of a few timed
// blocks, in GFLOP/s (2·n³ per product). "Best" because it stands for the machine's peak. On a
// GPU ("cuda", "cuda:N") in bf16 — the peak that MFU is measured against — with n = 8192.
double gemmGflops(int n = 2048, const std::string& device = "cpu");

// Training FLOPs per token for forward + backward with every expert trainable:
//   6 · N_active  +  12 · L · T · d
// N_active (ModelConfig::activeParametersPerToken) = per layer wqkv + wo (4d²), router (E·d),
// k experts (k·3·d·hidden), plus lm_head (V·d); the embedding lookup has no multiply. Each
// weight costs 2 FLOPs per token forward (multiply-add) and 4 backward (input grad + weight
// grad): 6 per parameter. Attention's QKᵀ and AV add 2·T·d each per token and layer forward
// (computed over the full T×T, the causal mask does not skip work here), 3× that with backward.
// Elementwise work (RMSNorm, RoPE, softmax, SwiGLU, AdamW) is not counted: it is memory-bound.
double trainFlopsPerToken(const model::ModelConfig& config);

// Analytic memory saved by training only `trainable` of the experts: each frozen expert in each
// layer has no gradient and no two AdamW moments (`copies` = 3 fp32 copies of its parameters).
// The moments live all the time; the gradients only from their layer's backward to the next
// step's start, so they may miss the peak (copies = 2 is the lower bound).
std::int64_t frozenExpertSavingBytes(const model::ModelConfig& config, int trainable, int copies = 3);

// The model a throughput run trains, by name: "default" keeps the run's; "gpu-1b" is the
// GPU-sized config of issue 16 (16 experts, top-2, seq 1024, d 1024, 12 layers, hidden 1536:
// 0.97 B parameters, 0.17 B active per token) with batch 16 (16 Ki tokens a step). The vocabulary
// stays the run's (its tokenizer made the data). False for an unknown name.
bool applyModelPreset(const std::string& name, model::ModelConfig& model, int& batchSize);

// --dispatch auto|loop|batched|grouped (core/model/moe_layer.h): how the experts' products are
// launched. False for another name.
bool parseExpertDispatch(const std::string& name, model::ExpertDispatch& dispatch);

}  // namespace es::bench
