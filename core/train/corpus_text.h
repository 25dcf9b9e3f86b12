// The text of a corpus given on the command line (create-run): files and folders (searched
// recursively, in byte order of their paths, so the same corpus gives the same run everywhere),
// each `.txt` (the whole file is one document) or `.jsonl` (one JSON object a line, its "text"
// string a document), either one plain or compressed as `.gz` or `.zst` (corpus_decompress.h:
// zlib and zstd, streaming, bounded by what comes out). Documents are joined by a blank line.
// `.xz` and `.bz2` are refused with a clear error (decompressing first costs one command).
#pragma once

#include "core/common/expected.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace es::train {

// The corpus files below `inputs`, sorted; an error names the first input that is missing, of an
// unknown kind or compressed with xz or bzip2, and says so when the files together exceed
// `maxBytes` on disk (a compressed file's decompressed size is bounded when it is read).
Expected<std::vector<std::string>> listCorpusFiles(const std::vector<std::string>& inputs, std::int64_t maxBytes);

// One file's documents: a .txt file whole, a .jsonl file's "text" fields (an error names the line
// that is not an object with a string "text"), decompressed first when it is .gz or .zst. Text
// must be UTF-8: the first invalid byte's offset is the error. More than `maxBytes` of text (after
// decompression) is an error.
Expected<std::vector<std::string>> readCorpusDocuments(const std::string& path, std::int64_t maxBytes);

// Byte offset of the first invalid UTF-8 sequence in `text`, or -1 when it is valid.
std::int64_t firstInvalidUtf8(const std::string& text);

}  // namespace es::train
