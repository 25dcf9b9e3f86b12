// A corpus file's bytes, decompressed when its name says `.gz` (zlib's gzip reader: concatenated
// members too) or `.zst` (zstd's streaming decoder: concatenated frames too), for create-run
// (issue 40 item 1). Streaming: a reader hands out the file in chunks, so a corpus of any size
// passes through bounded memory, and a file of a few KiB that inflates to terabytes is never held
// whole. A truncated or corrupt stream is an error that names the file and says what is wrong.
// No Torch, no Qt.
#pragma once

#include "core/common/expected.h"

#include <cstdint>
#include <memory>
#include <string>

namespace es::train {

// ".gz", ".zst", or "" for a file read as it is.
std::string corpusCompression(const std::string& path);
// `path` without its compression suffix (what says .txt or .jsonl).
std::string withoutCompression(const std::string& path);

// One corpus file, decompressed as its name says, read front to back.
class CorpusFileReader {
 public:
  static Expected<std::unique_ptr<CorpusFileReader>> open(const std::string& path);
  virtual ~CorpusFileReader() = default;
  // Up to `n` bytes into `out`: how many (0 only at the clean end), or why the stream is corrupt
  // or ends early.
  virtual Expected<std::size_t> read(char* out, std::size_t n) = 0;
};

}  // namespace es::train
