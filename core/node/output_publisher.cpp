#include "core/node/output_publisher.h"

#include <memory>

namespace es::node {
namespace {

// The publishes in flight and what they gave, shared by their callbacks (which may come in any
// order, after the caller returned).
struct Publishing {
  ReducerIndexKey key;
  std::string inputDigest, indexDir;
  std::vector<std::pair<std::string, std::string>> reduced;
  std::vector<std::string> planShards;
  std::function<void(Expected<PublishedOutputs>)> done;
  std::vector<ContentId> ids;  // per reduced file
  std::size_t waiting = 0;
  std::string error;  // the first failure
};

void publishIndex(Swarm& swarm, const std::shared_ptr<Publishing>& p) {
  PublishedOutputs out;
  out.index.key = p->key;
  for (std::size_t k = 0; k < p->reduced.size(); ++k) {
    out.index.outputs.push_back({p->reduced[k].first, p->inputDigest, p->ids[k]});
    out.pathsByShard[p->reduced[k].first] = p->reduced[k].second;
  }
  out.contents = p->ids;
  const std::string path = p->indexDir + "/" + reducerIndexFileName(p->key.round);
  if (auto saved = saveReducerIndex(path, out.index, p->planShards); !saved) return p->done(saved.failure());
  swarm.publish(path, [p, out = std::move(out)](Expected<ContentId> id) mutable {
    if (!id) return p->done(id.failure());
    out.indexContent = *id;
    out.contents.push_back(*id);
    p->done(std::move(out));
  });
}

}  // namespace

void publishOutputs(Swarm& swarm, const ReducerIndexKey& key, const std::string& inputDigest,
                    const std::vector<std::pair<std::string, std::string>>& reduced,
                    const std::vector<std::string>& planShards, const std::string& indexDir,
                    std::function<void(Expected<PublishedOutputs>)> done) {
  auto p = std::make_shared<Publishing>(
      Publishing{key, inputDigest, indexDir, reduced, planShards, std::move(done), {}, reduced.size(), {}});
  p->ids.resize(reduced.size());
  if (reduced.empty()) return publishIndex(swarm, p);  // a reducer of no shard still says so
  for (std::size_t k = 0; k < reduced.size(); ++k)
    swarm.publish(reduced[k].second, [&swarm, p, k](Expected<ContentId> id) {
      if (id)
        p->ids[k] = *id;
      else if (p->error.empty())
        p->error = id.error();
      if (--p->waiting > 0) return;
      if (!p->error.empty()) return p->done(makeError("publishing our merged shards: " + p->error));
      publishIndex(swarm, p);
    });
}

}  // namespace es::node
