// The safetensors container format (https://github.com/huggingface/safetensors), without Torch:
//   [u64 little-endian N][N bytes of JSON header][data section]
// The header maps tensor names to {"dtype","shape","data_offsets":[begin,end]} (offsets relative to
// the data section) plus an optional "__metadata__" object of string -> string.
//
// The parser is strict: every rule of the format is checked and a violation is an error value
// with a message, never a crash: header past EOF, bad JSON, unknown dtype, shape/byte mismatch,
// offsets out of range, overlapping or leaving holes, duplicate names, non-string metadata.
#pragma once

#include "core/common/expected.h"

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace es::ckpt {

enum class DType { F32, BF16, F16, I8, U8, I16, I32, I64 };

std::size_t dtypeSize(DType dtype);
std::string_view dtypeName(DType dtype);  // "F32", "BF16", ...
std::optional<DType> parseDType(std::string_view name);

struct TensorInfo {
  std::string name;
  DType dtype = DType::F32;
  std::vector<std::int64_t> shape;
  std::uint64_t begin = 0;  // byte offsets within the data section
  std::uint64_t end = 0;
};

using Metadata = std::map<std::string, std::string>;

struct Header {
  std::vector<TensorInfo> tensors;  // in data-offset order
  Metadata metadata;
  std::uint64_t dataStart = 0;  // absolute file offset of the data section (8 + N)
};

// Largest header we accept (the reference implementation's limit is 100 MB).
constexpr std::uint64_t kMaxHeaderBytes = 100u * 1000u * 1000u;

// Parses the JSON header of a file of `fileSize` bytes whose header is `headerJson`.
Expected<Header> parseHeader(std::string_view headerJson, std::uint64_t fileSize);

// Parses the header of a file of `fileSize` bytes from its first bytes: `bytes` holds at least
// the 8-byte length and the header (any data after it is ignored). The fuzz target's entry point.
Expected<Header> parseFileHeader(std::string_view bytes, std::uint64_t fileSize);

// Reads and parses the header of the file at `path` (only the header is read).
Expected<Header> readHeader(const std::string& path);

// Lays out `tensors` (their begin/end are assigned here, contiguous in the given order) and
// returns the 8-byte length prefix + JSON header, padded with spaces to a multiple of 8 bytes so
// the data section is aligned.
std::string buildHeader(std::vector<TensorInfo>& tensors, const Metadata& metadata);

}  // namespace es::ckpt
