#include "core/checkpoint/safetensors_format.h"

#include "core/common/safe_quote.h"

#include "core/common/json_depth.h"

#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>

namespace es::ckpt {
namespace {

using nlohmann::json;

constexpr const char* kMetadataKey = "__metadata__";
constexpr std::size_t kMaxHeaderDepth = 8;

struct DTypeEntry {
  DType dtype;
  std::string_view name;
  std::size_t size;
};

constexpr DTypeEntry kDTypes[] = {
    {DType::F32, "F32", 4}, {DType::BF16, "BF16", 2}, {DType::F16, "F16", 2}, {DType::I8, "I8", 1},
    {DType::U8, "U8", 1},   {DType::I16, "I16", 2},   {DType::I32, "I32", 4}, {DType::I64, "I64", 8},
};

std::string shapeText(const std::vector<std::int64_t>& shape) {
  std::string out = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

// Parses the header, refusing duplicate keys anywhere: nlohmann silently keeps the last one, which
// would let two entries claim the same name and hide one tensor's bytes.
Expected<json> parseJsonRejectingDuplicates(std::string_view text) {
  std::vector<std::set<std::string>> openObjects;
  std::string duplicate;
  bool duplicateIsTensor = false;
  const json::parser_callback_t callback = [&](int, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::object_start) {
      openObjects.emplace_back();
    } else if (event == json::parse_event_t::object_end) {
      if (!openObjects.empty()) openObjects.pop_back();
    } else if (event == json::parse_event_t::key && !openObjects.empty() && duplicate.empty()) {
      const std::string key = parsed.get<std::string>();
      if (!openObjects.back().insert(key).second) {
        duplicate = key;
        duplicateIsTensor = openObjects.size() == 1 && key != kMetadataKey;
      }
    }
    return true;
  };
  json parsed;
  try {
    parsed = json::parse(text.begin(), text.end(), callback);
  } catch (const json::exception& e) {
    return makeError(std::string("safetensors header is not valid JSON: ") + e.what());
  }
  if (!duplicate.empty()) {
    return makeError(duplicateIsTensor ? "safetensors header has duplicate tensor name " + safeQuote(duplicate)
                                       : "safetensors header has duplicate key " + safeQuote(duplicate));
  }
  return parsed;
}

Expected<Metadata> parseMetadata(const json& value) {
  if (!value.is_object()) return makeError("safetensors \"__metadata__\" must be an object of string to string");
  Metadata metadata;
  for (const auto& [key, item] : value.items()) {
    if (!item.is_string()) {
      return makeError("safetensors \"__metadata__\" value of " + safeQuote(key) + " is not a string (got " +
                       std::string(item.type_name()) + ")");
    }
    metadata.emplace(key, item.get<std::string>());
  }
  return metadata;
}

// One tensor entry: exactly {"dtype","shape","data_offsets"}, each well-typed, and a byte count
// that matches the shape. Range and layout checks against the data section come later.
Expected<TensorInfo> parseEntry(const std::string& name, const json& entry, std::uint64_t dataSize) {
  const std::string where = "tensor " + safeQuote(name) + ": ";
  if (!entry.is_object()) return makeError(where + "entry must be a JSON object");
  for (const auto& [key, value] : entry.items()) {
    if (key != "dtype" && key != "shape" && key != "data_offsets")
      return makeError(where + "unexpected key " + safeQuote(key));
  }
  for (const char* key : {"dtype", "shape", "data_offsets"}) {
    if (!entry.contains(key)) return makeError(where + "missing key " + safeQuote(key));
  }

  TensorInfo info;
  info.name = name;
  const json& dtype = entry["dtype"];
  const auto parsedDType = dtype.is_string() ? parseDType(dtype.get<std::string>()) : std::nullopt;
  if (!parsedDType) {
    return makeError(where + "unknown dtype " + dtype.dump() + " (supported: F32, BF16, F16, I8, U8, I16, I32, I64)");
  }
  info.dtype = *parsedDType;

  const json& shape = entry["shape"];
  if (!shape.is_array()) return makeError(where + "shape must be an array of non-negative integers");
  std::uint64_t bytes = dtypeSize(info.dtype);
  bool overflow = false;
  for (const json& dim : shape) {
    if (!dim.is_number_integer()) return makeError(where + "shape must contain integers only, got " + dim.dump());
    if (!dim.is_number_unsigned() && dim.get<std::int64_t>() < 0) {
      return makeError(where + "negative dimension " + dim.dump() + " in shape " + shape.dump());
    }
    const std::uint64_t d = dim.is_number_unsigned() ? dim.get<std::uint64_t>() : 0;  // signed here means "-0"
    if (d > static_cast<std::uint64_t>(INT64_MAX))
      return makeError(where + "dimension " + dim.dump() + " is too large");
    info.shape.push_back(static_cast<std::int64_t>(d));
    // Checked multiply: a wrapped product could otherwise match small offsets and pass.
    overflow = overflow || __builtin_mul_overflow(bytes, d, &bytes);
  }
  if (overflow) return makeError(where + "byte size of shape " + shape.dump() + " overflows 64 bits");

  const json& offsets = entry["data_offsets"];
  if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
      !offsets[1].is_number_unsigned()) {
    return makeError(where + "data_offsets must be [begin, end] with non-negative integers, got " + offsets.dump());
  }
  info.begin = offsets[0].get<std::uint64_t>();
  info.end = offsets[1].get<std::uint64_t>();
  if (info.begin > info.end)
    return makeError(where + "data_offsets " + offsets.dump() + " are out of order: begin after end");
  if (info.end > dataSize) {
    return makeError(where + "data_offsets " + offsets.dump() + " are out of range: the data section has only " +
                     std::to_string(dataSize) + " bytes (truncated file?)");
  }
  if (info.end - info.begin != bytes) {
    return makeError(where + "size mismatch: shape " + shapeText(info.shape) + " of " +
                     std::string(dtypeName(info.dtype)) + " needs " + std::to_string(bytes) +
                     " bytes but data_offsets span " + std::to_string(info.end - info.begin));
  }
  return info;
}

// The tensors, sorted by offset, must tile [0, dataSize) exactly: no overlap, no hole, no tail.
Status checkLayout(std::vector<TensorInfo>& tensors, std::uint64_t dataSize) {
  std::sort(tensors.begin(), tensors.end(), [](const TensorInfo& a, const TensorInfo& b) {
    return std::tie(a.begin, a.end, a.name) < std::tie(b.begin, b.end, b.name);
  });
  std::uint64_t expected = 0;
  const TensorInfo* previous = nullptr;
  for (const TensorInfo& t : tensors) {
    if (t.begin < expected) {
      return makeError("tensors " + safeQuote(previous->name) + " and " + safeQuote(t.name) +
                       " overlap in the data section");
    }
    if (t.begin > expected) {
      return makeError("hole of " + std::to_string(t.begin - expected) + " bytes in the data section before tensor " +
                       safeQuote(t.name));
    }
    expected = t.end;
    previous = &t;
  }
  if (expected != dataSize) {
    return makeError("the data section has " + std::to_string(dataSize) + " bytes but the tensors cover only " +
                     std::to_string(expected) + " (trailing bytes)");
  }
  return {};
}

std::string errnoText(const std::string& what, const std::string& path) {
  return what + " \"" + path + "\": " + std::strerror(errno);
}

// pread until `size` bytes are read; returns false on error or EOF.
bool preadAll(int fd, void* buffer, std::size_t size, std::uint64_t offset) {
  char* p = static_cast<char*>(buffer);
  while (size > 0) {
    const ssize_t n = ::pread(fd, p, size, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    size -= static_cast<std::size_t>(n);
    offset += static_cast<std::uint64_t>(n);
  }
  return true;
}

// The header length from a file's first 8 bytes (`prefix`), checked against the file size before
// anything is allocated: the length is untrusted input.
Expected<std::uint64_t> checkedHeaderLength(std::string_view prefix, std::uint64_t fileSize) {
  if (fileSize < 8 || prefix.size() < 8) {
    return makeError("safetensors file is truncated: " + std::to_string(fileSize) +
                     " bytes, less than the 8-byte header length");
  }
  std::uint64_t headerSize = 0;
  for (int i = 7; i >= 0; --i) headerSize = (headerSize << 8) | static_cast<unsigned char>(prefix[i]);  // little-endian
  if (headerSize > kMaxHeaderBytes) {
    return makeError("safetensors header length " + std::to_string(headerSize) + " is too large (limit " +
                     std::to_string(kMaxHeaderBytes) + ")");
  }
  if (headerSize > fileSize - 8) {
    return makeError("safetensors header length " + std::to_string(headerSize) + " runs past the end of the file of " +
                     std::to_string(fileSize) + " bytes (truncated file?)");
  }
  return headerSize;
}

}  // namespace

std::size_t dtypeSize(DType dtype) {
  for (const auto& e : kDTypes) {
    if (e.dtype == dtype) return e.size;
  }
  return 0;
}

std::string_view dtypeName(DType dtype) {
  for (const auto& e : kDTypes) {
    if (e.dtype == dtype) return e.name;
  }
  return "?";
}

std::optional<DType> parseDType(std::string_view name) {
  for (const auto& e : kDTypes) {
    if (e.name == name) return e.dtype;
  }
  return std::nullopt;
}

Expected<Header> parseHeader(std::string_view headerJson, std::uint64_t fileSize) {
  const std::uint64_t headerSize = headerJson.size();
  if (headerSize == 0) return makeError("safetensors header is empty (length 0)");
  if (headerSize > kMaxHeaderBytes) {
    return makeError("safetensors header of " + std::to_string(headerSize) + " bytes is too large (limit " +
                     std::to_string(kMaxHeaderBytes) + ")");
  }
  if (fileSize < 8 || fileSize - 8 < headerSize) {
    return makeError("safetensors header runs past the end of the file (truncated file?)");
  }
  const std::uint64_t dataSize = fileSize - 8 - headerSize;
  // A header is {name: {"shape": [...]}}: 3 levels. Deeper is an attack on the recursive dump()
  // of our error messages (json_depth.h).
  if (jsonNestingDepth(headerJson) > kMaxHeaderDepth) {
    return makeError("safetensors header nests deeper than " + std::to_string(kMaxHeaderDepth) + " levels");
  }

  auto parsed = parseJsonRejectingDuplicates(headerJson);
  if (!parsed) return makeError(parsed.error());
  const json& root = *parsed;
  if (!root.is_object()) {
    return makeError(std::string("safetensors header must be a JSON object, got ") + root.type_name());
  }

  Header header;
  header.dataStart = 8 + headerSize;
  for (const auto& [name, entry] : root.items()) {
    if (name == kMetadataKey) {
      auto metadata = parseMetadata(entry);
      if (!metadata) return makeError(metadata.error());
      header.metadata = std::move(*metadata);
      continue;
    }
    auto info = parseEntry(name, entry, dataSize);
    if (!info) return makeError(info.error());
    header.tensors.push_back(std::move(*info));
  }
  if (auto layout = checkLayout(header.tensors, dataSize); !layout) return makeError(layout.error());
  return header;
}

Expected<Header> parseFileHeader(std::string_view bytes, std::uint64_t fileSize) {
  auto headerSize = checkedHeaderLength(bytes, fileSize);
  if (!headerSize) return makeError(headerSize.error());
  if (bytes.size() - 8 < *headerSize) return makeError("safetensors header runs past the end of the given bytes");
  return parseHeader(bytes.substr(8, *headerSize), fileSize);
}

Expected<Header> readHeader(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return localError(errnoText("cannot open", path));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};

  struct stat st {};
  if (::fstat(fd, &st) != 0) return localError(errnoText("cannot stat", path));
  const auto fileSize = static_cast<std::uint64_t>(st.st_size);
  const std::string where = "\"" + path + "\": ";

  char prefix[8] = {};
  if (fileSize >= 8 && !preadAll(fd, prefix, 8, 0)) return localError(errnoText("cannot read", path));
  auto headerSize = checkedHeaderLength({prefix, fileSize >= 8 ? 8u : 0u}, fileSize);
  if (!headerSize) return makeError(where + headerSize.error());
  std::string headerJson(*headerSize, '\0');
  if (!preadAll(fd, headerJson.data(), headerJson.size(), 8))
    return localError(errnoText("cannot read header of", path));
  auto header = parseHeader(headerJson, fileSize);
  if (!header) return makeError(where + header.error());
  return header;
}

std::string buildHeader(std::vector<TensorInfo>& tensors, const Metadata& metadata) {
  json root = json::object();
  std::uint64_t offset = 0;
  for (TensorInfo& t : tensors) {
    std::uint64_t bytes = dtypeSize(t.dtype);
    for (const std::int64_t d : t.shape) bytes *= static_cast<std::uint64_t>(d);
    t.begin = offset;
    t.end = offset + bytes;
    offset = t.end;
    root[t.name] = {{"dtype", std::string(dtypeName(t.dtype))}, {"shape", t.shape}, {"data_offsets", {t.begin, t.end}}};
  }
  if (!metadata.empty()) root[kMetadataKey] = metadata;

  std::string text = root.dump();  // keys sorted by nlohmann: deterministic bytes
  text.append((8 - (8 + text.size()) % 8) % 8, ' ');
  std::string out(8, '\0');
  std::uint64_t n = text.size();
  for (int i = 0; i < 8; ++i, n >>= 8) out[i] = static_cast<char>(n & 0xff);
  return out + text;
}

}  // namespace es::ckpt
