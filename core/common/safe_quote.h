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

// A stranger's name that is to become a file name (a fetched torrent's one file): 1..max bytes
// of [A-Za-z0-9._-], and not "." or "..". Everything our own peers publish passes
// ("round-3-<peer id>.safetensors", "snapshot-round-…"); a path separator, a control byte or a
// name long enough to flood a log line does not.
inline bool isPlainName(std::string_view name, std::size_t max = 128) {
  if (name.empty() || name.size() > max || name == "." || name == "..") return false;
  for (const char c : name)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
          c == '-'))
      return false;
  return true;
}

}  // namespace es
