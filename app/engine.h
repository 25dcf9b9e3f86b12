// The swarm engine of one run (docs/ARCHITECTURE.md, "Threads": E): prepares the run, opens the
// identity, the libtorrent session, the ledger and the node, and relays what the node reports as
// plain structs. It lives on one thread — the main thread headless, its own thread under the GUI
// (app/engine_bridge.h) — and every call must be made on that thread.
#pragma once

#include "app/command_line.h"
#include "core/common/expected.h"
#include "core/node/node_metatypes.h"
#include "core/node/swarm.h"
#include "p2p/identity_work.h"

#include <QObject>
#include <QString>
#include <QStringList>
#include <QTimer>
#include <QVariantMap>

#include <functional>
#include <memory>
#include <set>
#include <string>

namespace es::app {

struct EngineSummary {
  long long rounds = 0;
  double trainerBusyFraction = 0;
  double meanRoundSeconds = 0;
  double bytesSentPerRound = 0, bytesReceivedPerRound = 0;
  int transfers = 0;          // torrents in the session besides the run's (published and fetched)
  int refusedFetches = 0;     // fetches whose metadata broke their predicted size
  QStringList transferFiles;  // each of them: its file and whether it is complete
};

class Engine : public QObject {
  Q_OBJECT

 public:
  Engine(CommandLine commandLine, QString shareDir, QObject* parent = nullptr);
  ~Engine() override;

  // Prepares the run and starts the node. 0 when started (then started() was emitted) or, for a
  // run named by magnet link, when its manifest is being fetched (started() or failed() follow);
  // otherwise the exit code (1 runtime, 2 bad input) after failed() with the reason.
  int start();
  void stop();  // finish the step, persist, leave the swarm; then finished()
  void setPaused(bool paused);
  void finishRoundThenPause();
  void setRateLimits(int uploadBytesPerSecond, int downloadBytesPerSecond);
  EngineSummary summary() const;
  Status exportModel(const QString& path);
  const CommandLine& commandLine() const { return cl_; }

 Q_SIGNALS:
  void started(const es::node::RunInfo& info);
  void stepped(const es::node::StepReport& report);
  void roundClosed(const es::node::RoundSummary& summary);
  void roundRepaired(const es::node::RoundSummary& summary);  // Node::roundRepaired
  void swarmChanged(const es::node::SwarmView& view);
  void pausedChanged(bool paused);
  void message(const QString& line);
  void noted(const QString& kind, const QVariantMap& fields);  // Node::noted
  void networkStatus(const QString& summary);                  // reachability, external and listen address (status bar)
  void failed(const QString& error);
  void finished();

 private:
  int fail(int code, const std::string& error, bool printed = false);
  int openSession(const QString& dataDir);
  Expected<p2p::IdentityWork> identityWork(const QString& dataDir, int bits);
  int startRun();  // engine_start.cpp, with the steps below
  int joinSwarm(const QString& runTorrent);
  int configureNode();
  int sizeClaimByMemory(const std::string& device);
  void configurePeer();
  void configureRunFolders();
  void announceRun() const;
  int openLedger(const std::string& dbPath);
  node::RunInfo describeRun(const std::string& ledgerPath) const;
  int joinByMagnet();  // engine_magnet.cpp, with the ones below
  QString installedRunWithId(const QString& runId) const;
  int fetchManifest();
  void continueWithManifest(const QString& runFolder, const QString& dir, bool fresh);
  void startShardRotation();
  using ManifestDone = std::function<void(const QString& error, const QString& fetched)>;
  node::FetchLimits runTorrentLimits(const QString& hash, const QString& dir);
  void keepFetchState(const QString& hash, const QString& folder, const ManifestDone& done);
  std::set<std::string> wantedRunFiles(const node::FetchLimits::FolderFiles& files, const QString& runId,
                                       const QString& dir);
  void discardManifest(const QString& dir, bool fresh, const QString& error);
  void wireNode();

  CommandLine cl_;
  QString shareDir_;
  struct Parts;  // prepared run, identity, session, swarm, ledger, node
  std::unique_ptr<Parts> parts_;
  QTimer viewTimer_;
  QTimer manifestDeadline_;
  std::string lastSetupLine_;
};

}  // namespace es::app
