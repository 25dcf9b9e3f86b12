// Private to run_manifest*.cpp: strict readers for the manifest's JSON objects. A reader stores
// a value or says what is wrong with it; readObject prefixes the field's dotted path, so every
// error names the field (`swarm.deadline.factor: must be a number in [1, 100], got 0`).
#pragma once

#include "core/train/run_manifest.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <functional>
#include <map>
#include <sstream>
#include <string>

namespace es::train::manifest {

using nlohmann::json;
using Reader = std::function<std::string(const json&)>;  // "" = stored, else the problem
using Readers = std::map<std::string, Reader>;

inline std::string join(const std::string& where, const std::string& key) {
  return where.empty() ? key : where + "." + key;
}

// Reads the keys of `object` (at dotted path `where`) through `readers`; anything else is an error.
inline std::string readObject(const json& object, const std::string& where, const Readers& readers) {
  if (!object.is_object()) return (where.empty() ? "the manifest" : where) + ": must be an object";
  for (const auto& [key, value] : object.items()) {
    auto it = readers.find(key);
    if (it == readers.end()) return "unknown key \"" + join(where, key) + "\"";
    if (auto problem = it->second(value); !problem.empty()) {
      // A nested object's reader already names the full path (`unknown key "swarm.x"`).
      if (problem.find(join(where, key)) != std::string::npos) return problem;
      return join(where, key) + ": " + problem + ", got " + value.dump();
    }
  }
  return {};
}

template <typename T>
Reader integer(T& out, std::int64_t lo, std::int64_t hi) {
  return [&out, lo, hi](const json& v) -> std::string {
    if (!v.is_number_integer() || v.get<std::int64_t>() < lo || v.get<std::int64_t>() > hi ||
        (v.is_number_unsigned() && v.get<std::uint64_t>() > std::uint64_t(hi)))
      return "must be an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
    out = static_cast<T>(v.get<std::int64_t>());
    return {};
  };
}

inline std::string number(double x) {
  std::ostringstream out;
  out << x;
  return out.str();
}

inline Reader real(double& out, double lo, double hi) {
  return [&out, lo, hi](const json& v) -> std::string {
    const bool ok = v.is_number() && std::isfinite(v.get<double>()) && v.get<double>() >= lo && v.get<double>() <= hi;
    if (!ok) return "must be a number in [" + number(lo) + ", " + number(hi) + "]";
    out = v.get<double>();
    return {};
  };
}

// A non-empty string of at most `maxBytes` without NUL bytes.
inline Reader text(std::string& out, std::size_t maxBytes) {
  return [&out, maxBytes](const json& v) -> std::string {
    if (!v.is_string() || v.get<std::string>().empty() || v.get<std::string>().size() > maxBytes ||
        v.get<std::string>().find('\0') != std::string::npos)
      return "must be a non-empty string of at most " + std::to_string(maxBytes) + " bytes";
    out = v.get<std::string>();
    return {};
  };
}

// The "swarm" object (run_manifest_swarm.cpp); the cross-checks against the model come after.
std::string readSwarmPolicy(const json& object, SwarmPolicy& out);
std::string checkSwarmPolicy(const SwarmPolicy& policy, const model::ModelConfig& model);

// data.train_corpus[i] / data.val_corpus as written: relative, no "..", no empty name
// (run_manifest_files.cpp). `field` names it in the error.
std::string checkCorpusPathSyntax(const std::string& path, const std::string& field);

}  // namespace es::train::manifest
