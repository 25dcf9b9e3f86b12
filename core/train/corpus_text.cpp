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
    if (total > maxBytes)  // compressed files by their size on disk: the stream bounds the rest
      return makeError("the corpus exceeds " + std::to_string(maxBytes >> 20) + " MiB (at \"" + f + "\")");
  }
  return files;
}

std::int64_t firstInvalidUtf8(std::string_view text) {
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

std::size_t incompleteUtf8Tail(std::string_view text) {
  for (std::size_t k = 1; k <= 3 && k <= text.size(); ++k) {
    const auto c = static_cast<unsigned char>(text[text.size() - k]);
    if ((c & 0xc0) == 0x80) continue;  // a continuation byte: its lead is further back
    const std::size_t length = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 1;
    return length > k ? k : 0;
  }
  return 0;
}

CorpusStream::CorpusStream(std::vector<std::string> files) : files_(std::move(files)) {}
CorpusStream::~CorpusStream() = default;

double CorpusStream::filesDone() const {
  if (files_.empty()) return 1;
  return double(next_ - (reader_ ? 1 : 0)) / double(files_.size());
}

Expected<bool> CorpusStream::openNextFile() {
  if (next_ == files_.size()) return false;
  const std::string& path = files_[next_++];
  auto reader = CorpusFileReader::open(path);
  if (!reader) return makeError(reader.error());
  reader_ = std::move(*reader);
  jsonl_ = endsWith(withoutCompression(path), ".jsonl");
  carry_.clear();
  carryOffset_ = 0;
  line_ = 0;
  documentOpen_ = false;
  return true;
}

void CorpusStream::emit(std::string& out, std::string_view bytes) {
  if (bytes.empty()) return;
  if (!documentOpen_ && anyDocument_) out += "\n\n", position_ += 2;
  documentOpen_ = anyDocument_ = true;
  out.append(bytes);
  position_ += std::int64_t(bytes.size());
}

// A .txt chunk: what is valid UTF-8 goes out; an incomplete sequence at its end waits for the
// next chunk.
Expected<void> CorpusStream::takeText(std::string& out, std::string_view chunk) {
  carry_.append(chunk);
  const std::size_t ready = carry_.size() - incompleteUtf8Tail(carry_);
  if (const auto bad = firstInvalidUtf8(std::string_view(carry_).substr(0, ready)); bad >= 0)
    return makeError("corpus \"" + files_[next_ - 1] + "\": not UTF-8 text (an invalid byte at offset " +
                     std::to_string(carryOffset_ + bad) + ")");
  emit(out, std::string_view(carry_).substr(0, ready));
  carry_.erase(0, ready);
  carryOffset_ += std::int64_t(ready);
  return {};
}

// A .jsonl chunk: every complete line is a document; `last` takes the final line without '\n'.
Expected<void> CorpusStream::takeLines(std::string& out, std::string_view chunk, bool last) {
  const std::string& path = files_[next_ - 1];
  carry_.append(chunk);
  std::size_t begin = 0;
  for (;;) {
    std::size_t end = carry_.find('\n', begin);
    if (end == std::string::npos && !(last && begin < carry_.size())) break;
    if (end == std::string::npos) end = carry_.size();
    const std::string_view row(carry_.data() + begin, end - begin);
    ++line_;
    if (const auto bad = firstInvalidUtf8(row); bad >= 0)
      return makeError("corpus \"" + path + "\": not UTF-8 text (an invalid byte at offset " +
                       std::to_string(carryOffset_ + std::int64_t(begin) + bad) + ")");
    if (row.find_first_not_of(" \t\r") != std::string_view::npos) {
      // A document nests a level or two; deeper is refused before nlohmann recurses (json_depth.h).
      const auto j = jsonNestingDepth(row) > 32 ? nlohmann::json(nullptr)
                                                : nlohmann::json::parse(row.begin(), row.end(), nullptr, false);
      if (j.is_discarded() || !j.is_object() || !j.contains("text") || !j["text"].is_string())
        return makeError("corpus \"" + path + "\", line " + std::to_string(line_) +
                         ": not a JSON object with a string \"text\"");
      documentOpen_ = false;
      emit(out, j["text"].get_ref<const std::string&>());
    }
    begin = end + 1;
  }
  carry_.erase(0, std::min(begin, carry_.size()));
  carryOffset_ += std::int64_t(begin);
  if (carry_.size() > kMaxCorpusLineBytes)
    return makeError("corpus \"" + path + "\", line " + std::to_string(line_ + 1) + ": longer than " +
                     std::to_string(kMaxCorpusLineBytes >> 20) + " MiB");
  return {};
}

Expected<void> CorpusStream::finishFile(std::string& out) {
  if (jsonl_) {
    if (auto s = takeLines(out, {}, true); !s) return s;
  } else if (!carry_.empty()) {
    return makeError("corpus \"" + files_[next_ - 1] + "\": not UTF-8 text (an invalid byte at offset " +
                     std::to_string(carryOffset_) + ")");
  }
  reader_.reset();
  documentOpen_ = false;
  return {};
}

Expected<bool> CorpusStream::next(std::string& out, std::size_t want) {
  const std::size_t before = out.size();
  std::vector<char> chunk(std::min<std::size_t>(std::max<std::size_t>(want, 4096), std::size_t(1) << 20));
  while (out.size() - before < want) {
    if (!reader_) {
      auto opened = openNextFile();
      if (!opened) return makeError(opened.error());
      if (!*opened) break;
    }
    auto got = reader_->read(chunk.data(), chunk.size());
    if (!got) return makeError(got.error());
    const std::string_view bytes(chunk.data(), *got);
    auto taken = *got == 0 ? finishFile(out) : jsonl_ ? takeLines(out, bytes, false) : takeText(out, bytes);
    if (!taken) return makeError(taken.error());
  }
  return out.size() > before;
}

}  // namespace es::train
