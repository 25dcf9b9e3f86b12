#include "core/checkpoint/round_dirs.h"

#include "core/common/atomic_file.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <optional>

namespace es::node::round_dirs {
namespace {

namespace fs = std::filesystem;

constexpr const char* kPrefix = "round-";
constexpr const char* kOld = ".old";

struct Parsed {
  std::int64_t round = 0;
  bool old = false;
};

// "round-<digits>" or "round-<digits>.old"; anything else (".partial", strangers) is not a round.
std::optional<Parsed> parse(const std::string& fileName) {
  std::string rest = fileName;
  if (rest.rfind(kPrefix, 0) != 0) return std::nullopt;
  rest.erase(0, std::char_traits<char>::length(kPrefix));
  Parsed p;
  const auto oldLen = std::char_traits<char>::length(kOld);
  if (rest.size() > oldLen && rest.compare(rest.size() - oldLen, oldLen, kOld) == 0) {
    p.old = true;
    rest.resize(rest.size() - oldLen);
  }
  if (rest.empty() || rest.size() > 18 ||
      !std::all_of(rest.begin(), rest.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return std::nullopt;
  p.round = std::stoll(rest);  // ≤ 18 digits: fits, never throws
  return p;
}

Status fsError(const std::string& what, const std::string& path, const std::error_code& ec) {
  return makeError(what + " \"" + path + "\": " + ec.message());
}

// Step 4: the same round's ".old" copy, every complete round beyond the kKeptRounds newest, and
// ".partial" folders a kill left behind (one write at a time: none of them is in progress).
void prune(const std::string& stateDir, std::int64_t committed) {
  std::error_code ec;
  fs::remove_all(stateDir + "/" + name(committed) + kOld, ec);
  std::vector<fs::path> partials;
  for (const auto& entry : fs::directory_iterator(stateDir, ec)) {
    const auto file = entry.path().filename().string();
    if (file.rfind(kPrefix, 0) == 0 && file.size() > 8 && file.compare(file.size() - 8, 8, ".partial") == 0)
      partials.push_back(entry.path());
  }
  for (const auto& path : partials) fs::remove_all(path, ec);
  int kept = 0;
  for (const auto& dir : complete(stateDir))
    if (++kept > kKeptRounds) fs::remove_all(dir.path, ec);
}

}  // namespace

std::string name(std::int64_t round) {
  char text[32];
  std::snprintf(text, sizeof text, "round-%08lld", static_cast<long long>(round));
  return text;
}

Status commit(const std::string& stateDir, std::int64_t round, const std::function<Status(const std::string&)>& write) {
  const std::string final = stateDir + "/" + name(round), partial = final + ".partial", old = final + kOld;
  std::error_code ec;
  fs::remove_all(partial, ec);
  fs::create_directories(partial, ec);
  if (ec) return fsError("cannot create", partial, ec);
  if (auto s = write(partial); !s) return s;
  if (auto s = syncDirectory(partial); !s) return s;
  if (fs::exists(final, ec)) {  // step 2: aside, not away
    fs::remove_all(old, ec);
    fs::rename(final, old, ec);
    if (ec) return fsError("cannot move aside", final, ec);
  }
  fs::rename(partial, final, ec);
  if (ec) return fsError("cannot commit", final, ec);
  if (auto s = syncDirectory(stateDir); !s) return s;
  prune(stateDir, round);
  return {};
}

std::vector<RoundDir> complete(const std::string& stateDir) {
  std::vector<std::pair<Parsed, std::string>> found;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(stateDir, ec)) {
    if (!entry.is_directory(ec)) continue;
    if (const auto p = parse(entry.path().filename().string())) found.emplace_back(*p, entry.path().string());
  }
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) {
    return a.first.round != b.first.round ? a.first.round > b.first.round : !a.first.old && b.first.old;
  });
  std::vector<RoundDir> out;
  for (const auto& [p, path] : found) out.push_back({p.round, path});
  return out;
}

Expected<std::optional<std::int64_t>> loadNewest(const std::string& stateDir,
                                                 const std::function<Status(const RoundDir&)>& load,
                                                 std::vector<std::string>& skipped) {
  std::optional<std::string> newestError;
  for (const auto& dir : complete(stateDir)) {
    const auto s = load(dir);
    if (s) return std::optional<std::int64_t>(dir.round);
    if (!newestError) newestError = s.error();
    skipped.push_back("\"" + dir.path + "\" is damaged (" + s.error() + "); trying the round before it");
  }
  if (newestError) return makeError("no complete state to resume from; the newest: " + *newestError);
  return std::optional<std::int64_t>();
}

}  // namespace es::node::round_dirs
