// Text from the network or from a stranger's file, made safe for a log line, an error message or
// a ledger row (issue 14, item 3): in double quotes, at most `max` bytes of it, every byte outside
// printable ASCII shown as \xNN (a newline or an ANSI escape in a sender's name must not forge or
// hide a log line), and a cut said as "...(+N bytes)". Header-only so the Torch libraries use it.
#pragma once

#include <cstddef>
#include <cstdio>
#include <string>
#include <string_view>

namespace es {

inline std::string safeQuote(std::string_view text, std::size_t max = 80) {
  std::string out = "\"";
  const std::size_t kept = text.size() < max ? text.size() : max;
  for (std::size_t i = 0; i < kept; ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
      out += static_cast<char>(c);
    } else {
      char escaped[5];
      std::snprintf(escaped, sizeof escaped, "\\x%02x", c);
      out += escaped;
    }
  }
  out += '"';
  if (kept < text.size()) out += "...(+" + std::to_string(text.size() - kept) + " bytes)";
  return out;
}

}  // namespace es
