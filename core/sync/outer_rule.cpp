#include "core/sync/outer_rule.h"

#include "core/model/tensor_names.h"

namespace es::sync {

std::optional<OuterRule::On> parseOuterOn(const std::string& name) {
  if (name == "shared") return OuterRule::On::Shared;
  if (name == "experts") return OuterRule::On::Experts;
  if (name == "all") return OuterRule::On::All;
  return std::nullopt;
}

bool takesOuterStep(const OuterRule& rule, const std::string& name) {
  if (rule.plain()) return false;
  const bool expert = model::isExpertTensor(name);
  return rule.on == OuterRule::On::All ||
         (expert ? rule.on == OuterRule::On::Experts : rule.on == OuterRule::On::Shared);
}

}  // namespace es::sync
