// The node on a real loopback swarm (issue 5, acceptance 6): 4 `expertswarm --no-gui` peers train
// the bundled run together; each prints a summary when it finishes. Printed as `name: value`:
//   trainer_busy_fraction_*   wall time the trainer spends inside steps (goal ≥ 0.95): training
//                             goes on while a round is gathered, so only writing the
//                             contribution, merging and a late round cost step time
//   round_seconds_mean        time between round closes
//   bytes_sent/received_per_peer_per_round  all session traffic (payload, protocol, DHT)
// Usage: node_utilization [--peers N] [--rounds N] [--sync-every N] [--threads N]
//                         [--compression int8|sparse]  (the run's swarm.compression, default the
//                         bundled run's; issue 39)
// (defaults 4 peers × 1 thread, 6 rounds of 10 steps: ~3 min on 2 cores). On 2 cores 4 peers
// share the CPU, which makes every step slower but the fraction is what matters.
#include "support/run_variant.h"
#include "support/swarm_clients.h"

#include <QCoreApplication>
#include <QTemporaryDir>

#include <cstdio>

using namespace es::test;

int main(int argc, char** argv) {
  QCoreApplication app(argc, argv);
  int peers = 4, rounds = 6, syncEvery = 10, threads = 1;
  QString compression;  // the bundled run's
  for (int i = 1; i + 1 < argc; i += 2) {
    const QString flag = argv[i];
    const int value = QString(argv[i + 1]).toInt();
    if (flag == "--compression")
      compression = argv[i + 1];
    else if (flag == "--peers")
      peers = value;
    else if (flag == "--rounds")
      rounds = value;
    else if (flag == "--sync-every")
      syncEvery = value;
    else if (flag == "--threads")
      threads = value;
    else
      return std::fprintf(stderr,
                          "usage: %s [--peers N] [--rounds N] [--sync-every N] [--threads N] [--compression C]\n",
                          argv[0]),
             2;
  }
  QTemporaryDir dir;
  const QString run = runVariant(dir.filePath("run"), false, compression);
  if (run.isEmpty()) return std::fprintf(stderr, "node_utilization: cannot write the run\n"), 1;
  const QString bootstrap = QString("127.0.0.1:%1").arg(freeLoopbackPort());
  std::vector<std::unique_ptr<SwarmClient>> clients;
  QElapsedTimer clock;
  clock.start();
  for (int i = 0; i < peers; ++i) {
    QStringList a{"--no-gui",
                  "--data-dir",
                  dir.filePath(QString("peer%1").arg(i)),
                  "--listen",
                  i == 0 ? bootstrap : QString("127.0.0.1:0"),
                  "--sync-every",
                  QString::number(syncEvery),
                  "--rounds",
                  QString::number(rounds),
                  "--threads",
                  QString::number(threads),
                  "--run",
                  run,
                  "--events"};
    if (i) a << "--bootstrap" << bootstrap;
    clients.push_back(std::make_unique<SwarmClient>(QString("peer%1").arg(i), a));
  }
  const bool done = waitUntil(
      [&] {
        for (auto& c : clients)
          if (c->running()) return false;
        return true;
      },
      1800000);
  if (!done) return std::fprintf(stderr, "node_utilization: the peers did not finish\n"), 1;
  double busyMin = 1, busySum = 0, roundSum = 0, sent = 0, received = 0;
  int n = 0;
  for (auto& c : clients) {
    const auto& summary = c->summary();  // the exit's summary event (app/event_lines.h)
    if (!summary.contains("trainer_busy_fraction")) continue;
    const double busy = summary.value("trainer_busy_fraction").toDouble();
    busyMin = std::min(busyMin, busy);
    busySum += busy;
    roundSum += summary.value("mean_round_seconds").toDouble();
    sent += summary.value("bytes_sent_per_round").toDouble();
    received += summary.value("bytes_received_per_round").toDouble();
    ++n;
  }
  if (n != peers) return std::fprintf(stderr, "node_utilization: %d of %d peers printed a summary\n", n, peers), 1;
  std::printf("peers: %d\nrounds: %d\nsync_every: %d\nthreads_per_peer: %d\ncompression: %s\n", peers, rounds,
              syncEvery, threads, compression.isEmpty() ? "the bundled run's" : qPrintable(compression));
  std::printf("trainer_busy_fraction_mean: %.4f\n", busySum / n);
  std::printf("trainer_busy_fraction_min: %.4f\n", busyMin);
  std::printf("round_seconds_mean: %.2f s\n", roundSum / n);
  std::printf("bytes_sent_per_peer_per_round: %.0f B\n", sent / n);
  std::printf("bytes_received_per_peer_per_round: %.0f B\n", received / n);
  std::printf("total_seconds: %.0f s\n", clock.elapsed() / 1000.0);
  return 0;
}
