#include "core/checkpoint/training_state.h"

#include <ATen/ATen.h>

#include <charconv>
#include <set>

namespace es::ckpt {
namespace {

constexpr const char* kFormat = "expertswarm-training-state";
constexpr const char* kVersion = "1";
constexpr const char* kModelPrefix = "model.";
constexpr const char* kExpAvgPrefix = "adam.exp_avg.";
constexpr const char* kExpAvgSqPrefix = "adam.exp_avg_sq.";
constexpr const char* kRngName = "rng.cpu";
const std::set<std::string> kReservedKeys = {"format", "version", "step", "data_cursor"};

bool startsWith(const std::string& s, const std::string& prefix) { return s.compare(0, prefix.size(), prefix) == 0; }

std::set<std::string> namesOf(const NamedTensors& tensors) {
  std::set<std::string> names;
  for (const auto& entry : tensors) names.insert(entry.first);
  return names;
}

// Whole-string integer parse: "12x", " 12", "+1" and out-of-range values are errors, not 12 / 0.
template <typename T>
Expected<T> parseInteger(const Metadata& metadata, const std::string& key) {
  const auto it = metadata.find(key);
  if (it == metadata.end()) return makeError("training state has no \"" + key + "\" metadata");
  const std::string& text = it->second;
  T value{};
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) {
    return makeError("training state metadata \"" + key + "\" is not a valid integer: \"" + text + "\"");
  }
  return value;
}

Status addPrefixed(NamedTensors& out, const NamedTensors& tensors, const std::string& prefix, const char* what) {
  for (const auto& [name, tensor] : tensors) {
    if (name.empty()) return makeError(std::string("training state: a ") + what + " tensor has an empty name");
    out.emplace_back(prefix + name, tensor);
  }
  return {};
}

}  // namespace

Status saveTrainingState(const std::string& path, const TrainingState& state) {
  for (const auto& entry : state.extra) {
    if (kReservedKeys.count(entry.first)) {
      return makeError("training state: extra metadata key \"" + entry.first + "\" is reserved");
    }
  }
  // Refuse to write a file that loadTrainingState would reject.
  if (namesOf(state.expAvg) != namesOf(state.expAvgSq)) {
    return makeError("training state: exp_avg and exp_avg_sq must cover the same tensor names");
  }
  if (state.rngState.defined() && state.rngState.scalar_type() != at::kByte) {
    return makeError("training state: rng state must be a uint8 tensor");
  }

  NamedTensors all;
  all.reserve(state.weights.size() + state.expAvg.size() + state.expAvgSq.size() + 1);
  if (auto s = addPrefixed(all, state.weights, kModelPrefix, "model"); !s) return s;
  if (auto s = addPrefixed(all, state.expAvg, kExpAvgPrefix, "exp_avg"); !s) return s;
  if (auto s = addPrefixed(all, state.expAvgSq, kExpAvgSqPrefix, "exp_avg_sq"); !s) return s;
  if (state.rngState.defined()) all.emplace_back(kRngName, state.rngState);

  Metadata metadata = state.extra;
  // From std::string, not const char*: GCC 12 warns (-Wstringop-overflow) on the latter in C++20.
  metadata["format"] = std::string(kFormat);
  metadata["version"] = std::string(kVersion);
  metadata["step"] = std::to_string(state.step);
  metadata["data_cursor"] = std::to_string(state.dataCursor);
  return saveSafetensors(path, all, metadata);
}

Expected<TrainingState> loadTrainingState(const std::string& path) {
  auto file = loadSafetensors(path);
  if (!file) return makeError(file.error());
  const Metadata& metadata = file->metadata;
  const std::string where = "\"" + path + "\": ";

  const auto format = metadata.find("format");
  if (format == metadata.end() || format->second != kFormat) {
    return makeError(where + "not a training state (metadata \"format\" is not \"" + kFormat + "\")");
  }
  const auto version = metadata.find("version");
  if (version == metadata.end() || version->second != kVersion) {
    return makeError(where + "unsupported training state version \"" +
                     (version == metadata.end() ? std::string() : version->second) + "\" (expected " + kVersion + ")");
  }

  TrainingState state;
  auto step = parseInteger<std::int64_t>(metadata, "step");
  if (!step) return makeError(where + step.error());
  auto cursor = parseInteger<std::uint64_t>(metadata, "data_cursor");
  if (!cursor) return makeError(where + cursor.error());
  state.step = *step;
  state.dataCursor = *cursor;
  for (const auto& entry : metadata) {
    if (!kReservedKeys.count(entry.first)) state.extra.insert(entry);
  }

  // Tensors arrive sorted by full name, so each group stays sorted after stripping its prefix.
  for (auto& [name, tensor] : file->tensors) {
    if (startsWith(name, kExpAvgSqPrefix)) {
      state.expAvgSq.emplace_back(name.substr(std::string(kExpAvgSqPrefix).size()), std::move(tensor));
    } else if (startsWith(name, kExpAvgPrefix)) {
      state.expAvg.emplace_back(name.substr(std::string(kExpAvgPrefix).size()), std::move(tensor));
    } else if (startsWith(name, kModelPrefix)) {
      state.weights.emplace_back(name.substr(std::string(kModelPrefix).size()), std::move(tensor));
    } else if (name == kRngName) {
      if (tensor.scalar_type() != at::kByte) return makeError(where + "\"rng.cpu\" must be a U8 tensor");
      state.rngState = std::move(tensor);
    } else {
      return makeError(where + "unexpected tensor \"" + name + "\" in training state");
    }
  }

  const std::set<std::string> avg = namesOf(state.expAvg);
  const std::set<std::string> avgSq = namesOf(state.expAvgSq);
  for (const auto& name : avg) {
    if (!avgSq.count(name))
      return makeError(where + "adam.exp_avg." + name + " has no matching adam.exp_avg_sq." + name);
  }
  for (const auto& name : avgSq) {
    if (!avg.count(name)) return makeError(where + "adam.exp_avg_sq." + name + " has no matching adam.exp_avg." + name);
  }
  return state;
}

}  // namespace es::ckpt
