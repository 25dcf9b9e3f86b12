#include "core/sync/validate.h"

#include "core/common/safe_quote.h"

#include "core/model/tensor_names.h"
#include "core/sync/sparse_layout.h"
#include "core/sync/sum_of_squares.h"

#include <torch/torch.h>

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <stdexcept>
#include <unordered_map>

// Every peer validates the same contributions and must reach the same verdicts, so the norm is a
// plain sequential float64 loop (a torch reduction's rounding depends on the kernel and threads).

namespace es::sync {
namespace {

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

std::string shapeText(at::IntArrayRef sizes) {
  std::string out = "[";
  for (std::size_t i = 0; i < sizes.size(); ++i) out += (i ? ", " : "") + std::to_string(sizes[i]);
  return out + "]";
}

// A contiguous float32 CPU view of a tensor already known to be float32.
at::Tensor cpuFloat(const at::Tensor& t) { return t.detach().to(at::kCPU).contiguous(); }

// Every check but the norm bound, in the documented order; the reason, or empty when it passes.
std::string checkAllButNorm(const ContributionHeader& header, const NamedTensors& deltas,
                            const std::unordered_map<std::string, const at::Tensor*>& base,
                            const std::set<int>& senderClaims, const RoundContext& round) {
  if (header.run != round.run) return "wrong run: " + safeQuote(header.run) + ", expected " + safeQuote(round.run);
  if (header.round != round.round)
    return "wrong round: " + std::to_string(header.round) + ", expected " + std::to_string(round.round);
  if (header.baseHash != round.baseHash)
    return "wrong base hash: " + safeQuote(header.baseHash) + ", expected " + safeQuote(round.baseHash);

  std::set<std::string> seen;
  for (const auto& [name, tensor] : deltas) {
    if (!seen.insert(name).second) return "duplicate tensor " + safeQuote(name);
    if (const auto expert = model::expertOf(name); expert && senderClaims.count(expert->expert) == 0)
      return "tensor " + safeQuote(name) + " belongs to expert " + std::to_string(expert->expert) +
             ", not claimed by the sender";
    if (base.count(name) == 0) return "unknown tensor " + safeQuote(name);
  }
  for (const auto& [name, tensor] : deltas) {
    if (!tensor.defined()) return "tensor " + safeQuote(name) + " is undefined";
    const at::Tensor& expected = *base.at(name);
    if (tensor.sizes() != expected.sizes())
      return "shape " + shapeText(tensor.sizes()) + " of " + safeQuote(name) + ", expected " +
             shapeText(expected.sizes());
    if (tensor.scalar_type() != at::kFloat)
      return "dtype " + std::string(c10::toString(tensor.scalar_type())) + " of " + safeQuote(name) +
             ", expected Float";
  }
  for (const auto& [name, tensor] : deltas) {
    const at::Tensor t = cpuFloat(tensor);
    const float* p = t.data_ptr<float>();
    for (std::int64_t i = 0, n = t.numel(); i < n; ++i) {
      if (!std::isfinite(p[i])) return "non-finite value in " + safeQuote(name);
    }
  }
  return {};
}

std::string checkNorm(double norm, double medianNorm, const ValidationPolicy& policy) {
  if (medianNorm > 0.0) {
    const double relative = policy.relativeNormBound * medianNorm;
    if (relative < policy.absoluteNormCap && norm > relative)
      return "norm " + number(norm) + " > bound " + number(relative) + " (" + number(policy.relativeNormBound) +
             " x median " + number(medianNorm) + ")";
  }
  if (norm > policy.absoluteNormCap)
    return "norm " + number(norm) + " > bound " + number(policy.absoluteNormCap) + " (absolute cap)";
  return {};
}

// Per tensor, the L2 norm of its delta (sum_of_squares.h's order).
std::vector<double> perTensorNorms(const NamedTensors& deltas) {
  std::vector<double> norms;
  for (const auto& [name, tensor] : deltas) norms.push_back(std::sqrt(sumOfSquares(tensor)));
  return norms;
}

// The global norm from the per-tensor norms, their squares summed in the contribution's tensor
// order (the sender's file order: every receiver reads the same file, so every peer adds them
// alike). n·n is not bit-for-bit the loop's sum of squares, but it is the same on every peer.
double combinedNorm(const std::vector<double>& tensorNorms) {
  double sumSquares = 0.0;
  for (const double n : tensorNorms) sumSquares += n * n;
  return std::sqrt(sumSquares);
}

// The low median (the lower middle value for an even count): one outlier can never raise the
// bound, not even in a round of two, where the mean of the middle values would include it.
double lowMedian(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[(values.size() - 1) / 2];
}

// The largest |value| of a float32 tensor (a max is exact in any order: every peer agrees).
double maxAbs(const at::Tensor& tensor) {
  const at::Tensor t = cpuFloat(tensor);
  const float* p = t.data_ptr<float>();
  float most = 0.0f;
  for (std::int64_t i = 0, n = t.numel(); i < n; ++i) most = std::max(most, std::abs(p[i]));
  return most;
}

// The per-weight ceiling of a contribution in `codec`: a sparse run's for its sparse codec (of the
// same wait rounds: keep·W² ≤ chunk holds for it as well), the one-round ceiling for any other.
const UpdateCeiling& ceilingFor(const std::string& codec, const ValidationPolicy& policy) {
  if (policy.sparseWaitRounds < 1) return policy.ceiling;
  const auto spec = parseSparseCodec(codec);
  return spec && sparseWaitRounds(*spec) == policy.sparseWaitRounds ? policy.sparseCeiling : policy.ceiling;
}

// Every weight within what the run's optimizer can move it in a round, then the no-work floor.
// Checked tensors are known, shaped and finite (checkAllButNorm).
void checkCeiling(const NamedTensors& deltas, const std::unordered_map<std::string, const at::Tensor*>& base,
                  const ValidationPolicy& policy, const std::string& codec, double norm, BaseMaxAbs& baseMaxAbs,
                  ContributionCheck& check) {
  std::int64_t elements = 0;
  for (const auto& [name, delta] : deltas) {
    elements += delta.numel();
    check.reason = ceilingBreach(name, delta, *base.at(name), codec, policy, baseMaxAbs);
    if (!check.reason.empty()) return;
  }
  check.reason = noWorkReason(norm, elements, policy);
  check.noWork = !check.reason.empty();
}

// `reference`: the tensor's median, or for an expert's tensor the round's scale at its size when
// that is larger (`what` says which).
std::string checkTensorNorm(const std::string& name, double norm, double reference, const char* what,
                            const ValidationPolicy& policy) {
  if (!(reference > 0.0)) return {};  // nobody changed it: the global bound covers it
  const double bound = policy.relativeNormBound * reference;
  if (norm <= bound) return {};
  return "norm " + number(norm) + " of " + safeQuote(name) + " > bound " + number(bound) + " (" +
         number(policy.relativeNormBound) + " x " + what + " " + number(reference) + ")";
}

std::unordered_map<std::string, const at::Tensor*> indexOf(const NamedTensors& tensors) {
  std::unordered_map<std::string, const at::Tensor*> index;
  for (const auto& [name, tensor] : tensors) index.emplace(name, &tensor);
  return index;
}

Verdict verdictOf(std::string reason, bool noWork = false) {
  return Verdict{reason.empty(), std::move(reason), noWork};
}

// FNV-1a, 64 bit.
struct Fnv1a {
  std::uint64_t state = 14695981039346656037ull;
  void add(const void* data, std::size_t size) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (std::size_t i = 0; i < size; ++i) state = (state ^ p[i]) * 1099511628211ull;
  }
  void addU64(std::uint64_t v) {  // fixed width, little-endian: unambiguous framing
    unsigned char bytes[8];
    for (int i = 0; i < 8; ++i) bytes[i] = static_cast<unsigned char>(v >> (8 * i));
    add(bytes, 8);
  }
  void addString(const std::string& s) {
    addU64(s.size());
    add(s.data(), s.size());
  }
};

}  // namespace

double BaseMaxAbs::of(const std::string& name, const at::Tensor& baseTensor) {
  const auto known = seen_.find(name);
  return known != seen_.end() ? known->second : seen_.emplace(name, maxAbs(baseTensor)).first->second;
}

std::string ceilingBreach(const std::string& name, const at::Tensor& delta, const at::Tensor& baseTensor,
                          const std::string& codec, const ValidationPolicy& policy, BaseMaxAbs& baseMaxAbs) {
  const UpdateCeiling& c = ceilingFor(codec, policy);
  const double moved = maxAbs(delta), allowed = c.perElement(baseMaxAbs.of(name, baseTensor));
  if (moved <= allowed) return {};
  const std::string rounds =
      &c == &policy.sparseCeiling ? std::to_string(policy.sparseWaitRounds) + " rounds" : "a round";
  return "moves a weight of " + safeQuote(name) + " by " + number(moved) + " > " + number(allowed) +
         ", the most AdamW moves it in " + rounds + " (lr sum " + number(c.lrSum) + ")";
}

std::string noWorkReason(double norm, std::int64_t elements, const ValidationPolicy& policy) {
  const double rms = elements > 0 ? norm / std::sqrt(double(elements)) : 0.0;
  const double floor = policy.noWorkFraction * policy.ceiling.lrSum;
  if (rms >= floor) return {};
  return "no work: RMS " + number(rms) + " < " + number(floor) + " (" + number(policy.noWorkFraction) +
         " x the round's lr sum)";
}

std::string normCapReason(double norm, const ValidationPolicy& policy) { return checkNorm(norm, 0.0, policy); }

double updateNorm(const NamedTensors& deltas) { return combinedNorm(perTensorNorms(deltas)); }

Verdict validate(const ContributionHeader& header, const NamedTensors& deltas, const NamedTensors& base,
                 const std::set<int>& senderClaims, const RoundContext& round, double medianNorm,
                 const ValidationPolicy& policy) {
  const auto check = checkContribution(header, deltas, base, senderClaims, round, policy);
  if (!check.reason.empty()) return verdictOf(check.reason, check.noWork);
  return verdictOf(checkNorm(check.norm, policy.ceiling.known() ? 0.0 : medianNorm, policy));
}

ContributionCheck checkContribution(const ContributionHeader& header, const NamedTensors& deltas,
                                    const NamedTensors& base, const std::set<int>& senderClaims,
                                    const RoundContext& round, const ValidationPolicy& policy, BaseMaxAbs* maxAbs) {
  ContributionCheck check;
  const auto index = indexOf(base);
  check.reason = checkAllButNorm(header, deltas, index, senderClaims, round);
  if (!check.reason.empty()) return check;
  const std::vector<double> norms = perTensorNorms(deltas);
  check.norm = combinedNorm(norms);
  if (!policy.figureShards.empty()) {
    check.figures = contributionFigures(deltas, policy.figureShards);
    check.norm = combineFigures(check.figures).norm;
  }
  for (std::size_t t = 0; t < deltas.size(); ++t) {
    check.tensorNorms.emplace_back(deltas[t].first, norms[t]);
    check.tensorElements.push_back(deltas[t].second.numel());
  }
  if (policy.ceiling.known()) {
    BaseMaxAbs own;
    checkCeiling(deltas, index, policy, header.codec, check.norm, maxAbs ? *maxAbs : own, check);
  }
  return check;
}

std::vector<Verdict> judgeRound(const std::vector<ContributionCheck>& checks, const ValidationPolicy& policy) {
  if (policy.ceiling.known()) {  // the checks held every weight to the ceiling: no head count bounds anything
    std::vector<Verdict> verdicts;
    for (const auto& check : checks)
      verdicts.push_back(check.reason.empty() ? verdictOf(normCapReason(check.norm, policy))
                                              : verdictOf(check.reason, check.noWork));
    return verdicts;
  }
  std::vector<double> passing, scales;  // scales: each passing contribution's norm per √element
  std::map<std::string, std::vector<double>> passingByTensor;
  for (const auto& check : checks) {
    if (!check.reason.empty()) continue;
    passing.push_back(check.norm);
    std::int64_t elements = 0;
    for (const auto n : check.tensorElements) elements += n;
    scales.push_back(elements > 0 ? check.norm / std::sqrt(double(elements)) : 0.0);
    for (const auto& [name, norm] : check.tensorNorms) passingByTensor[name].push_back(norm);
  }
  std::map<std::string, double> tensorMedians;
  for (auto& [name, values] : passingByTensor) tensorMedians[name] = lowMedian(std::move(values));
  const double median = passing.empty() ? 0.0 : lowMedian(std::move(passing));
  const double scale = scales.empty() ? 0.0 : lowMedian(std::move(scales));
  std::vector<Verdict> verdicts;
  for (const auto& check : checks) {
    std::string reason = check.reason;
    if (reason.empty()) reason = checkNorm(check.norm, median, policy);
    for (std::size_t t = 0; reason.empty() && t < check.tensorNorms.size(); ++t) {
      const auto& [name, norm] = check.tensorNorms[t];
      const double median = tensorMedians.at(name);
      // validate.h: an expert's owner may have seen no tokens for it; its co-owner is not an outlier for that.
      const double floor = model::expertOf(name) && t < check.tensorElements.size()
                               ? scale * std::sqrt(double(check.tensorElements[t]))
                               : 0.0;
      reason = floor > median ? checkTensorNorm(name, norm, floor, "the round's scale at its size", policy)
                              : checkTensorNorm(name, norm, median, "its median", policy);
    }
    verdicts.push_back(verdictOf(std::move(reason)));
  }
  return verdicts;
}

std::vector<Verdict> validateRound(const std::vector<ContributionHeader>& headers,
                                   const std::vector<NamedTensors>& deltas, const NamedTensors& base,
                                   const std::vector<std::set<int>>& senderClaims, const RoundContext& round,
                                   const ValidationPolicy& policy) {
  if (deltas.size() != headers.size() || senderClaims.size() != headers.size())
    throw std::invalid_argument("validateRound: headers, deltas and claims differ in length");
  std::vector<ContributionCheck> checks;
  BaseMaxAbs maxAbs;
  for (std::size_t i = 0; i < headers.size(); ++i)
    checks.push_back(checkContribution(headers[i], deltas[i], base, senderClaims[i], round, policy, &maxAbs));
  return judgeRound(checks, policy);
}

std::string stateFingerprint(const NamedTensors& tensors) {
  std::vector<const std::pair<std::string, at::Tensor>*> sorted;
  for (const auto& entry : tensors) sorted.push_back(&entry);
  std::stable_sort(sorted.begin(), sorted.end(), [](const auto* a, const auto* b) { return a->first < b->first; });
  Fnv1a hash;
  hash.addU64(sorted.size());
  for (const auto* entry : sorted) {
    const at::Tensor t = entry->second.detach().to(at::kCPU).contiguous();
    hash.addString(entry->first);
    hash.addString(std::string(c10::toString(t.scalar_type())));
    hash.addU64(static_cast<std::uint64_t>(t.dim()));
    for (const std::int64_t size : t.sizes()) hash.addU64(static_cast<std::uint64_t>(size));
    const std::size_t bytes = static_cast<std::size_t>(t.numel()) * t.element_size();
    hash.addU64(bytes);
    hash.add(t.data_ptr(), bytes);
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016" PRIx64, hash.state);
  return hex;
}

}  // namespace es::sync
