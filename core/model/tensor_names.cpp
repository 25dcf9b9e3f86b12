#include "core/model/tensor_names.h"

namespace es::model {
namespace {

// Consumes `prefix` from the front of `s`.
bool eat(std::string_view& s, std::string_view prefix) {
  if (s.substr(0, prefix.size()) != prefix) return false;
  s.remove_prefix(prefix.size());
  return true;
}

// Consumes a canonical decimal number (no sign, no leading zeros, < 10^6).
bool eatIndex(std::string_view& s, int& out) {
  std::size_t n = 0;
  while (n < s.size() && s[n] >= '0' && s[n] <= '9') ++n;
  if (n == 0 || n > 6 || (n > 1 && s[0] == '0')) return false;
  out = 0;
  for (std::size_t i = 0; i < n; ++i) out = out * 10 + (s[i] - '0');
  s.remove_prefix(n);
  return true;
}

}  // namespace

std::optional<ExpertRef> expertOf(std::string_view name) {
  ExpertRef ref;
  if (!eat(name, "layers.") || !eatIndex(name, ref.layer) || !eat(name, ".moe.experts.") ||
      !eatIndex(name, ref.expert) || !eat(name, "."))
    return std::nullopt;
  if (name != "w1" && name != "w2" && name != "w3") return std::nullopt;
  return ref;
}

std::string expertTensorName(int layer, int expert, std::string_view part) {
  return "layers." + std::to_string(layer) + ".moe.experts." + std::to_string(expert) + "." + std::string(part);
}

}  // namespace es::model
