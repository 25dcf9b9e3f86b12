// A contribution on disk: a safetensors file of encoded deltas (delta_codec.h) whose metadata is
// the header: format "expertswarm-contribution", version "1", run, round, sender, base_hash, codec.
// Written atomically; read strictly (a missing or malformed field is an error).
#pragma once

#include "core/sync/contribution_codec.h"
#include "core/sync/delta_source.h"
#include "core/sync/validate.h"

#include <memory>
#include <string>
#include <vector>

namespace es::sync {

inline const std::string kContributionFormat = "expertswarm-contribution";

struct ContributionFile {
  ContributionHeader header;
  ckpt::NamedTensors deltas;  // decoded to float32
};

Status saveContribution(const std::string& path, const ContributionHeader& header, const ckpt::NamedTensors& deltas);
// The same from tensors encodeContribution() made for header.codec already (a sparse sender
// encodes once: its error feedback needs what the file decodes to before the file is written).
Status saveEncodedContribution(const std::string& path, const ContributionHeader& header,
                               const ckpt::NamedTensors& encoded);
// `expected`: the model's tensor shapes, which a sparse file's declared shapes must match before
// anything is allocated (contribution_codec.h); null: only the size bound holds.
Expected<ContributionFile> loadContribution(const std::string& path, const TensorShapes* expected = nullptr);
// The header alone (only the file's safetensors header is read), checked as strictly.
Expected<ContributionHeader> readContributionHeader(const std::string& path);
// The file's deltas, decoded again at every call, for the streaming merge (delta_source.h); a
// call fails if the file no longer holds a contribution with the header `expected`.
DeltaSource contributionDeltas(const std::string& path, const ContributionHeader& expected,
                               std::shared_ptr<const TensorShapes> shapes = nullptr);
// The same from a whole file held in memory (fuzzing; the strict rules are identical).
Expected<ContributionFile> parseContribution(std::string_view bytes);

// The header as a file's metadata (format, version, run, round, sender, base_hash, codec), or why
// a reader would refuse it; and back, strictly: exactly those keys and `extraKeys` (a shard file's
// "shard", shard_file.h), the format `format`, names of [A-Za-z0-9._-]. `where` prefixes errors.
Expected<ckpt::Metadata> contributionMetadata(const ContributionHeader& header,
                                              const std::string& format = kContributionFormat);
Expected<ContributionHeader> contributionHeaderOf(const ckpt::Metadata& meta, const std::string& where,
                                                  const std::string& format = kContributionFormat,
                                                  const std::vector<std::string>& extraKeys = {});

}  // namespace es::sync
