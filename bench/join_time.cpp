// How long a newcomer takes to join by magnet link (issue 40): seconds from its launch to the
// started event (the run's data ready, the node starting) and to its first closed round, for
//   text     the bundled corpus as a text run (share/expertswarm/runs/sotu-text: run.json alone;
//            the joiner tokenizes the corpus it ships itself) — the default path before issue 40
//   default  the bundled default run: the same corpus created by `create-run` (the same model,
//            tokenizer and shards; the joiner fetches them and tokenizes nothing)
// Each joins a host that is already training; both on loopback, fresh data dirs, 1 thread each.
// Printed as `name: value s` (min/median/max over --repeat N).
//   --corpus-mib N   also a created run of N MiB of text (the bundled text repeated), joined with
//                    --data-budget-mib 16: `join_time_big_*`. Today's path has no figure there: a
//                    run of one's own corpus could not be joined by magnet at all (the text does
//                    not travel). `create_run_N_mib`: create-run's own time on it.
// Usage: join_time [--repeat N] [--rounds N] [--corpus-mib N]
#include "support/swarm_clients.h"

#include <QCoreApplication>
#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QProcess>
#include <QRegularExpression>
#include <QTemporaryDir>

#include <algorithm>
#include <cstdio>

using namespace es::test;

namespace {

struct Joined {
  double started = -1, firstRound = -1;
};

QStringList clientArgs(const QString& dataDir, const QString& listen, int rounds) {
  return {"--no-gui",
          "--data-dir",
          dataDir,
          "--listen",
          listen,
          "--threads",
          "1",
          "--sync-every",
          "5",
          "--rounds",
          QString::number(rounds),
          "--events"};
}

// A host of `run` (a folder or "default"), then a joiner by its magnet link: the joiner's times.
Joined joinOnce(const QTemporaryDir& dir, const QString& tag, const QString& run, int rounds,
                const QStringList& joinerExtra = {}) {
  const QString listen = QString("127.0.0.1:%1").arg(freeLoopbackPort());
  SwarmClient host(tag + "-host", clientArgs(dir.filePath(tag + "-host"), listen, rounds + 20) << "--run" << run);
  if (!waitUntil([&] { return !host.runId().isEmpty() || !host.running(); }, 300000) || host.runId().isEmpty())
    return {};
  QElapsedTimer clock;
  clock.start();
  SwarmClient joiner(tag + "-joiner", clientArgs(dir.filePath(tag + "-joiner"), "127.0.0.1:0", rounds + 1000)
                                          << "--run"
                                          << "magnet:?xt=urn:btmh:1220" + host.runId() << "--bootstrap" << listen
                                          << joinerExtra);
  Joined out;
  waitUntil(
      [&] {
        if (out.started < 0 && !joiner.runId().isEmpty()) out.started = clock.elapsed() / 1000.0;
        if (out.firstRound < 0 && !joiner.rounds().empty()) out.firstRound = clock.elapsed() / 1000.0;
        return out.firstRound >= 0 || !joiner.running();
      },
      600000);
  if (out.firstRound < 0) std::fprintf(stderr, "%s: %s\n", qPrintable(tag), qPrintable(joiner.log().join("\n")));
  return out;
}

// `mib` MiB of text in `dir`/big/corpus.txt: the bundled training text, repeated.
bool writeBigCorpus(const QString& dir, int mib) {
  QFile in(ES_SHARE_DIR "/runs/sotu-text/corpus/sotu-train.txt");
  QFile out(dir + "/big/corpus.txt");
  if (!QDir().mkpath(dir + "/big") || !in.open(QIODevice::ReadOnly) || !out.open(QIODevice::WriteOnly)) return false;
  const QByteArray text = in.readAll();
  for (qint64 written = 0; written < qint64(mib) << 20; written += text.size())
    if (out.write(text) != text.size()) return false;
  return true;
}

bool createRun(const QString& out, const QString& corpus) {
  QProcess create;
  create.start(ES_CLIENT_BINARY, {"create-run", "--out", out, "--preset", "default", corpus});
  if (create.waitForFinished(1800000) && create.exitCode() == 0) return true;
  std::fprintf(stderr, "create-run failed: %s\n", create.readAllStandardError().constData());
  return false;
}

void print(const char* name, std::vector<double> values) {
  std::sort(values.begin(), values.end());
  if (values.empty() || values.front() < 0) return void(std::printf("%s: failed\n", name));
  std::printf("%s: %.2f s (min %.2f, max %.2f, n %zu)\n", name, values[values.size() / 2], values.front(),
              values.back(), values.size());
}

}  // namespace

int main(int argc, char** argv) {
  QCoreApplication app(argc, argv);
  int repeat = 3, rounds = 2, corpusMib = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    const QString flag = argv[i];
    if (flag == "--repeat")
      repeat = QString(argv[i + 1]).toInt();
    else if (flag == "--rounds")
      rounds = QString(argv[i + 1]).toInt();
    else if (flag == "--corpus-mib")
      corpusMib = QString(argv[i + 1]).toInt();
    else
      return std::fprintf(stderr, "usage: %s [--repeat N] [--rounds N] [--corpus-mib N]\n", argv[0]), 2;
  }
  QTemporaryDir dir;
  std::vector<double> started[2], firstRound[2];
  bool ok = true;
  for (int r = 0; r < repeat; ++r)
    for (int kind = 0; kind < 2; ++kind) {
      const QString tag = QString(kind ? "default" : "text") + QString::number(r);
      const auto j = joinOnce(dir, tag, kind ? QString("default") : QString(ES_SHARE_DIR "/runs/sotu-text"), rounds);
      ok = ok && j.firstRound >= 0;
      started[kind].push_back(j.started);
      firstRound[kind].push_back(j.firstRound);
    }
  print("join_time_text_started", started[0]);
  print("join_time_default_started", started[1]);
  print("join_time_text_first_round", firstRound[0]);
  print("join_time_default_first_round", firstRound[1]);
  if (corpusMib > 0) {
    QElapsedTimer made;
    made.start();
    if (!writeBigCorpus(dir.path(), corpusMib) || !createRun(dir.filePath("big-run"), dir.filePath("big"))) return 1;
    std::printf("create_run_%d_mib: %.1f s\n", corpusMib, made.elapsed() / 1000.0);
    std::vector<double> bigStarted, bigRound;
    for (int r = 0; r < repeat; ++r) {
      const auto j =
          joinOnce(dir, "big" + QString::number(r), dir.filePath("big-run"), rounds, {"--data-budget-mib", "16"});
      ok = ok && j.firstRound >= 0;
      bigStarted.push_back(j.started);
      bigRound.push_back(j.firstRound);
    }
    print("join_time_big_started", bigStarted);
    print("join_time_big_first_round", bigRound);
  }
  return ok ? 0 : 1;
}
