// Issue 37's proof at the node (bench/sybil_cost does the merge): for each attack on the round
// and H ∈ {3, 5} honest peers, the smallest number of attacker keys (of 1, 2, 4, 8, 16, 32) that
// achieves each harm. The honest peers are in-process nodes (core/node/node.h) over MemorySwarm
// (tests/support/memory_swarm.h: one process, no network, no signatures — H clients and 32 keys
// over libtorrent do not fit 2 cores) on the tiny model of the node tests, 5 rounds each. Keys:
//   ghosts  — announce a contribution every round (claiming expert 0) and never serve a byte
//   rotate  — as ghosts, with k fresh keys every round (a rotated key is never a no-show)
//   say     — as ghosts, and report having merged those ghost contributions into a state of their
//             own (`merged` fingerprints), from round 2 on
//   trickle — announce a contribution every round and serve it just fast enough to look on time
//             at every look of the deadline, never the last byte
// Harms (any honest node): freeze — merged no other honest peer's contribution in each of rounds
// 3–5; takeover — merged into, or went out of step towards, the attackers' state; stall — a round
// from 3 on took over 2 × the slowest such round of the same H without attackers.
#include "core/node/node.h"
#include "core/train/corpus_prep.h"
#include "support/memory_swarm.h"
#include "support/node_notes.h"
#include "support/tiny_node.h"
#include "support/wait_until.h"

#include <QCommandLineParser>
#include <QCoreApplication>
#include <QElapsedTimer>
#include <QFile>
#include <QTemporaryDir>

#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

using namespace es;
using namespace es::node;

namespace {

constexpr qint64 kRounds = 5;
const std::string kFakeState = "5ca1ab1e5ca1ab1e";

struct Outcome {
  bool freeze = false, takeover = false, stall = false, failed = false;
  double slowestRound = 0;  // seconds, rounds 3-5, slowest honest node
  double medianRound = 0;   // seconds, rounds 3-5, all honest nodes
  int fewestMerged = 0;     // the fewest contributions an honest node merged in a round 3-5
};

// The attackers' side: k keys on the hub, what they announce each round, and the trickle's bytes.
class Attackers {
 public:
  Attackers(MemorySwarmHub& hub, const QString& dir, const std::string& kind, int keys)
      : hub_(hub), kind_(kind), dir_(dir), perRound_(keys) {
    addKeys();
    clock_.start();
  }
  bool owns(const ContentId& id) const { return ids_.count(id) > 0; }
  // What the trickled transfers report: the rest halves every 2 s from the announcement.
  SwarmTraffic traffic() const {
    SwarmTraffic t;
    if (kind_ != "trickle") return t;
    constexpr std::int64_t size = 1 << 20;
    const auto left = std::max<std::int64_t>(1, std::int64_t(size * std::exp2(-clock_.elapsed() / 2000.0)));
    for (const auto& id : current_) t.transfers.push_back({id, size, size - left, 0, size - left});
    return t;
  }
  // Called as honest nodes close rounds: the keys announce for the next one (once each round).
  void roundClosed(qint64 round) {
    if (round + 1 > announced_) announce(announced_ = round + 1);
  }
  void announce(qint64 round) {
    current_.clear();
    if (kind_ == "rotate" && round > 1) addKeys();
    const std::size_t from = kind_ == "rotate" ? keys_.size() - static_cast<std::size_t>(perRound_) : 0;
    for (std::size_t i = from; i < keys_.size(); ++i) {
      auto& key = keys_[i];
      Announcement an;
      an.round = round;
      an.claims = {0};
      an.leaseUntil = round + 2;
      for (qint64 r : kind_ == "say" ? std::vector<qint64>{round - 1, round} : std::vector<qint64>{round}) {
        if (r < 1) continue;
        const auto id = publishGhost(*key, r);
        if (id.empty()) continue;
        ids_.insert(id);
        current_.insert(id);
        an.contrib[r] = id;
      }
      if (kind_ == "say" && round >= 3) an.merged = {{round - 2, kFakeState}, {round - 1, kFakeState}};
      if (!key->announce(an).ok()) std::fprintf(stderr, "sybil_nodes: an attacker could not announce\n");
    }
    clock_.restart();
  }

 private:
  void addKeys() {
    for (int k = 0; k < perRound_; ++k)
      keys_.push_back(std::make_unique<MemorySwarm>(hub_, "a-key-" + std::to_string(100 + keys_.size())));
  }
  ContentId publishGhost(MemorySwarm& who, qint64 round) {
    const QString path = dir_ + QStringLiteral("/%1-%2.bin").arg(QString::fromStdString(who.selfId().str())).arg(round);
    QFile f(path);
    const QByteArray bytes = QByteArray(64, char(round)) + QByteArray::fromStdString(who.selfId().str());
    if (!f.open(QIODevice::WriteOnly) || f.write(bytes) != bytes.size()) return {};
    f.close();
    auto id = who.publish(path.toStdString());
    return id ? *id : ContentId();
  }

  MemorySwarmHub& hub_;
  std::string kind_;
  QString dir_;
  int perRound_ = 0;
  std::vector<std::unique_ptr<MemorySwarm>> keys_;
  std::set<ContentId> ids_, current_;
  QElapsedTimer clock_;
  qint64 announced_ = 0;
};

struct HonestRun {
  std::map<int, std::map<qint64, RoundSummary>> rounds;  // node → round → summary
  std::map<int, std::map<qint64, double>> closedAt;      // node → round → seconds since start
  std::map<int, test::NodeNotes> notes;
  QString failure;
};

HonestRun runHonest(const train::RunData& data, const QString& root, int honest, Attackers* attackers,
                    MemorySwarmHub& hub) {
  std::vector<std::unique_ptr<MemorySwarm>> swarms;
  std::vector<std::unique_ptr<Node>> nodes;
  for (int i = 0; i < honest; ++i) {
    swarms.push_back(std::make_unique<MemorySwarm>(hub, "peer-" + std::to_string(i)));
    if (attackers) {
      swarms.back()->withhold([attackers](const ContentId& id) { return attackers->owns(id); });
      swarms.back()->reportTraffic([attackers] { return attackers->traffic(); });
    }
    NodeConfig c = test::tinyNodeConfig(data, root, QString("peer-%1").arg(i));
    c.maxRounds = kRounds;
    // The deadline follows the rounds (1.5 × the typical round), as in a real run, not a floor
    // far above this tiny model's sub-second rounds.
    c.policy.deadlineMinSeconds = 0.5;
    c.policy.deadlineMaxSeconds = 20;
    c.policy.snapshotEvery = 0;
    c.peer.trainer.dataSeed = 1 + i;
    c.peer.syncEvery = 12;  // ~0.5 s rounds here: long enough that timer jitter is not a stall
    nodes.push_back(std::make_unique<Node>(*swarms.back(), c, data.train, data.val));
  }
  HonestRun run;
  int finished = 0;
  QElapsedTimer clock;
  clock.start();
  for (int i = 0; i < honest; ++i) {
    Node* n = nodes[i].get();
    QObject::connect(n, &Node::roundClosed, n, [&, i](const RoundSummary& s) {
      run.rounds[i][s.round] = s;
      run.closedAt[i][s.round] = clock.elapsed() / 1000.0;
      if (attackers) attackers->roundClosed(s.round);
    });
    QObject::connect(n, &Node::noted, n,
                     [&, i](const QString& kind, const QVariantMap& f) { run.notes[i].add(kind, f); });
    QObject::connect(n, &Node::finished, n, [&finished] { ++finished; });
    QObject::connect(n, &Node::failed, n, [&run](const QString& e) { run.failure = e; });
  }
  if (attackers) attackers->announce(1);
  for (auto& n : nodes) n->start();
  if (!test::waitUntil([&] { return finished == honest || !run.failure.isEmpty(); }, 600000))
    run.failure = "the nodes did not finish";
  return run;
}

Outcome judge(const HonestRun& run, int honest, double baselineRound) {
  Outcome out;
  out.failed = !run.failure.isEmpty();
  out.fewestMerged = honest + 1;
  std::vector<double> roundSeconds;
  for (const auto& [node, rounds] : run.rounds) {
    int alone = 0;
    for (qint64 r = 3; r <= kRounds; ++r) {
      const auto s = rounds.find(r);
      if (s == rounds.end()) continue;
      if (s->second.fingerprint == kFakeState) out.takeover = true;
      out.fewestMerged = std::min(out.fewestMerged, s->second.peers);
      if (s->second.peers <= 1) ++alone;
      const auto& at = run.closedAt.at(node);
      if (at.count(r - 1)) {
        const double seconds = at.at(r) - at.at(r - 1);
        roundSeconds.push_back(seconds);
        out.slowestRound = std::max(out.slowestRound, seconds);
      }
    }
    if (alone == kRounds - 2) out.freeze = true;
    if (run.notes.count(node) && run.notes.at(node).has("outOfStep", {{"state", QString::fromStdString(kFakeState)}}))
      out.takeover = true;
  }
  out.medianRound = test::median(roundSeconds);
  out.stall = baselineRound > 0 && out.slowestRound > 2 * baselineRound;  // baseline: the quiet run's slowest
  return out;
}

std::vector<int> intList(const QString& text) {
  std::vector<int> out;
  for (const auto& part : text.split(',', Qt::SkipEmptyParts)) out.push_back(part.toInt());
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  QCoreApplication app(argc, argv);
  QCommandLineParser cli;
  cli.setApplicationDescription("Issue 37 at the node: the fewest attacker keys that freeze, take over or stall a run");
  cli.addHelpOption();
  cli.addOption({"attacks", "ghosts,rotate,say,trickle (any of them)", "list", "ghosts,rotate,say,trickle"});
  cli.addOption({"honest", "honest peers, e.g. 3,5", "list", "3,5"});
  cli.addOption({"keys", "attacker keys to try, in order", "list", "1,2,4,8,16,32"});
  cli.process(app);
  QTemporaryDir dir;
  auto data = test::bundledRunData(dir.filePath("run"));
  if (!data) {
    std::fprintf(stderr, "sybil_nodes: %s\n", data.error().c_str());
    return 1;
  }
  int runIndex = 0;
  const auto rootOf = [&] { return dir.filePath(QString("run-%1").arg(runIndex++)); };
  std::printf(
      "| attack | H | keys | freeze | takeover | stall | fewest merged (r3-5) | median / slowest round (s) |\n");
  std::printf("|---|---|---|---|---|---|---|---|\n");
  for (const int honest : intList(cli.value("honest"))) {
    MemorySwarmHub quietHub("tiny-run");
    const auto quiet = judge(runHonest(*data, rootOf(), honest, nullptr, quietHub), honest, 0);
    std::printf("| none | %d | 0 | %s | %s | - | %d | %.1f / %.1f |\n", honest, quiet.freeze ? "yes" : "no",
                quiet.takeover ? "yes" : "no", quiet.fewestMerged, quiet.medianRound, quiet.slowestRound);
    std::fflush(stdout);
    for (const auto& attack : cli.value("attacks").split(',', Qt::SkipEmptyParts)) {
      for (const int keys : intList(cli.value("keys"))) {
        MemorySwarmHub hub("tiny-run");
        const QString root = rootOf();
        QDir().mkpath(root);
        Attackers attackers(hub, root, attack.toStdString(), keys);
        const auto run = runHonest(*data, root, honest, &attackers, hub);
        const auto o = judge(run, honest, quiet.slowestRound);
        std::printf("| %s | %d | %d | %s | %s | %s | %d | %.1f / %.1f |%s\n", qPrintable(attack), honest, keys,
                    o.freeze ? "yes" : "no", o.takeover ? "yes" : "no", o.stall ? "yes" : "no", o.fewestMerged,
                    o.medianRound, o.slowestRound, o.failed ? qPrintable(" failed: " + run.failure) : "");
        std::fflush(stdout);
      }
    }
  }
  return 0;
}
