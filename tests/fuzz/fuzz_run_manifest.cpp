// run.json (core/train/run_manifest): a run joined by magnet link is a stranger's manifest.
#include "core/train/run_manifest.h"
#include "fuzz_target.h"

ES_FUZZ_TARGET(run_manifest) {
  const auto manifest = es::train::parseRunManifest(fuzzBytes(data, size));
  if (!manifest) return false;
  // Accepted: the name is safe as a path component and the model shape is usable.
  ES_FUZZ_CHECK(es::train::isValidRunName(manifest->name));
  ES_FUZZ_CHECK(manifest->model.validate().empty());
  // A prepared run (create-run) lists a bounded number of shards of bounded tokens, and no text.
  const auto& d = manifest->data;
  if (d.prepared()) {
    ES_FUZZ_CHECK(d.trainCorpus.empty() && d.valCorpus.empty() && d.preparedValTokens > 0);
    ES_FUZZ_CHECK(d.preparedTrainTokens.size() <= std::size_t(es::train::kMaxPreparedShards));
    std::int64_t total = 0;
    for (const auto tokens : d.preparedTrainTokens) {
      ES_FUZZ_CHECK(tokens > 0 && tokens <= es::train::kMaxShardTokens);
      total += tokens;
    }
    ES_FUZZ_CHECK(total <= es::train::kMaxPreparedTrainTokens);
  }
  return true;
}
