// Issue 38: per-peer bytes per round between real client processes, all-to-all against sharded.
// N `expertswarm --no-gui` peers on 127.0.0.1 train a copy of the bundled run with int8
// contributions (the default model; light steps: the bytes depend on the model, not the batch),
// once all-to-all and once sharded from N senders (swarm.reduction: 3 reducers a shard, 1 audit
// each — the client's defaults; `--replicas`, `--audits`). Each peer's round events carry its
// session's byte counters read when the round merged (everything the session moved: payload,
// protocol, the DHT), so a round's bytes are the difference to the round before. Round 1 is
// all-to-all in both (nobody's work is merged yet) and is not counted; from round 2 it prints per
// round the busiest peer's received and sent MiB and the mean, and the rounds' mean of each, for
// both topologies — what bench/reduction_scale's byte model predicts for real processes.
//   reduction_processes [--peers N (4)] [--rounds R (4)] [--sync-every S (3)] [--replicas R (3)]
//                       [--audits A (1)] [--only all-to-all|sharded] [--give-up-after S (1800)]
//                       [--deadline-min S (the run's 30)]  (the outputs' deadline is half of it:
//                                         16 clients on 2 cores missed 15 s and recomputed)
//                       [--batch B (4)]  (sequences a step; 1 with --sync-every 1: the lightest
//                                         training that still publishes real contributions of the
//                                         default model — how 16 peers fit 2 cores)
//                       [--log-dir DIR]  (each client's whole log, each line's arrival time first,
//                                         DIR/<topology>/peerN.log)
//                       [--kill K] [--kill-round R (3)]  (churn: below)
// Churn (`--kill K`, sharded only): the last K clients are killed (SIGKILL) when another first
// closes round R as sharded ("Round R: sharded over"): senders of that round and reducers of its
// shards gone before they publish. Only the survivors are counted; for each round it prints when
// the first and the last survivor merged it (seconds from the start) and into how many states.
// Loopback only; ~3 min for 4 peers on 2 cores, ~8 for 8.
#include "support/swarm_clients.h"

#include <QCoreApplication>
#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

using namespace es::test;

namespace {

struct Options {
  int peers = 4, rounds = 4, syncEvery = 3, replicas = 3, audits = 1;
  int giveUpSeconds = 1800;  // a swarm not done by then: each client's log tail, and no figures
  QString logDir;            // each client's whole log written there at the end
  QString only;
  int kill = 0, killRound = 3;
  int batch = 4;
  int deadlineMin = 0;  // 0: the run's
};

// The run's steps this light: `batch` sequences a step, one validation batch.
bool setBatch(const QString& runDir, int batch) {
  QFile file(runDir + "/run.json");
  if (!file.open(QIODevice::ReadOnly)) return false;
  auto manifest = QJsonDocument::fromJson(file.readAll()).object();
  file.close();
  auto train = manifest.value("train").toObject();
  train.insert("batch_size", batch);
  train.insert("eval_batches", 1);
  manifest.insert("train", train);
  return file.open(QIODevice::WriteOnly | QIODevice::Truncate) && file.write(QJsonDocument(manifest).toJson()) > 0;
}

// Per survivor, when each of its round events arrived (ms from the start).
using MergeTimes = std::vector<std::map<int, qint64>>;

// The wait's poll (every 250 ms): notes new round events' times, and kills the churned clients
// once a survivor logs round `killRound`'s sharded close.
struct Churn {
  const Options& o;
  std::vector<std::unique_ptr<SwarmClient>>& clients;
  MergeTimes merged;
  QElapsedTimer clock;
  qint64 lastPoll = -1000, killedAt = -1;

  int survivors() const { return int(clients.size()) - o.kill; }
  void poll() {
    if (clock.elapsed() - lastPoll < 250) return;
    lastPoll = clock.elapsed();
    for (int i = 0; i < survivors(); ++i)
      for (const auto& e : clients[i]->events("round")) merged[i].emplace(e.value("round").toInt(), lastPoll);
    if (o.kill == 0 || killedAt >= 0) return;
    for (int i = 0; i < survivors(); ++i)
      if (clients[i]->logContains(QString("Round %1: sharded over").arg(o.killRound))) {
        for (int k = survivors(); k < int(clients.size()); ++k) clients[k]->kill();
        killedAt = lastPoll;
        std::printf("killed %d of %d clients at %.1f s (round %d's close)\n", o.kill, int(clients.size()),
                    killedAt / 1000.0, o.killRound);
        return;
      }
  }
};

void printMergeTimes(const Churn& churn, int rounds) {
  std::printf("| round | first survivor merged (s) | last survivor merged (s) | survivors merged | states |\n");
  std::printf("|---|---|---|---|---|\n");
  for (int r = 1; r <= rounds; ++r) {
    qint64 first = -1, last = -1;
    int count = 0;
    for (const auto& times : churn.merged)
      if (const auto at = times.find(r); at != times.end()) {
        first = first < 0 ? at->second : std::min(first, at->second);
        last = std::max(last, at->second);
        ++count;
      }
    std::set<QString> states;
    for (int i = 0; i < churn.survivors(); ++i)
      for (const auto& e : churn.clients[i]->events("round"))
        if (e.value("round").toInt() == r) states.insert(e.value("state").toString());
    std::printf("| %d | %.1f | %.1f | %d of %d | %zu |\n", r, first / 1000.0, last / 1000.0, count, churn.survivors(),
                states.size());
  }
}

struct RoundBytes {
  double busiestReceived = 0, busiestSent = 0, meanReceived = 0, meanSent = 0;
};

// Runs the swarm once; → per round from 2 on, the peers' bytes (empty: it failed, said why).
std::map<int, RoundBytes> runSwarm(const Options& o, bool sharded, const QString& dir) {
  QJsonObject swarm{{"compression", "int8"}};
  if (o.deadlineMin > 0)
    swarm.insert("deadline", QJsonObject{{"factor", 1.5}, {"min_seconds", o.deadlineMin}, {"max_seconds", 600}});
  if (sharded)
    swarm.insert("reduction", QJsonObject{{"replicas", o.replicas}, {"audits", o.audits}, {"shard_from", o.peers}});
  const QString run = customRun(dir + "/run", swarm);
  if (run.isEmpty() || (o.batch != 4 && !setBatch(run, o.batch))) {
    std::fprintf(stderr, "reduction_processes: cannot write the run under %s\n", qPrintable(dir));
    return {};
  }
  const QString bootstrap = QString("127.0.0.1:%1").arg(freeLoopbackPort());
  std::vector<std::unique_ptr<SwarmClient>> clients;
  for (int i = 0; i < o.peers; ++i) {
    QStringList a{"--no-gui",
                  "--run",
                  run,
                  "--data-dir",
                  dir + QString("/peer%1").arg(i),
                  "--listen",
                  i == 0 ? bootstrap : QString("127.0.0.1:0"),
                  "--sync-every",
                  QString::number(o.syncEvery),
                  "--rounds",
                  QString::number(o.rounds),
                  "--threads",
                  "1",
                  "--events"};
    if (i > 0) a << "--bootstrap" << bootstrap;
    clients.push_back(std::make_unique<SwarmClient>(QString("peer%1").arg(i), a));
  }
  Churn churn{o, clients, MergeTimes(clients.size() - o.kill), {}};
  churn.clock.start();
  const bool done = waitUntil(
      [&] {
        churn.poll();
        return std::none_of(clients.begin(), clients.end(), [](const auto& c) { return c->running(); });
      },
      qint64(o.giveUpSeconds) * 1000);
  churn.lastPoll = -1000;
  churn.poll();  // the last events
  if (o.kill > 0) printMergeTimes(churn, o.rounds);
  if (!o.logDir.isEmpty()) {
    const QString into = o.logDir + (sharded ? "/sharded" : "/all-to-all");
    QDir().mkpath(into);
    for (const auto& c : clients) {
      QFile file(into + "/" + c->name() + ".log");
      if (file.open(QIODevice::WriteOnly)) file.write(c->timedLog().join("\n").toUtf8());  // one timeline
    }
  }
  std::map<int, RoundBytes> out;
  bool allFinished = true;            // every client that did not (still running, or another exit) says so
  clients.resize(churn.survivors());  // the killed are not counted
  for (const auto& c : clients)
    if (c->running() || !c->finishedWith(0)) {
      allFinished = false;
      std::fprintf(stderr, "%s did not finish its rounds%s:\n  %s\n", qPrintable(c->name()),
                   c->running() ? " (still running)" : "",
                   qPrintable(c->log().mid(std::max(0, int(c->log().size()) - 30)).join("\n  ")));
    }
  if (!done || !allFinished) return {};
  for (int r = 2; r <= o.rounds; ++r) {
    RoundBytes b;
    for (const auto& c : clients) {
      const auto events = c->events("round");
      const auto at = [&](int round, const char* field) {
        for (const auto& e : events)
          if (e.value("round").toInt() == round) return e.value(field).toDouble();
        return 0.0;
      };
      const double received = (at(r, "session_bytes_received") - at(r - 1, "session_bytes_received")) / (1 << 20);
      const double sent = (at(r, "session_bytes_sent") - at(r - 1, "session_bytes_sent")) / (1 << 20);
      b.busiestReceived = std::max(b.busiestReceived, received);
      b.busiestSent = std::max(b.busiestSent, sent);
      b.meanReceived += received / clients.size();
      b.meanSent += sent / clients.size();
    }
    out[r] = b;
  }
  return out;
}

void print(const char* topology, const std::map<int, RoundBytes>& rounds) {
  RoundBytes mean;
  for (const auto& [r, b] : rounds) {
    std::printf("| %s | %d | %.1f | %.1f | %.1f | %.1f |\n", topology, r, b.busiestReceived, b.meanReceived,
                b.busiestSent, b.meanSent);
    mean.busiestReceived += b.busiestReceived / rounds.size();
    mean.meanReceived += b.meanReceived / rounds.size();
    mean.busiestSent += b.busiestSent / rounds.size();
    mean.meanSent += b.meanSent / rounds.size();
  }
  std::printf("| %s | mean | %.1f | %.1f | %.1f | %.1f |\n", topology, mean.busiestReceived, mean.meanReceived,
              mean.busiestSent, mean.meanSent);
}

}  // namespace

int main(int argc, char** argv) {
  QCoreApplication app(argc, argv);
  Options o;
  for (int i = 1; i < argc; i += 2) {
    if (i + 1 == argc)  // a lone flag (--help among them) is not a run: say what the flags are
      return std::fprintf(
                 stderr,
                 "reduction_processes: %s needs a value; flags: --peers --rounds --sync-every "
                 "--replicas --audits --only --give-up-after --log-dir --kill --kill-round --batch --deadline-min\n",
                 argv[i]),
             2;
    const QString flag = argv[i], value = argv[i + 1];
    if (flag == "--peers")
      o.peers = value.toInt();
    else if (flag == "--rounds")
      o.rounds = value.toInt();
    else if (flag == "--sync-every")
      o.syncEvery = value.toInt();
    else if (flag == "--replicas")
      o.replicas = value.toInt();
    else if (flag == "--audits")
      o.audits = value.toInt();
    else if (flag == "--only")
      o.only = value;
    else if (flag == "--give-up-after")
      o.giveUpSeconds = value.toInt();
    else if (flag == "--log-dir")
      o.logDir = value;
    else if (flag == "--kill")
      o.kill = value.toInt();
    else if (flag == "--kill-round")
      o.killRound = value.toInt();
    else if (flag == "--batch")
      o.batch = value.toInt();
    else if (flag == "--deadline-min")
      o.deadlineMin = value.toInt();
    else
      return std::fprintf(stderr, "reduction_processes: unknown flag %s\n", argv[i]), 2;
  }
  if (o.peers <= o.replicas || o.rounds < 2 || o.batch < 1)
    return std::fprintf(stderr, "reduction_processes: needs more peers than replicas, and 2 rounds\n"), 2;
  if (o.kill < 0 || o.peers - o.kill <= o.replicas || (o.kill > 0 && o.only != "sharded") || o.killRound < 2 ||
      o.killRound > o.rounds)
    return std::fprintf(stderr,
                        "reduction_processes: --kill K needs --only sharded, more survivors than replicas "
                        "and a --kill-round from 2 to --rounds\n"),
           2;
  std::printf(
      "%d peers, default model, int8, %d rounds of %d steps of %d sequences; sharded: %d reducers a shard, "
      "%d audits\n",
      o.peers, o.rounds, o.syncEvery, o.batch, o.replicas, o.audits);
  std::printf("| topology | round | busiest recv MiB | mean recv MiB | busiest sent MiB | mean sent MiB |\n");
  std::printf("|---|---|---|---|---|---|\n");
  int status = 0;
  for (const bool sharded : {false, true}) {
    if (!o.only.isEmpty() && o.only != (sharded ? "sharded" : "all-to-all")) continue;
    QTemporaryDir dir;
    const auto rounds = runSwarm(o, sharded, dir.path());
    if (rounds.empty()) status = 1;
    print(sharded ? "sharded" : "all-to-all", rounds);
    std::fflush(stdout);
  }
  return status;
}
