// The text of a corpus given on the command line (create-run): files and folders (searched
// recursively, in byte order of their paths, so the same corpus gives the same run everywhere),
// each `.txt` (the whole file is one document) or `.jsonl` (one JSON object a line, its "text"
// string a document). Documents are joined by a blank line. Compressed files (`.gz`, `.zst`) are
// refused with a clear error: no decompressor is in the stack yet (zlib and zstd would be new
// dependencies; decompressing first costs the user one command).
#pragma once

#include "core/common/expected.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace es::train {

// The corpus files below `inputs`, sorted; an error names the first input that is missing, of an
// unknown kind or compressed, and says so when the files together exceed `maxBytes`.
Expected<std::vector<std::string>> listCorpusFiles(const std::vector<std::string>& inputs, std::int64_t maxBytes);

// One file's documents: a .txt file whole, a .jsonl file's "text" fields (an error names the line
// that is not an object with a string "text"). Text must be UTF-8: the first invalid byte's offset
// is the error.
Expected<std::vector<std::string>> readCorpusDocuments(const std::string& path);

// Byte offset of the first invalid UTF-8 sequence in `text`, or -1 when it is valid.
std::int64_t firstInvalidUtf8(const std::string& text);

}  // namespace es::train
