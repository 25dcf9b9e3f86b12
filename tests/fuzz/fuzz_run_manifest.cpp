// run.json (core/train/run_manifest): a run joined by magnet link is a stranger's manifest.
#include "core/train/run_manifest.h"
#include "fuzz_target.h"

ES_FUZZ_TARGET(run_manifest) {
  const auto manifest = es::train::parseRunManifest(fuzzBytes(data, size));
  if (!manifest) return false;
  // Accepted: the name is safe as a path component and the model shape is usable.
  ES_FUZZ_CHECK(es::train::isValidRunName(manifest->name));
  ES_FUZZ_CHECK(manifest->model.validate().empty());
  return true;
}
