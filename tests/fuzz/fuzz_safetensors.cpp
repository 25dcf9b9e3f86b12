// The safetensors header parser (core/checkpoint/safetensors_format): every contribution and
// snapshot a stranger sends is read through it before any tensor is allocated.
#include "core/checkpoint/safetensors_format.h"
#include "fuzz_target.h"

ES_FUZZ_TARGET(safetensors) {
  const std::string_view bytes = fuzzBytes(data, size);
  const auto header = es::ckpt::parseFileHeader(bytes, bytes.size());
  if (!header) return false;
  // Accepted: the tensors tile the data section exactly and each matches its shape.
  std::uint64_t expected = 0;
  for (const auto& t : header->tensors) {
    ES_FUZZ_CHECK(t.begin == expected && t.end >= t.begin);
    ES_FUZZ_CHECK(header->dataStart + t.end <= bytes.size());
    expected = t.end;
  }
  ES_FUZZ_CHECK(header->dataStart + expected == bytes.size());
  return true;
}
