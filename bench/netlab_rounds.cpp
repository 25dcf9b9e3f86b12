// Rounds on the emulated internet (issue 12, acceptance 3): N peers of scripts/netlab (a third
// public, a third behind a port-mapping NAT, a third behind a plain NAT; every peer 20 Mbit/s
// down, 5 Mbit/s up) train the default run; per round it prints the wall time, what each peer's
// link sent and received, and how far the round's transfers are from the distribution lower bound.
//
//   netlab_rounds [--per-site K (peers = 3K, default 2)] [--rounds R (6)] [--sync-every S (3)]
//                 [--tiny]   (a 4× narrower model, for many peers on a small machine)
//                 [--compression C]  (the run's swarm.compression, int8 or sparse; default the bundled run's — issue
//                 39)
//                 [--log-dir DIR]  (each peer's log written there at the end, to see why a round split)
//                 [--give-up-after S (1800)]  (a round not closed everywhere by then: each peer's rounds,
//                                              log tail and, if it still runs, its threads; exit 1)
//
// Lower bound of a round's transfers, with S = the round's contribution size (bytes, measured on
// disk) and n peers, each contribution wanted by the n−1 others:
//   receive bound   (n−1)·S ÷ downlink        every peer must receive the others' contributions
//   publish bound   S ÷ uplink                 every contribution must leave its publisher once
//   aggregate bound n(n−1)·S ÷ (n·uplink)      all received bytes pass through someone's uplink
// lower_bound = the largest of the three. transfer time = the round's wall time minus its
// training time (sync_every steps at the tok/s the peers report), so ratio = transfer ÷ bound.
// Needs root (network namespaces); run it by hand or from scripts/bench, never on the public network.
#include "netlab/netlab.h"
#include "support/run_variant.h"

#include <QCommandLineParser>
#include <QDirIterator>
#include <QElapsedTimer>
#include <QTemporaryDir>

#include <cstdio>
#include <map>

using namespace es::test;

namespace {

constexpr double kDownlinkBytesPerS = 20e6 / 8, kUplinkBytesPerS = 5e6 / 8;
constexpr double kTokensPerStep = 8 * 256;  // the default run: batch 8 × seq_len 256

qint64 contributionBytes(const QString& dataDir, int round) {
  QDirIterator it(dataDir, {QString("round-%1-*.safetensors").arg(round)}, QDir::Files, QDirIterator::Subdirectories);
  while (it.hasNext()) {
    const QString path = it.next();
    if (path.contains("/contrib/")) return QFileInfo(path).size();
  }
  return 0;
}

void writeLogs(const QString& dir, const std::vector<std::unique_ptr<SwarmClient>>& peers) {
  if (dir.isEmpty() || !QDir().mkpath(dir)) return;
  for (const auto& p : peers) {
    QFile f(dir + "/" + p->name() + ".log");
    if (f.open(QIODevice::WriteOnly)) f.write((p->timedLog().join('\n') + '\n').toUtf8());
  }
}

// Why round `round` did not close everywhere: per peer, the rounds it closed, whether it still
// runs, its last log lines and (if it runs without the round) what its threads wait on.
void reportStall(int round, const std::vector<std::unique_ptr<SwarmClient>>& peers) {
  for (const auto& p : peers) {
    QStringList closed;
    for (const auto& [r, line] : p->rounds()) closed << QString::number(r);
    std::printf("-- %s (%s), rounds closed: %s\n", qPrintable(p->name()), qPrintable(p->exitState()),
                closed.isEmpty() ? "none" : qPrintable(closed.join(',')));
    std::printf("%s\n", qPrintable(p->timedLog().mid(std::max<qsizetype>(0, p->timedLog().size() - 25)).join('\n')));
    if (p->running() && !p->rounds().count(round)) std::printf("threads:\n%s\n", qPrintable(p->threads()));
  }
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  QCoreApplication app(argc, argv);
  QCommandLineParser parser;
  parser.addOptions(
      {{"per-site", "peers per site", "K", "2"},
       {"rounds", "rounds", "R", "6"},
       {"sync-every", "steps per round", "S", "3"},
       {"tiny", "a small model"},
       {"compression", "the run's swarm.compression (default: the bundled run's)", "C"},
       {"log-dir", "write each peer's log to DIR/<peer>.log at the end", "DIR"},
       {"give-up-after", "stop with a report when a round is not closed everywhere S s after the start", "S", "1800"}});
  parser.process(app);
  const int perSite = parser.value("per-site").toInt(), rounds = parser.value("rounds").toInt();
  const int syncEvery = parser.value("sync-every").toInt();
  const qint64 giveUpMs = parser.value("give-up-after").toLongLong() * 1000;
  if (const auto why = NetLab::unavailableReason(); !why.isEmpty())
    return std::fprintf(stderr, "netlab_rounds: %s\n", qPrintable(why)), 1;
  QTemporaryDir dir;
  NetLab lab(perSite);
  if (!lab.ok()) return std::fprintf(stderr, "netlab_rounds: %s\n", qPrintable(lab.log())), 1;
  const QString run = runVariant(dir.filePath("run"), parser.isSet("tiny"), parser.value("compression"));
  if (run.isEmpty()) return std::fprintf(stderr, "netlab_rounds: cannot write the run\n"), 1;
  auto boot = lab.start("boot", "boot", ES_SWARM_PROBE,
                        {"--listen", NetLab::kBootstrap, "--key", dir.filePath("boot.key"), "--internet"});
  std::vector<std::unique_ptr<SwarmClient>> peers;
  std::vector<LabHost> hosts = lab.peers();
  for (const auto& h : hosts) {
    const QString listen = QString("0.0.0.0:%1").arg(20000 + 111 * int(peers.size()));  // a port each, as installed
    QStringList a{"--no-gui",
                  "--data-dir",
                  dir.filePath(h.name),
                  "--listen",
                  listen,
                  "--bootstrap",
                  NetLab::kBootstrap,
                  "--sync-every",
                  QString::number(syncEvery),
                  "--eval-every",
                  QString::number(syncEvery),
                  "--threads",
                  "1",
                  "--run",
                  run};
    if (h.site == "mapped-nat") a << "--port-mapping";
    peers.push_back(lab.start(h.name, h.name, ES_CLIENT_BINARY, a));
  }
  const int n = int(peers.size());
  std::printf(
      "netlab_rounds: %d peers (%d per site), %s model, %s contributions, %d rounds of %d steps, %.0f Mbit/s down, "
      "%.0f Mbit/s up per peer\n",
      n, perSite, parser.isSet("tiny") ? "tiny" : "default",
      parser.isSet("compression") ? qPrintable(parser.value("compression")) : "the bundled run's", rounds, syncEvery,
      kDownlinkBytesPerS * 8 / 1e6, kUplinkBytesPerS * 8 / 1e6);
  std::fflush(stdout);
  std::vector<std::pair<qint64, qint64>> lastBytes;
  for (const auto& h : hosts) lastBytes.push_back(lab.linkBytes(h.name));
  QElapsedTimer clock;
  clock.start();
  qint64 lastClose = 0;
  for (int r = 1; r <= rounds; ++r) {
    // Closed here, or a later round (a latecomer adopts the swarm's snapshot of a later round
    // and never closes this one). No peer is given --rounds: each runs until the end of the
    // measurement, so a peer slow to start (identity work is random: 14 s once, under load)
    // still finds the others to fetch that snapshot from.
    const bool closed = waitUntil(
        [&] {
          for (auto& p : peers)
            if (p->rounds().lower_bound(r) == p->rounds().end() && p->running()) return false;
          return true;
        },
        int(std::max<qint64>(0, giveUpMs - clock.elapsed())));
    if (!closed) {
      std::printf("netlab_rounds: round %d did not close everywhere %.0f s after the start\n", r, giveUpMs / 1000.0);
      reportStall(r, peers);
      writeLogs(parser.value("log-dir"), peers);
      return 1;
    }
    const qint64 now = clock.elapsed();
    const double wall = (now - lastClose) / 1000.0;
    lastClose = now;
    qint64 sent = 0, received = 0, maxReceived = 0;
    int merged = 0;
    double tps = 0;
    std::map<QString, int> states;  // fingerprint → peers that merged it
    std::map<int, int> counts;      // contributions merged → peers
    for (int i = 0; i < n; ++i) {
      const auto bytes = lab.linkBytes(hosts[i].name);
      sent += bytes.first - lastBytes[i].first;
      received += bytes.second - lastBytes[i].second;
      maxReceived = std::max(maxReceived, bytes.second - lastBytes[i].second);
      lastBytes[i] = bytes;
      if (auto it = peers[i]->rounds().find(r); it != peers[i]->rounds().end()) {
        merged += it->second.peers == n;
        ++states[it->second.merged.left(8)];
        ++counts[it->second.peers];
      }
    }
    if (auto it = peers[0]->rounds().find(r); it != peers[0]->rounds().end()) tps = it->second.tokensPerSecond;
    const double size = double(contributionBytes(dir.filePath(hosts[0].name), r));
    const double bound =
        std::max({(n - 1) * size / kDownlinkBytesPerS, size / kUplinkBytesPerS, (n - 1) * size / kUplinkBytesPerS});
    const double training = tps > 0 ? syncEvery * kTokensPerStep / tps : 0;
    const double transfer = std::max(0.0, wall - training);
    std::printf(
        "round %d: wall %.1f s, training ~%.1f s, transfer ~%.1f s, contribution %.2f MB, per peer sent %.2f MB "
        "received %.2f MB "
        "(max %.2f MB), lower bound %.1f s, ratio %.2f, merged all %d on %d/%d peers\n",
        r, wall, training, transfer, size / 1e6, sent / 1e6 / n, received / 1e6 / n, maxReceived / 1e6, bound,
        bound > 0 ? transfer / bound : 0.0, n, merged, n);
    QStringList split, sizes;
    for (const auto& [fp, k] : states) split << QString("%1×%2").arg(k).arg(fp);
    for (const auto& [c, k] : counts) sizes << QString("%1 peers merged %2").arg(k).arg(c);
    std::printf("  states: %s; %s\n", qPrintable(split.join(' ')), qPrintable(sizes.join(", ")));
    std::fflush(stdout);
  }
  writeLogs(parser.value("log-dir"), peers);
  for (auto& p : peers) p->terminate();
  waitUntil([&] { return std::none_of(peers.begin(), peers.end(), [](auto& p) { return p->running(); }); }, 60000);
  return 0;
}
