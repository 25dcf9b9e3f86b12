// A contribution on disk: a safetensors file of encoded deltas (delta_codec.h) whose metadata is
// the header: format "expertswarm-contribution", version "1", run, round, sender, base_hash, codec.
// Written atomically; read strictly (a missing or malformed field is an error).
#pragma once

#include "core/sync/delta_codec.h"
#include "core/sync/validate.h"

namespace es::sync {

struct ContributionFile {
  ContributionHeader header;
  ckpt::NamedTensors deltas;  // decoded to float32
};

Status saveContribution(const std::string& path, const ContributionHeader& header, const ckpt::NamedTensors& deltas);
Expected<ContributionFile> loadContribution(const std::string& path);
// The same from a whole file held in memory (fuzzing; the strict rules are identical).
Expected<ContributionFile> parseContribution(std::string_view bytes);

}  // namespace es::sync
