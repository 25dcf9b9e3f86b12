// A corpus file's bytes, decompressed when its name says `.gz` (zlib's gzip reader: concatenated
// members too) or `.zst` (zstd's streaming decoder: concatenated frames too), for create-run
// (issue 40 item 1). Streaming, with the caller's bound on what comes *out*: a file of a few KiB
// that inflates to terabytes is refused when it passes the bound, never held whole. A truncated or
// corrupt stream is an error that names the file and says what is wrong. No Torch, no Qt.
#pragma once

#include "core/common/expected.h"

#include <cstdint>
#include <string>

namespace es::train {

// ".gz", ".zst", or "" for a file read as it is.
std::string corpusCompression(const std::string& path);
// `path` without its compression suffix (what says .txt or .jsonl).
std::string withoutCompression(const std::string& path);

// The file's text, decompressed as its name says; an error once more than `maxBytes` would come
// out ("the corpus exceeds ...").
Expected<std::string> readCorpusBytes(const std::string& path, std::int64_t maxBytes);

}  // namespace es::train
