// The text of a corpus given on the command line (create-run): files and folders (searched
// recursively, in byte order of their paths, so the same corpus gives the same run everywhere),
// each `.txt` (the whole file is one document) or `.jsonl` (one JSON object a line, its "text"
// string a document), either one plain or compressed as `.gz` or `.zst` (corpus_decompress.h:
// zlib and zstd, streaming). Documents are joined by a blank line, and the whole is read as one
// stream in chunks: a corpus of any size passes through bounded memory.
// `.xz` and `.bz2` are refused with a clear error (decompressing first costs one command).
#pragma once

#include "core/common/expected.h"

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace es::train {

// The corpus files below `inputs`, sorted; an error names the first input that is missing, of an
// unknown kind or compressed with xz or bzip2, and says so when the files together exceed
// `maxBytes` on disk (a compressed file's decompressed size is bounded when it is read).
Expected<std::vector<std::string>> listCorpusFiles(const std::vector<std::string>& inputs, std::int64_t maxBytes);

class CorpusFileReader;

// A .jsonl line longer than this is refused (a line is one document, held whole to parse it).
constexpr std::size_t kMaxCorpusLineBytes = std::size_t(64) << 20;

// The corpus's text as one stream: the files' documents in order — a .txt file whole, each line
// of a .jsonl file its "text" string — empty ones skipped, joined by a blank line ("\n\n"). Every
// byte is checked as it passes: text must be UTF-8 (the error names the file and the offset of the
// first invalid byte, after decompression), a .jsonl line must be an object with a string "text"
// (the error names the line). Nothing is held beyond a chunk and, for .jsonl, one line.
class CorpusStream {
 public:
  explicit CorpusStream(std::vector<std::string> files);
  ~CorpusStream();
  CorpusStream(const CorpusStream&) = delete;
  CorpusStream& operator=(const CorpusStream&) = delete;

  // Appends the stream's next bytes (about `want`, fewer at the end) to `out`: false once the
  // stream is over and nothing was appended, or why a file is not a corpus file.
  Expected<bool> next(std::string& out, std::size_t want = std::size_t(1) << 20);
  std::int64_t position() const { return position_; }  // bytes handed out so far
  double filesDone() const;                            // share of the files read, for progress

 private:
  Expected<bool> openNextFile();
  Expected<void> finishFile(std::string& out);
  Expected<void> takeText(std::string& out, std::string_view chunk);
  Expected<void> takeLines(std::string& out, std::string_view chunk, bool last);
  void emit(std::string& out, std::string_view bytes);

  std::vector<std::string> files_;
  std::size_t next_ = 0;  // the next file to open
  std::unique_ptr<CorpusFileReader> reader_;
  bool jsonl_ = false;
  std::string carry_;             // .txt: an incomplete UTF-8 sequence; .jsonl: a partial line
  std::int64_t carryOffset_ = 0;  // where carry_ begins in the file (decompressed)
  int line_ = 0;                  // .jsonl: lines finished in this file
  bool documentOpen_ = false;     // the current document has bytes out (its separator is written)
  bool anyDocument_ = false;
  std::int64_t position_ = 0;
};

// Byte offset of the first invalid UTF-8 sequence in `text`, or -1 when it is valid.
std::int64_t firstInvalidUtf8(std::string_view text);
// How many bytes at the end of `text` begin a UTF-8 sequence that is not complete yet (0–3).
std::size_t incompleteUtf8Tail(std::string_view text);

}  // namespace es::train
