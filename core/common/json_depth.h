// Nesting depth of JSON text, measured without parsing it. Why: nlohmann parses iteratively but
// serializes (dump(), used in our error messages and to hand sub-objects on) recursively, so a
// stranger's `[[[[…]]]]` of a million levels (2 MB) overflows the stack — found while fuzzing
// (ISSUE 14). Callers refuse text deeper than their format needs before parsing it.
#pragma once

#include <cstddef>
#include <string_view>

namespace es {

// Depth of the deepest array/object ('[' or '{' outside strings). Exact for valid JSON; for
// invalid JSON it is some number, and the parse that follows fails anyway.
inline std::size_t jsonNestingDepth(std::string_view text) {
  std::size_t depth = 0, deepest = 0;
  bool inString = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (inString) {
      if (c == '\\')
        ++i;  // the escaped character cannot end the string
      else if (c == '"')
        inString = false;
    } else if (c == '"') {
      inString = true;
    } else if (c == '[' || c == '{') {
      if (++depth > deepest) deepest = depth;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

}  // namespace es
