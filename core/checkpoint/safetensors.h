// Reading and writing LibTorch tensors as safetensors files (format: safetensors_format.h).
// Writes are atomic (temp file + fsync + rename) and deterministic: tensors are stored sorted by
// name, so the same tensors and metadata always give the same bytes (the swarm hashes them).
#pragma once

#include "core/checkpoint/safetensors_format.h"
#include "core/common/expected.h"

#include <ATen/core/Tensor.h>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace es::ckpt {

using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

struct SafetensorsFile {
  NamedTensors tensors;  // sorted by name
  Metadata metadata;

  // The tensor called `name`, or an undefined tensor.
  at::Tensor find(const std::string& name) const;
};

// Saves contiguous CPU copies of `tensors` (any device; dtype must be one of DType). Names must be
// unique and non-empty.
Status saveSafetensors(const std::string& path, const NamedTensors& tensors, const Metadata& metadata = {});

// Loads every tensor into fresh CPU tensors.
Expected<SafetensorsFile> loadSafetensors(const std::string& path);

// The same from a whole file held in memory (fuzzing; the strict rules are identical).
Expected<SafetensorsFile> parseSafetensors(std::string_view bytes);

}  // namespace es::ckpt
