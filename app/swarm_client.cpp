#include "app/swarm_client.h"

#include "app/engine.h"
#include "app/event_lines.h"
#include "app/network_setup.h"
#include "app/run_setup.h"
#include "app/stop_signals.h"

#include <QCoreApplication>
#include <QSettings>
#include <QTimer>

#include <unistd.h>
#include <cstdio>
#include <memory>

namespace es::app {

void printRoundLine(const node::RoundSummary& s) {
  // merged=: fingerprint of the merged shared tensors, equal on every peer that merged the same set.
  // val_loss= only on rounds that measured it (of the merged state: equal where merged= is).
  const std::string val = s.valLoss ? " val_loss=" + QString::number(*s.valLoss, 'f', 4).toStdString() : std::string();
  // A repaired round is printed again, as it ended (" repaired"): the last line of a round is true.
  std::printf("round=%lld peers=%d loss=%.4f%s tok/s=%.0f merged=%s%s\n", static_cast<long long>(s.round), s.peers,
              s.loss, val.c_str(), s.tokensPerSecond, s.sharedFingerprint.c_str(), s.repaired ? " repaired" : "");
  std::fflush(stdout);
}

void printSummary(const EngineSummary& s) {
  std::fprintf(stderr,
               "Summary: rounds=%lld trainer_busy_fraction=%.4f mean_round_seconds=%.2f bytes_sent_per_round=%.0f "
               "bytes_received_per_round=%.0f transfers=%d refused_fetches=%d\n",
               s.rounds, s.trainerBusyFraction, s.meanRoundSeconds, s.bytesSentPerRound, s.bytesReceivedPerRound,
               s.transfers, s.refusedFetches);
  for (const QString& file : s.transferFiles) std::fprintf(stderr, "Transfer at exit: %s\n", qPrintable(file));
}

// The live bar on a terminal's stderr, overwritten in place: the round's steps, loss, speed and the
// GPU's last reading (at most a second old).
QMetaObject::Connection showLiveBar(Engine& engine) {
  auto syncEvery = std::make_shared<int>(1);
  QObject::connect(&engine, &Engine::started,
                   [syncEvery](const node::RunInfo& run) { *syncEvery = std::max(1, run.syncEvery); });
  auto gpu = std::make_shared<std::string>();
  return QObject::connect(&engine, &Engine::stepped, [syncEvery, gpu](const node::StepReport& r) {
    const int h = *syncEvery, inRound = int((r.step - 1) % h) + 1;
    const int filled = inRound * 20 / h;
    if (r.gpu)
      *gpu = " GPU " + std::to_string(r.gpu->utilizationPercent) + "% " + std::to_string(r.gpu->temperatureC) + "°C " +
             std::to_string(int(r.gpu->powerWatts)) + "W";
    std::fprintf(stderr, "\r\033[K[%s%s] round %lld step %d/%d loss %.3f %.0f tok/s%s",
                 std::string(filled, '#').c_str(), std::string(20 - filled, '.').c_str(),
                 static_cast<long long>((r.step - 1) / h + 1), inRound, h, r.loss, r.tokensPerSecond, gpu->c_str());
  });
}

// --events: the engine's facts as JSON lines on stdout (app/event_lines.h), in the progress lines'
// place. The log stays on stderr, the live bar too.
void printEventsOf(Engine& engine) {
  QObject::connect(&engine, &Engine::started, [](const node::RunInfo& run) { printEvent(startedEvent(run)); });
  QObject::connect(&engine, &Engine::noted,
                   [](const QString& kind, const QVariantMap& fields) { printEvent(nodeEvent(kind, fields)); });
  QObject::connect(&engine, &Engine::roundClosed, [](const node::RoundSummary& s) { printEvent(roundEvent(s)); });
  QObject::connect(&engine, &Engine::roundRepaired, [](const node::RoundSummary& s) { printEvent(roundEvent(s)); });
  QObject::connect(&engine, &Engine::finished, [&engine] { printEvent(summaryEvent(engine.summary())); });
}

int runSwarmClient(const CommandLine& given, const QString& shareDir) {
  // The donor's saved network settings apply headless too (the systemd unit passes --public).
  CommandLine cl = given;
  QSettings store;
  auto saved = settings::ClientSettings::load(store);
  applyNetworkSettings(cl, saved, &store);
  Engine engine(cl, shareDir);
  int exitCode = 0;
  // On a terminal, a live bar on stderr (overwritten in place) between the log and progress lines.
  const bool tty = ::isatty(STDERR_FILENO) == 1;
  auto clearBar = [tty] {
    if (tty) std::fprintf(stderr, "\r\033[K");
  };
  // Node messages go to stderr here (run-setup lines print themselves; the ledger's too).
  bool setupDone = false;
  QObject::connect(&engine, &Engine::message, [&setupDone, clearBar](const QString& line) {
    if (!setupDone || line.startsWith(QLatin1String("Ledger: "))) return;
    clearBar();
    std::fprintf(stderr, "%s\n", line.toUtf8().constData());
  });
  QObject::connect(&engine, &Engine::started, [&setupDone] { setupDone = true; });
  QMetaObject::Connection bar;
  if (tty) bar = showLiveBar(engine);
  if (cl.events) {
    printEventsOf(engine);
  } else {
    auto printRound = [clearBar](const node::RoundSummary& s) {
      clearBar();
      printRoundLine(s);
    };
    QObject::connect(&engine, &Engine::roundClosed, printRound);
    QObject::connect(&engine, &Engine::roundRepaired, printRound);  // the round again, as it ended
  }
  QObject::connect(&engine, &Engine::failed, [&](const QString& error) {
    if (!setupDone) {  // printed by the setup already
      exitCode = 1;
      QCoreApplication::exit(1);  // a failure after start() returned (joining by magnet link)
      return;
    }
    clearBar();
    info("expertswarm: " + error.toStdString());
    exitCode = 1;
  });
  QObject::connect(&engine, &Engine::finished, [&] {
    QObject::disconnect(bar);
    clearBar();
    printSummary(engine.summary());
    // Let the leaving record go out before the session closes.
    QTimer::singleShot(300, QCoreApplication::instance(), &QCoreApplication::quit);
  });
  if (const int code = engine.start()) return code;

  StopSignals stop([&engine] {
    info("Stopping: finishing the step, keeping the last merged state, leaving the swarm");
    engine.stop();
  });
  QCoreApplication::exec();
  return exitCode;
}

}  // namespace es::app
