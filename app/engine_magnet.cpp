// Engine: joining a run by its magnet link. The run's id is the v2 info-hash of its run torrent,
// whose only file is run.json; the session fetches it from the run's peers (found on the DHT under
// the same key they announce the run on), then the run starts as from a folder. The manifest names
// its corpus by relative path: a run made from the bundled corpus finds it here (linked in).
#include "app/data_dir.h"
#include "app/engine.h"
#include "app/engine_parts.h"
#include "app/run_setup.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>

namespace es::app {
namespace {
constexpr int kManifestDeadlineMs = 180000;
}

int Engine::fetchManifest() {
  const QString dataDir = dataDirFor(cl_.dataDir, info);
  if (const int code = openSession(dataDir)) return code;
  const QString hash = cl_.runMagnetHash;
  const QString dir = dataDir + QStringLiteral("/joined/") + hash.left(16);
  auto* session = parts_->session.get();
  // Once: the first of done / failed / deadline wins.
  auto finish = [this, session, hash](const QString& error, const QString& dir) {
    manifestDeadline_.stop();
    QObject::disconnect(session, nullptr, this, nullptr);
    session->retire(hash.toStdString(), false);  // joinRun adds the same torrent again, as a seed
    if (!error.isEmpty()) {
      fail(1, error.toStdString());
      return;
    }
    Q_EMIT noted(QStringLiteral("manifest"), {{"run", hash}, {"state", "fetched"}});
    continueWithManifest(dir);
  };
  connect(session, &p2p::SwarmSession::transferFinished, this,
          [finish, hash, dir](const QString& infoHash, const QString&) {
            if (infoHash == hash) finish({}, dir);
          });
  connect(session, &p2p::SwarmSession::transferFailed, this,
          [finish, hash](const QString& infoHash, const QString& reason) {
            if (infoHash == hash) finish(QStringLiteral("fetching the run's manifest failed: %1").arg(reason), {});
          });
  manifestDeadline_.setSingleShot(true);
  connect(&manifestDeadline_, &QTimer::timeout, this, [finish] {
    finish(QStringLiteral("no peer of this run answered within %1 s; is a --bootstrap node of the run given?")
               .arg(kManifestDeadlineMs / 1000),
           {});
  });
  if (auto s = session->fetch(hash.toStdString(), dir.toStdString()); !s) return fail(1, s.error());
  manifestDeadline_.start(kManifestDeadlineMs);
  info("Fetching the manifest of run " + hash.toStdString() + " from its peers");
  Q_EMIT noted(QStringLiteral("manifest"), {{"run", hash}, {"state", "fetching"}});
  return 0;
}

void Engine::continueWithManifest(const QString& dir) {
  if (!QFileInfo::exists(dir + QStringLiteral("/run.json"))) {
    fail(1, "the run's torrent held no run.json");
    return;
  }
  info("Fetched the run's manifest into \"" + dir.toStdString() + "\"");
  const QString bundledCorpus = shareDir_ + QStringLiteral("/runs/default/corpus");
  if (!QFileInfo::exists(dir + QStringLiteral("/corpus")) && QFileInfo::exists(bundledCorpus))
    QFile::link(bundledCorpus, dir + QStringLiteral("/corpus"));
  cl_.run = dir;
  startRun();  // reports failed() itself; the session is kept
}

}  // namespace es::app
