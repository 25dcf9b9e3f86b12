// Engine: joining a run by its magnet link. The run's id is the v2 info-hash of its run torrent:
// run.json alone (a run of a text corpus, which names its corpus by relative path: a run made
// from the bundled corpus finds it here, linked in), or a prepared run's whole folder (create-run:
// run.json, tokenizer.json and the token shards). The session fetches it from the run's peers
// (found on the DHT under the same key they announce the run on), then the run starts as from a
// folder.
//
// The torrent comes from strangers: its metadata must be one plain file named run.json of at most
// train::kMaxRunManifestBytes, or exactly a prepared run's files within their bounds
// (train::preparedTorrentProblem), checked before any piece is asked for (the fetch's limits); a
// join that fails for any reason leaves no folder of it behind. Of a prepared run, a peer fetches
// the training shards assigned to it within its data budget (`--data-budget-mib`; all by default),
// and keeps the fetch's state in the folder (train::kPartialRunState) to seed what it holds.
//
// A link to a run installed with the client (share/expertswarm/runs/*, created with create-run:
// the bundled default run) fetches nothing: the installed folder is the run, as qBittorrent
// finds a torrent's files already on disk. Its id is read from the folder's creation torrent;
// prepareRun then checks the folder against it and joinSwarm the id against the link.
#include "app/data_dir.h"
#include "app/engine.h"
#include "app/engine_parts.h"
#include "app/run_setup.h"

#include "core/train/prepared_run.h"
#include "core/train/run_manifest.h"
#include "core/train/shard_assignment.h"
#include "p2p/identity.h"
#include "p2p/torrent_maker.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>

#include <algorithm>

namespace es::app {
namespace {
constexpr int kManifestDeadlineMs = 180000;

// The training shards an earlier join of this run left in `dir` (its prepared folder, marked by
// the fetch state it kept), or none.
std::vector<int> shardsHeldBefore(const QString& dir, int shardCount) {
  for (const auto& sub : QDir(dir).entryList(QDir::Dirs | QDir::NoDotAndDotDot)) {
    const QString folder = dir + QLatin1Char('/') + sub;
    if (QFileInfo::exists(folder + QLatin1Char('/') + QLatin1String(train::kPartialRunState)))
      return train::presentShardsIn(folder.toStdString(), shardCount);
  }
  return {};
}
}  // namespace

int Engine::joinByMagnet() {
  const QString installed = installedRunWithId(cl_.runMagnetHash);
  if (installed.isEmpty()) return fetchManifest();
  info("The link names the run installed with the client in \"" + installed.toStdString() +
       "\": joining it from there, nothing to fetch");
  Q_EMIT noted(QStringLiteral("manifest"), {{"run", cl_.runMagnetHash}, {"state", "installed"}});
  cl_.run = installed;
  return startRun();
}

// The installed run folder whose creation torrent has this v2 info-hash, or none.
QString Engine::installedRunWithId(const QString& runId) const {
  const QString runs = shareDir_ + QStringLiteral("/runs");
  for (const auto& name : QDir(runs).entryList(QDir::Dirs | QDir::NoDotAndDotDot)) {
    const QString folder = runs + QLatin1Char('/') + name;
    const QString created = folder + QLatin1Char('/') + QLatin1String(train::kCreatedRunTorrent);
    if (!QFileInfo::exists(created)) continue;
    if (auto torrent = p2p::loadTorrent(created.toStdString()); torrent && torrent->infoHashV2 == runId.toStdString())
      return folder;
  }
  return {};
}

int Engine::fetchManifest() {
  const QString dataDir = dataDirFor(cl_.dataDir, info);
  if (const int code = openSession(dataDir)) return code;
  const QString hash = cl_.runMagnetHash;
  const QString dir = dataDir + QStringLiteral("/joined/") + hash.left(16);
  const bool fresh = !QFileInfo::exists(dir);  // an earlier join's folder is not ours to remove
  auto* session = parts_->session.get();
  // Once: the first of done / failed / refused / deadline wins. `fetched`: the run.json or the
  // prepared run's folder.
  const ManifestDone finish = [this, session, hash, dir, fresh](const QString& error, const QString& fetched) {
    manifestDeadline_.stop();
    QObject::disconnect(session, nullptr, this, nullptr);
    // Done: joinRun adds the same torrent again, as a seed. Else its files go (a refused one's are
    // going already).
    session->retire(hash.toStdString(), !error.isEmpty());
    if (!error.isEmpty()) return discardManifest(dir, fresh, error);
    Q_EMIT noted(QStringLiteral("manifest"), {{"run", hash}, {"state", "fetched"}});
    continueWithManifest(QFileInfo(fetched).isDir() ? fetched : dir, dir, fresh);
  };
  connect(session, &p2p::SwarmSession::transferFinished, this,
          [this, finish, hash](const QString& infoHash, const QString& path) {
            if (infoHash != hash) return;
            if (!QFileInfo(path).isDir()) return finish({}, path);
            keepFetchState(hash, path, finish);
          });
  connect(session, &p2p::SwarmSession::transferFailed, this,
          [finish, hash](const QString& infoHash, const QString& reason) {
            if (infoHash == hash) finish(QStringLiteral("fetching the run's manifest failed: %1").arg(reason), {});
          });
  connect(session, &p2p::SwarmSession::transferRefused, this,
          [finish, hash](const QString& infoHash, const QString& reason) {
            if (infoHash == hash)
              finish(QStringLiteral("the run's torrent is neither one run.json of at most %1 bytes nor a prepared "
                                    "run's folder: it holds %2")
                         .arg(train::kMaxRunManifestBytes)
                         .arg(reason),
                     {});
          });
  manifestDeadline_.setSingleShot(true);
  connect(&manifestDeadline_, &QTimer::timeout, this, [finish] {
    finish(QStringLiteral("no peer of this run answered within %1 s; is a --bootstrap node of the run given?")
               .arg(kManifestDeadlineMs / 1000),
           {});
  });
  if (auto s = session->fetch(hash.toStdString(), dir.toStdString(), runTorrentLimits(hash, dir)); !s)
    return fail(1, s.error());
  manifestDeadline_.start(kManifestDeadlineMs);
  info("Fetching the manifest of run " + hash.toStdString() + " from its peers");
  Q_EMIT noted(QStringLiteral("manifest"), {{"run", hash}, {"state", "fetching"}});
  return 0;
}

// What a run torrent fetched from strangers may be: run.json alone, or a prepared run's folder of
// which we fetch our shards.
node::FetchLimits Engine::runTorrentLimits(const QString& hash, const QString& dir) {
  node::FetchLimits limits;
  limits.name = "run.json";
  limits.maxBytes = train::kMaxRunManifestBytes;
  limits.folder = [](const std::string&, const node::FetchLimits::FolderFiles& files) {
    return train::preparedTorrentProblem(files);
  };
  limits.folderWanted = [this, hash, dir](const node::FetchLimits::FolderFiles& files) {
    return wantedRunFiles(files, hash, dir);
  };
  return limits;
}

// A prepared run's folder holds only the shards assigned to us: its torrent cannot be hashed from
// it again, so the fetch's state (metadata, merkle trees, which files) is kept in it, then `done`.
void Engine::keepFetchState(const QString& hash, const QString& folder, const ManifestDone& done) {
  auto* session = parts_->session.get();
  connect(session, &p2p::SwarmSession::fetchStateSaved, this,
          [done, hash, folder](const QString& savedHash, const QString& error) {
            if (savedHash != hash) return;
            done(error.isEmpty() ? QString() : QStringLiteral("cannot keep the run's state: ") + error, folder);
          });
  const auto state = folder + QLatin1Char('/') + QLatin1String(train::kPartialRunState);
  if (auto s = session->saveFetchState(hash.toStdString(), state.toStdString()); !s)
    done(QString::fromStdString(s.error()), {});
}

// Of a prepared run's files, the ones this peer fetches: the small ones and the training shards
// assigned to it within its data budget (train::assignShards, epoch 0) — or, on a restart, the
// window it holds already: the shard rotation moves on from there to where the run's step says,
// instead of fetching epoch 0's window again first.
std::set<std::string> Engine::wantedRunFiles(const node::FetchLimits::FolderFiles& files, const QString& runId,
                                             const QString& dir) {
  std::set<std::string> wanted{"run.json", "tokenizer.json", "data/val.bin"};
  std::vector<std::int64_t> tokens;  // the listing was judged already: shards 000… in order
  for (int i = 0;; ++i) {
    const auto name = "data/" + train::trainShardName(i);
    const auto it = std::find_if(files.begin(), files.end(), [&](const auto& f) { return f.first == name; });
    if (it == files.end()) break;
    tokens.push_back((it->second - train::tokenShardBytes(0)) / 2);
  }
  const std::int64_t budget = cl_.dataBudgetBytes;
  const std::string within = budget > 0 ? " (a data budget of " + std::to_string(budget) + " bytes)" : "";
  auto held = shardsHeldBefore(dir, int(tokens.size()));
  if (!held.empty())
    info("Keeping the " + std::to_string(held.size()) + " of the run's " + std::to_string(tokens.size()) +
         " training shards it holds" + within);
  else {
    held = train::assignShards(parts_->identity->peerId(), runId.toStdString(), 0, tokens, budget);
    info("Fetching " + std::to_string(held.size()) + " of the run's " + std::to_string(tokens.size()) +
         " training shards" + within);
  }
  for (const int i : held) wanted.insert("data/" + train::trainShardName(i));
  return wanted;
}

// libtorrent deletes a removed torrent's files on its disk threads after the call returned (and
// may create empty or link files there until then): the folder goes once they are gone, and the
// failure is told after that (a headless client exits on it).
void Engine::discardManifest(const QString& dir, bool fresh, const QString& error) {
  auto* session = parts_->session.get();
  const QString hash = cl_.runMagnetHash;
  auto done = [this, dir, fresh, error] {
    if (fresh) QDir(dir).removeRecursively();
    fail(1, error.toStdString() + (fresh ? "; nothing of it was kept" : ""));
  };
  if (!session->removingFiles(hash.toStdString())) return done();
  connect(session, &p2p::SwarmSession::filesRemoved, this, [this, session, hash, done](const QString& removed) {
    if (removed != hash) return;
    QObject::disconnect(session, &p2p::SwarmSession::filesRemoved, this, nullptr);
    done();
  });
}

// `runFolder`: where run.json is (the fetch's folder `dir`, or the prepared run's folder in it).
void Engine::continueWithManifest(const QString& runFolder, const QString& dir, bool fresh) {
  // Read with its bound and checked here, though prepareRun reads it again: a fetched manifest
  // that is no manifest leaves nothing behind either.
  const QString path = runFolder + QStringLiteral("/run.json");
  auto manifest = train::loadRunManifest(path.toStdString());
  if (!manifest) {
    if (fresh) QDir(dir).removeRecursively();
    fail(1, "the run's manifest: " + manifest.error() + (fresh ? "; nothing of it was kept" : ""));
    return;
  }
  info("Fetched the run's manifest into \"" + runFolder.toStdString() + "\"");
  // A run of the bundled corpus finds it linked in; a prepared run brought its data (and a link
  // in its folder would be a file its run.json does not list).
  const QString bundledCorpus = shareDir_ + QStringLiteral("/runs/sotu-text/corpus");
  if (!manifest->data.prepared() && !QFileInfo::exists(dir + QStringLiteral("/corpus")) &&
      QFileInfo::exists(bundledCorpus))
    QFile::link(bundledCorpus, dir + QStringLiteral("/corpus"));
  cl_.run = runFolder;
  startRun();  // reports failed() itself; the session is kept
}

}  // namespace es::app
