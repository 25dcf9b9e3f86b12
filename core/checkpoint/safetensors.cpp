#include "core/checkpoint/safetensors.h"

#include "core/common/atomic_file.h"

#include <ATen/ATen.h>

#include <fcntl.h>
#include <unistd.h>
#include <algorithm>
#include <cerrno>
#include <cstring>

// safetensors stores little-endian bytes and we write/read raw tensor memory.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "safetensors I/O assumes a little-endian host");

namespace es::ckpt {
namespace {

constexpr std::pair<DType, at::ScalarType> kScalarTypes[] = {
    {DType::F32, at::kFloat}, {DType::BF16, at::kBFloat16}, {DType::F16, at::kHalf}, {DType::I8, at::kChar},
    {DType::U8, at::kByte},   {DType::I16, at::kShort},     {DType::I32, at::kInt},  {DType::I64, at::kLong},
};

std::optional<DType> toDType(at::ScalarType type) {
  for (const auto& [dtype, scalar] : kScalarTypes) {
    if (scalar == type) return dtype;
  }
  return std::nullopt;
}

at::ScalarType toScalarType(DType dtype) {
  for (const auto& [d, scalar] : kScalarTypes) {
    if (d == dtype) return scalar;
  }
  return at::kFloat;  // unreachable: every DType is listed
}

std::string quoteName(const std::string& s) { return "\"" + s + "\""; }

// Validates names/dtypes and returns the save order (sorted by name) with header entries.
Expected<std::vector<std::pair<TensorInfo, at::Tensor>>> plan(const NamedTensors& tensors) {
  std::vector<std::pair<TensorInfo, at::Tensor>> out;
  out.reserve(tensors.size());
  for (const auto& [name, tensor] : tensors) {
    if (name.empty()) return makeError("cannot save a tensor with an empty name");
    if (name == "__metadata__")
      return makeError("cannot save a tensor named \"__metadata__\" (reserved by the format)");
    if (!tensor.defined()) return makeError("cannot save tensor " + quoteName(name) + ": it is undefined");
    if (tensor.layout() != at::kStrided)
      return makeError("cannot save tensor " + quoteName(name) + ": not a dense tensor");
    const auto dtype = toDType(tensor.scalar_type());
    if (!dtype) {
      return makeError("cannot save tensor " + quoteName(name) + ": unsupported dtype " +
                       std::string(c10::toString(tensor.scalar_type())));
    }
    TensorInfo info;
    info.name = name;
    info.dtype = *dtype;
    info.shape = tensor.sizes().vec();
    out.emplace_back(std::move(info), tensor);
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.first.name < b.first.name; });
  for (std::size_t i = 1; i < out.size(); ++i) {
    if (out[i].first.name == out[i - 1].first.name)
      return makeError("duplicate tensor name " + quoteName(out[i].first.name));
  }
  return out;
}

// Fills fresh CPU tensors for every entry of `header`; `read(dst, size, absoluteOffset)` returns
// "" or what went wrong. Shared by the file and the in-memory loader.
template <typename Read>
Expected<SafetensorsFile> readTensors(Header& header, const std::string& where, Read&& read) {
  SafetensorsFile file;
  file.metadata = std::move(header.metadata);
  try {
    for (const TensorInfo& info : header.tensors) {
      at::Tensor tensor = at::empty(info.shape, at::TensorOptions().dtype(toScalarType(info.dtype)));
      const std::uint64_t bytes = info.end - info.begin;
      if (bytes > 0) {
        const std::string error = read(static_cast<char*>(tensor.data_ptr()), bytes, header.dataStart + info.begin);
        // The header said where every tensor lies inside the file: a read that fails is our disk's.
        if (!error.empty()) return localError(error + " (tensor " + quoteName(info.name) + ")");
      }
      file.tensors.emplace_back(info.name, std::move(tensor));
    }
  } catch (const std::exception& e) {  // allocation failure: the declared tensors fit the file, so it is our memory
    return localError("cannot load " + where + ": " + e.what());
  }
  std::sort(file.tensors.begin(), file.tensors.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  return file;
}

}  // namespace

at::Tensor SafetensorsFile::find(const std::string& name) const {
  const auto it = std::lower_bound(tensors.begin(), tensors.end(), name,
                                   [](const auto& entry, const std::string& key) { return entry.first < key; });
  return it != tensors.end() && it->first == name ? it->second : at::Tensor();
}

Status saveSafetensors(const std::string& path, const NamedTensors& tensors, const Metadata& metadata) {
  auto planned = plan(tensors);
  if (!planned) return makeError(planned.error());

  std::vector<TensorInfo> infos;
  for (const auto& entry : *planned) infos.push_back(entry.first);
  std::string header;
  try {
    header = buildHeader(infos, metadata);
  } catch (const std::exception& e) {  // nlohmann refuses names/metadata that are not UTF-8
    return makeError("cannot encode safetensors header (names and metadata must be UTF-8): " + std::string(e.what()));
  }

  return writeFileAtomically(path, [&](int fd) -> std::string {
    if (std::string error = writeAll(fd, header.data(), header.size()); !error.empty()) return error;
    for (std::size_t i = 0; i < infos.size(); ++i) {
      try {
        // One CPU copy at a time keeps peak memory low when saving from an accelerator.
        const at::Tensor cpu = (*planned)[i].second.detach().to(at::kCPU).contiguous();
        const std::size_t bytes = infos[i].end - infos[i].begin;
        if (cpu.numel() * cpu.element_size() != static_cast<std::int64_t>(bytes)) {
          return "tensor " + quoteName(infos[i].name) + " changed size while saving";
        }
        if (std::string error = writeAll(fd, cpu.data_ptr(), bytes); !error.empty()) return error;
      } catch (const std::exception& e) {
        return "cannot copy tensor " + quoteName(infos[i].name) + " to the CPU: " + e.what();
      }
    }
    return {};
  });
}

Expected<SafetensorsFile> loadSafetensors(const std::string& path) {
  auto header = readHeader(path);
  if (!header) return header.failure();

  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return localError("cannot open \"" + path + "\": " + std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};

  const std::string where = "\"" + path + "\"";
  return readTensors(*header, where, [&](char* p, std::uint64_t left, std::uint64_t offset) -> std::string {
    while (left > 0) {
      const ssize_t n = ::pread(fd, p, left, static_cast<off_t>(offset));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return "cannot read " + where + ": " + std::strerror(errno);
      if (n == 0) return where + " is truncated";
      p += n;
      left -= static_cast<std::uint64_t>(n);
      offset += static_cast<std::uint64_t>(n);
    }
    return {};
  });
}

Expected<SafetensorsFile> parseSafetensors(std::string_view bytes) {
  auto header = parseFileHeader(bytes, bytes.size());
  if (!header) return makeError(header.error());
  // parseHeader checked that every tensor lies inside the file, so the copies stay in `bytes`.
  return readTensors(*header, "safetensors bytes", [&](char* p, std::uint64_t size, std::uint64_t offset) {
    std::memcpy(p, bytes.data() + offset, size);
    return std::string();
  });
}

}  // namespace es::ckpt
