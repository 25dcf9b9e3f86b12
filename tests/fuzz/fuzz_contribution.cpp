// A whole contribution file (core/sync/contribution_file + delta_codec): safetensors container,
// metadata header, then the codec's decode (int8 scales, bf16) into float32 tensors.
#include "core/sync/contribution_file.h"
#include "fuzz_target.h"

#include <ATen/ATen.h>

ES_FUZZ_TARGET(contribution) {
  const auto file = es::sync::parseContribution(fuzzBytes(data, size));
  if (!file) return false;
  // Accepted: every delta is a float32 tensor; the fields the merge trusts are non-empty.
  for (const auto& [name, delta] : file->deltas) ES_FUZZ_CHECK(!name.empty() && delta.scalar_type() == at::kFloat);
  ES_FUZZ_CHECK(!file->header.run.empty() && !file->header.sender.empty() && file->header.round >= 0);
  return true;
}
