#include "core/train/corpus_text.h"

#include "core/common/atomic_file.h"
#include "core/common/json_depth.h"
#include "core/train/corpus_decompress.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>

namespace es::train {
namespace {

namespace fs = std::filesystem;

bool endsWith(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// Compressed with a tool create-run does not read (.gz and .zst it does: corpus_decompress.h).
bool unreadableCompression(const std::string& path) { return endsWith(path, ".xz") || endsWith(path, ".bz2"); }

// "" for a corpus file we read, else why the file is not one.
std::string kindProblem(const std::string& path) {
  const std::string plain = withoutCompression(path);
  if (endsWith(plain, ".txt") || endsWith(plain, ".jsonl")) return {};
  if (unreadableCompression(path))
    return "is compressed with xz or bzip2; decompress it first (unxz, bunzip2): create-run reads .txt and .jsonl, "
           "plain or .gz or .zst";
  return "is neither .txt nor .jsonl (plain, .gz or .zst)";
}

}  // namespace

Expected<std::vector<std::string>> listCorpusFiles(const std::vector<std::string>& inputs, std::int64_t maxBytes) {
  std::vector<std::string> files;
  for (const auto& input : inputs) {
    std::error_code ec;
    const auto status = fs::status(input, ec);
    if (ec || !fs::exists(status)) return makeError("corpus \"" + input + "\": no such file or folder");
    if (fs::is_regular_file(status)) {
      if (auto problem = kindProblem(input); !problem.empty()) return makeError("corpus \"" + input + "\" " + problem);
      files.push_back(input);
      continue;
    }
    if (!fs::is_directory(status)) return makeError("corpus \"" + input + "\" is neither a file nor a folder");
    for (fs::recursive_directory_iterator it(input, ec), end; !ec && it != end; it.increment(ec)) {
      const auto path = it->path().string();
      if (it->path().filename().string().rfind('.', 0) == 0 || !it->is_regular_file(ec)) continue;
      if (auto problem = kindProblem(path); !problem.empty()) {
        if (unreadableCompression(path)) return makeError("corpus \"" + path + "\" " + problem);
        continue;  // a README or an image beside the text: not part of the corpus
      }
      files.push_back(path);
    }
    if (ec) return makeError("corpus \"" + input + "\": " + ec.message());
  }
  std::sort(files.begin(), files.end());
  files.erase(std::unique(files.begin(), files.end()), files.end());
  if (files.empty()) return makeError("the corpus has no .txt or .jsonl file (plain, .gz or .zst)");
  std::int64_t total = 0;
  for (const auto& f : files) {
    std::error_code ec;
    total += std::int64_t(fs::file_size(f, ec));
    if (ec) return makeError("corpus \"" + f + "\": " + ec.message());
    if (total > maxBytes)  // compressed files by their size on disk: readCorpusDocuments bounds the rest
      return makeError("the corpus exceeds " + std::to_string(maxBytes >> 20) + " MiB (at \"" + f +
                       "\"): create-run holds it in memory while it trains the tokenizer");
  }
  return files;
}

std::int64_t firstInvalidUtf8(const std::string& text) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const std::size_t n = text.size();
  for (std::size_t i = 0; i < n;) {
    const unsigned char c = s[i];
    const int extra = c < 0x80 ? 0 : (c >> 5) == 0x6 ? 1 : (c >> 4) == 0xe ? 2 : (c >> 3) == 0x1e ? 3 : -1;
    if (extra < 0 || (extra == 1 && c < 0xc2) || i + std::size_t(extra) >= n + (extra == 0 ? 1 : 0))
      return std::int64_t(i);
    for (int k = 1; k <= extra; ++k)
      if ((s[i + std::size_t(k)] & 0xc0) != 0x80) return std::int64_t(i);
    i += std::size_t(extra) + 1;
  }
  return -1;
}

Expected<std::vector<std::string>> readCorpusDocuments(const std::string& path, std::int64_t maxBytes) {
  auto bytes = readCorpusBytes(path, maxBytes);
  if (!bytes) return makeError(bytes.error());
  if (const auto bad = firstInvalidUtf8(*bytes); bad >= 0)
    return makeError("corpus \"" + path + "\": not UTF-8 text (an invalid byte at offset " + std::to_string(bad) + ")");
  if (!endsWith(withoutCompression(path), ".jsonl")) return std::vector<std::string>{std::move(*bytes)};
  std::vector<std::string> documents;
  std::size_t begin = 0;
  for (int line = 1; begin < bytes->size(); ++line) {
    const std::size_t end = std::min(bytes->find('\n', begin), bytes->size());
    const std::string_view row(bytes->data() + begin, end - begin);
    begin = end + 1;
    if (row.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    // A document nests a level or two; deeper is refused before nlohmann recurses (json_depth.h).
    const auto j = jsonNestingDepth(row) > 32 ? nlohmann::json(nullptr)
                                              : nlohmann::json::parse(row.begin(), row.end(), nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("text") || !j["text"].is_string())
      return makeError("corpus \"" + path + "\", line " + std::to_string(line) +
                       ": not a JSON object with a string \"text\"");
    documents.push_back(j["text"].get<std::string>());
  }
  return documents;
}

}  // namespace es::train
