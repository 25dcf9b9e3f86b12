// The client's command line, parsed and checked once. Bad input is reported with a clear message
// and exit code 2 by main(); nothing starts on a command line that does not make sense.
#pragma once

#include <QString>
#include <QStringList>

#include <optional>
#include <vector>

namespace es::app {

struct CommandLine {
  bool noGui = false;
  bool localOnly = false;
  QString run = QStringLiteral("default");  // "default", a run folder holding run.json, or a magnet link
  QString runMagnetHash;                    // the run id (v2 info-hash, hex) when run is a magnet link
  QString dataDir;                          // empty: ~/.local/share/expertswarm (app/data_dir.h)
  std::optional<long long> steps;           // steps to train in this invocation
  std::vector<int> experts;                 // empty: all (local-only) / auto (swarm)
  QString device = QStringLiteral("auto");  // auto | cpu | cuda | cuda:N
  int threads = 0;                          // 0: all cores
  int logEvery = 0;                         // 0: the run's log_interval
  int evalEvery = 0;                        // 0: the run's eval_interval
  bool fresh = false;                       // ignore (and replace) a saved training state
  // Swarm mode (--no-gui without --local-only).
  QString listen;               // IP:PORT; empty: every interface on the saved port (app/network_setup.h)
  QStringList bootstrap;        // DHT nodes, HOST:PORT
  bool bootstrapGiven = false;  // --bootstrap given: it replaces the public routers
  bool publicNetwork = false;   // --public: the public routers, UPnP, NAT-PMP, saved DHT state
  bool portMapping = false;     // --port-mapping: UPnP + NAT-PMP only
  long long rounds = 0;         // 0: until stopped
  int syncEvery = 0;            // 0: the run's sync_every
  QString exportPath;           // write the merged model here at the end
  bool events = false;  // --events: JSON event lines on stdout instead of the progress lines (app/event_lines.h)
  QString testPoison;   // hidden, tests only: nan | norm | foreign | reverse | stale
  QString uiSnapshot;   // hidden, tests only: GUI writes window.png + ui-state.json here, then quits
  // From the donor's settings (GUI) or the command line (headless).
  int claimSize = 0;         // experts to claim; 0: the run's experts_per_peer
  int hostMemoryCapMiB = 0;  // --host-memory-mib: the pre-flight's host memory; 0: no cap
  int gpuMemoryCapMiB = 0;   // --gpu-memory-mib: the pre-flight's GPU memory; 0: no cap
  int diskQuotaMiB = 0;      // --disk-quota-mib (or the donor's setting); 0: from the model
  // --data-budget-mib (a number: 0.5 is 512 KiB; or the donor's setting, whole MiB): the disk a
  // joined prepared run's training shards may take; 0: all of them.
  std::int64_t dataBudgetBytes = 0;
  int uploadLimit = 0, downloadLimit = 0;  // bytes/s, 0: unlimited
};

struct ParseResult {
  std::optional<CommandLine> commandLine;  // set when the client should run
  int exitCode = 0;                        // otherwise: 0 after --help/--version, 2 on bad input
  QString message;                         // what to print (stdout for 0, stderr for 2)
};

ParseResult parseCommandLine(const QStringList& arguments);
// The run id (v2 info-hash, lower-case hex) a magnet link names, or empty when it names none.
QString runIdOfMagnet(const QString& link);
// 127.x.x.x:P, [::1]:P or localhost:P: peers on one machine (tests, the two-peer demo).
bool isLoopbackEndpoint(const QString& endpoint);

}  // namespace es::app
