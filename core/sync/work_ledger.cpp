#include "core/sync/work_ledger.h"

#include <algorithm>
#include <charconv>
#include <sstream>

namespace es::sync {
namespace {

const char* const kHeader = "expertswarm-work-ledger 1";

bool isSenderChar(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-' || c == '_' || c == '.';
}

bool isSender(const std::string& s) {
  return !s.empty() && s.size() <= WorkLedger::kMaxSenderChars && std::all_of(s.begin(), s.end(), isSenderChar);
}

// A decimal integer in [0, max], the whole of `text` (no sign, no spaces, no leading zeros).
bool parseCount(const std::string& text, std::int64_t max, std::int64_t& out) {
  if (text.empty() || (text.size() > 1 && text[0] == '0')) return false;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && end == text.data() + text.size() && out >= 0 && out <= max;
}

std::vector<std::string> splitLines(const std::string& text) {
  std::vector<std::string> lines;
  std::size_t start = 0;
  while (start < text.size()) {
    const auto end = text.find('\n', start);
    if (end == std::string::npos) {
      lines.push_back(text.substr(start));  // no final newline: decode refuses it below
      break;
    }
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

}  // namespace

std::int64_t WorkLedger::mergedRounds(const std::string& sender) const {
  const auto it = entries_.find(sender);
  return it == entries_.end() ? 0 : it->second.merged;
}

double WorkLedger::weightOf(const std::string& sender) const {
  return static_cast<double>(std::min(mergedRounds(sender), kWeightCap));
}

WorkLedger WorkLedger::after(std::int64_t round, const std::vector<std::string>& accepted) const {
  WorkLedger out;
  for (const auto& [sender, entry] : entries_)
    if (entry.lastRound > round - kForgetRounds) out.entries_.emplace(sender, entry);
  for (const auto& sender : accepted) {
    auto& entry = out.entries_[sender];
    if (entry.lastRound == round && entry.merged > 0) continue;  // a round counts once
    ++entry.merged;
    entry.lastRound = round;
  }
  if (out.entries_.size() <= kMaxEntries) return out;
  // Keep the most merged; among equals the most recently merged, then the lower id.
  std::vector<std::pair<std::string, Entry>> ranked(out.entries_.begin(), out.entries_.end());
  std::stable_sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) {
    if (a.second.merged != b.second.merged) return a.second.merged > b.second.merged;
    return a.second.lastRound > b.second.lastRound;
  });
  ranked.resize(kMaxEntries);
  out.entries_ = {ranked.begin(), ranked.end()};
  return out;
}

std::string WorkLedger::encode() const {
  std::ostringstream text;
  text << kHeader << '\n';
  for (const auto& [sender, entry] : entries_) text << sender << ' ' << entry.merged << ' ' << entry.lastRound << '\n';
  return text.str();
}

std::int64_t WorkLedger::maxEncodedBytes(std::int64_t round) {
  const auto digits = static_cast<std::int64_t>(std::to_string(std::max<std::int64_t>(round, 1)).size());
  const auto line = static_cast<std::int64_t>(kMaxSenderChars) + 1 + digits + 1 + digits + 1;
  return static_cast<std::int64_t>(std::string(kHeader).size()) + 1 + static_cast<std::int64_t>(kMaxEntries) * line;
}

Expected<WorkLedger> WorkLedger::decode(const std::string& text, std::int64_t round) {
  if (text.empty() || text.back() != '\n') return makeError("work ledger: not newline-terminated text");
  const auto lines = splitLines(text);
  if (lines.empty() || lines.front() != kHeader) return makeError("work ledger: missing header");
  if (lines.size() - 1 > kMaxEntries)
    return makeError("work ledger: more than " + std::to_string(kMaxEntries) + " senders");
  WorkLedger out;
  std::string previous;
  for (std::size_t i = 1; i < lines.size(); ++i) {
    const std::string where = "work ledger line " + std::to_string(i + 1) + ": ";
    std::istringstream fields(lines[i]);
    std::string sender, merged, last, extra;
    if (!(fields >> sender >> merged >> last) || (fields >> extra) || lines[i] != sender + ' ' + merged + ' ' + last)
      return makeError(where + "not \"<sender> <merged> <last round>\"");
    if (!isSender(sender)) return makeError(where + "bad sender id");
    if (i > 1 && !(previous < sender)) return makeError(where + "senders not in strictly ascending order");
    Entry entry;
    if (!parseCount(last, round, entry.lastRound) || entry.lastRound < 1)
      return makeError(where + "last round must be 1.." + std::to_string(round));
    if (!parseCount(merged, entry.lastRound, entry.merged) || entry.merged < 1)
      return makeError(where + "merged rounds must be 1..its last round");
    out.entries_.emplace(sender, entry);
    previous = sender;
  }
  return out;
}

}  // namespace es::sync
