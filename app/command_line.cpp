#include "app/command_line.h"

#include <QCommandLineParser>
#include <QCoreApplication>
#include <QRegularExpression>

#include <set>

namespace es::app {
namespace {

ParseResult failure(const QString& message) {
  ParseResult r;
  r.exitCode = 2;
  r.message =
      QStringLiteral("expertswarm: ") + message + QStringLiteral("\nTry 'expertswarm --help' for more information.\n");
  return r;
}

// What a reading step found wrong (the text failure() wraps), or nullopt when all is well.
using Complaint = std::optional<QString>;

// A whole decimal number in [lo, hi], or nullopt.
std::optional<long long> parseInteger(const QString& text, long long lo, long long hi) {
  bool ok = false;
  const long long v = text.trimmed().toLongLong(&ok);
  if (!ok || v < lo || v > hi) return std::nullopt;
  return v;
}

QCommandLineOption testsOnlyOption(const QString& name, const QString& valueName) {
  QCommandLineOption option(name, QStringLiteral("Tests only."), valueName);
  option.setFlags(QCommandLineOption::HiddenFromHelp);
  return option;
}

// Every option of the client; --help lists them in the order parseCommandLine adds them.
struct Options {
  const QCommandLineOption help{{QStringLiteral("h"), QStringLiteral("help")}, QStringLiteral("Show this help.")};
  const QCommandLineOption version{QStringLiteral("version"), QStringLiteral("Show the version.")};
  const QCommandLineOption noGui{QStringLiteral("no-gui"), QStringLiteral("Run headless, printing progress lines.")};
  const QCommandLineOption localOnly{QStringLiteral("local-only"),
                                     QStringLiteral("Train alone on this machine; join no swarm.")};
  const QCommandLineOption run{QStringLiteral("run"),
                               QStringLiteral("The run: 'default', a folder with run.json, or the run's magnet link."),
                               QStringLiteral("RUN"), QStringLiteral("default")};
  const QCommandLineOption dataDir{QStringLiteral("data-dir"), QStringLiteral("Where state is kept."),
                                   QStringLiteral("DIR")};
  const QCommandLineOption steps{QStringLiteral("steps"), QStringLiteral("Train N steps, then save and exit."),
                                 QStringLiteral("N")};
  const QCommandLineOption experts{
      QStringLiteral("experts"), QStringLiteral("Experts to train, e.g. 0,1 (default: all)."), QStringLiteral("LIST")};
  const QCommandLineOption device{QStringLiteral("device"),
                                  QStringLiteral("auto (a GPU when available), cpu, cuda or cuda:N."),
                                  QStringLiteral("DEVICE"), QStringLiteral("auto")};
  const QCommandLineOption threads{QStringLiteral("threads"), QStringLiteral("CPU threads (default: all cores)."),
                                   QStringLiteral("N")};
  const QCommandLineOption logEvery{QStringLiteral("log-every"), QStringLiteral("Steps per progress line."),
                                    QStringLiteral("N")};
  const QCommandLineOption evalEvery{QStringLiteral("eval-every"), QStringLiteral("Steps between validations."),
                                     QStringLiteral("N")};
  const QCommandLineOption fresh{QStringLiteral("fresh"),
                                 QStringLiteral("Start from step 0 even if a saved training state exists.")};
  const QCommandLineOption listen{
      QStringLiteral("listen"),
      QStringLiteral("Swarm: listen on IP:PORT (default: every IPv4 and IPv6 interface on a port chosen "
                     "at random on the first start and kept; use 127.0.0.1:PORT for peers on one machine)."),
      QStringLiteral("IP:PORT")};
  const QCommandLineOption bootstrap{
      QStringLiteral("bootstrap"),
      QStringLiteral("Swarm: a DHT node to start from (repeatable; replaces the public routers)."),
      QStringLiteral("HOST:PORT")};
  const QCommandLineOption publicNetwork{
      QStringLiteral("public"),
      QStringLiteral("Swarm: join the public network: bootstrap from the public DHT routers "
                     "(router.bittorrent.com, …), map the port with UPnP and NAT-PMP, keep the "
                     "DHT state for the next start.")};
  const QCommandLineOption portMapping{
      QStringLiteral("port-mapping"),
      QStringLiteral("Swarm: ask the router to forward the listen port (UPnP and NAT-PMP), "
                     "without the public routers.")};
  const QCommandLineOption rounds{QStringLiteral("rounds"), QStringLiteral("Swarm: stop after N rounds."),
                                  QStringLiteral("N")};
  const QCommandLineOption syncEvery{QStringLiteral("sync-every"),
                                     QStringLiteral("Swarm: steps per round (default: the run's)."),
                                     QStringLiteral("N")};
  const QCommandLineOption exportModel{
      QStringLiteral("export"),
      QStringLiteral("Swarm: at the end, write the merged model (safetensors + config JSON)."), QStringLiteral("FILE")};
  const QCommandLineOption diskQuota{
      QStringLiteral("disk-quota-mib"),
      QStringLiteral("Swarm: most the run folder may hold (default: from the run's model)."), QStringLiteral("MIB")};
  const QCommandLineOption dataBudget{
      QStringLiteral("data-budget-mib"),
      QStringLiteral("Swarm: most disk the training shards of a run joined by magnet may take (default: all)."),
      QStringLiteral("MIB")};
  const QCommandLineOption hostMemory{
      QStringLiteral("host-memory-mib"),
      QStringLiteral("Most host memory the claim is sized by (default: what is available)."), QStringLiteral("MIB")};
  const QCommandLineOption gpuMemory{
      QStringLiteral("gpu-memory-mib"),
      QStringLiteral("Most GPU memory the claim is sized by (default: what the GPU has free)."), QStringLiteral("MIB")};
  const QCommandLineOption events{
      QStringLiteral("events"),
      QStringLiteral("Headless swarm: print machine-readable events on stdout (one JSON object per line) instead "
                     "of the progress lines.")};
  const QCommandLineOption testPoison = testsOnlyOption(QStringLiteral("test-poison"), QStringLiteral("KIND"));
  const QCommandLineOption uiSnapshot = testsOnlyOption(QStringLiteral("ui-snapshot"), QStringLiteral("DIR"));
};

void setUpParser(QCommandLineParser& parser, const Options& o) {
  parser.setApplicationDescription(
      QStringLiteral("ExpertSwarm: train a Mixture-of-Experts language model together with other volunteers.\n"
                     "Other commands (each with --help): create-run (a run of your own from a text corpus), "
                     "export, sample, eval."));
  parser.setSingleDashWordOptionMode(QCommandLineParser::ParseAsLongOptions);
  parser.addOptions({o.help,       o.version,     o.noGui,     o.localOnly,     o.run,         o.dataDir,
                     o.steps,      o.experts,     o.device,    o.threads,       o.logEvery,    o.evalEvery,
                     o.fresh,      o.listen,      o.bootstrap, o.publicNetwork, o.portMapping, o.rounds,
                     o.syncEvery,  o.exportModel, o.diskQuota, o.hostMemory,    o.gpuMemory,   o.events,
                     o.dataBudget, o.testPoison,  o.uiSnapshot});
}

// --help, --version and stray arguments end parsing before any option is read.
std::optional<ParseResult> answerWithoutRunning(const QCommandLineParser& parser, const Options& o) {
  if (!parser.positionalArguments().isEmpty())
    return failure(QStringLiteral("unexpected argument '%1'").arg(parser.positionalArguments().first()));
  if (parser.isSet(o.help)) return ParseResult{std::nullopt, 0, parser.helpText()};
  if (parser.isSet(o.version))
    return ParseResult{std::nullopt, 0, QStringLiteral("expertswarm %1\n").arg(QCoreApplication::applicationVersion())};
  return std::nullopt;
}

Complaint readModeAndPlace(const QCommandLineParser& parser, const Options& o, CommandLine& c) {
  c.noGui = parser.isSet(o.noGui);
  c.localOnly = parser.isSet(o.localOnly);
  c.fresh = parser.isSet(o.fresh);
  c.run = parser.value(o.run);
  if (c.run.isEmpty()) return QStringLiteral("--run needs a value");
  c.device = parser.value(o.device);
  static const QRegularExpression deviceSyntax(QStringLiteral("^(auto|cpu|cuda(:[0-9]{1,2})?)$"));
  if (!deviceSyntax.match(c.device).hasMatch())
    return QStringLiteral("--device must be auto, cpu, cuda or cuda:N, not '%1'").arg(c.device);
  c.dataDir = parser.value(o.dataDir);
  if (parser.isSet(o.dataDir) && c.dataDir.isEmpty()) return QStringLiteral("--data-dir needs a value");
  return std::nullopt;
}

Complaint readStepsAndExperts(const QCommandLineParser& parser, const Options& o, CommandLine& c) {
  if (parser.isSet(o.steps)) {
    c.steps = parseInteger(parser.value(o.steps), 1, 1LL << 40);
    if (!c.steps) return QStringLiteral("--steps must be a positive integer, not '%1'").arg(parser.value(o.steps));
  }
  if (!parser.isSet(o.experts)) return std::nullopt;
  std::set<int> seen;
  for (const QString& part : parser.value(o.experts).split(QLatin1Char(','))) {
    const auto e = parseInteger(part, 0, 1 << 20);
    if (!e)
      return QStringLiteral("--experts must be a comma-separated list of expert numbers, not '%1'")
          .arg(parser.value(o.experts));
    if (!seen.insert(int(*e)).second) return QStringLiteral("--experts lists expert %1 twice").arg(*e);
    c.experts.push_back(int(*e));
  }
  return std::nullopt;
}

// Port 0 asks the system for a port: fine to listen on, not an address to reach.
bool validEndpoint(const QString& text, bool allowZero) {
  static const QRegularExpression endpointSyntax(QStringLiteral("^(\\[[0-9a-fA-F:.]+\\]|[^:\\s]+):([0-9]{1,5})$"));
  const auto m = endpointSyntax.match(text);
  if (!m.hasMatch()) return false;
  const int port = m.captured(2).toInt();
  return port <= 65535 && (port > 0 || allowZero);
}

Complaint readNetwork(const QCommandLineParser& parser, const Options& o, CommandLine& c) {
  c.listen = parser.value(o.listen);
  if (parser.isSet(o.listen) && !validEndpoint(c.listen, true))
    return QStringLiteral("--listen must be IP:PORT, not '%1'").arg(c.listen);
  c.bootstrap = parser.values(o.bootstrap);
  c.bootstrapGiven = parser.isSet(o.bootstrap);
  c.publicNetwork = parser.isSet(o.publicNetwork);
  c.portMapping = parser.isSet(o.portMapping);
  // Bound to loopback, the session cannot reach the internet or a router: a contradiction, not a wish.
  if ((c.publicNetwork || c.portMapping) && isLoopbackEndpoint(c.listen))
    return QStringLiteral("--%1 reaches the internet, but --listen %2 is loopback only")
        .arg(c.publicNetwork ? QStringLiteral("public") : QStringLiteral("port-mapping"), c.listen);
  for (const auto& node : c.bootstrap)
    if (!validEndpoint(node, false)) return QStringLiteral("--bootstrap must be HOST:PORT, not '%1'").arg(node);
  return std::nullopt;
}

Complaint readExportPoisonAndRounds(const QCommandLineParser& parser, const Options& o, CommandLine& c) {
  c.exportPath = parser.value(o.exportModel);
  c.testPoison = parser.value(o.testPoison);
  if (parser.isSet(o.testPoison) && !QStringList{"nan", "norm", "foreign", "reverse", "stale"}.contains(c.testPoison))
    return QStringLiteral("--test-poison must be nan, norm, foreign, reverse or stale");
  if (parser.isSet(o.exportModel) && c.exportPath.isEmpty()) return QStringLiteral("--export needs a file name");
  if (parser.isSet(o.rounds)) {
    const auto v = parseInteger(parser.value(o.rounds), 1, 1LL << 40);
    if (!v) return QStringLiteral("--rounds must be a positive integer, not '%1'").arg(parser.value(o.rounds));
    c.rounds = *v;
  }
  if (parser.isSet(o.dataBudget)) {
    bool ok = false;
    const double mib = parser.value(o.dataBudget).toDouble(&ok);
    if (!ok || !(mib > 0) || mib > double(1 << 30))
      return QStringLiteral("--data-budget-mib must be a positive number, not '%1'").arg(parser.value(o.dataBudget));
    c.dataBudgetBytes = std::max<std::int64_t>(1, std::int64_t(mib * double(1 << 20)));
  }
  return std::nullopt;
}

Complaint readPositiveInts(const QCommandLineParser& parser, const Options& o, CommandLine& c) {
  struct IntOption {
    const QCommandLineOption* option;
    int* target;
    long long lo;
  };
  for (const IntOption& i :
       {IntOption{&o.threads, &c.threads, 1}, IntOption{&o.logEvery, &c.logEvery, 1},
        IntOption{&o.evalEvery, &c.evalEvery, 1}, IntOption{&o.syncEvery, &c.syncEvery, 1},
        IntOption{&o.diskQuota, &c.diskQuotaMiB, 1}, IntOption{&o.hostMemory, &c.hostMemoryCapMiB, 1},
        IntOption{&o.gpuMemory, &c.gpuMemoryCapMiB, 1}}) {
    if (!parser.isSet(*i.option)) continue;
    const auto v = parseInteger(parser.value(*i.option), i.lo, 1 << 30);
    if (!v)
      return QStringLiteral("--%1 must be a positive integer, not '%2'")
          .arg(i.option->names().first(), parser.value(*i.option));
    *i.target = int(*v);
  }
  return std::nullopt;
}

// Options that belong to one mode (desktop, headless swarm, local-only) given in another.
Complaint checkModeCombinations(const QCommandLineParser& parser, const Options& o, CommandLine& c) {
  c.uiSnapshot = parser.value(o.uiSnapshot);
  if (c.localOnly && !c.noGui) return QStringLiteral("--local-only trains headless: add --no-gui");
  c.events = parser.isSet(o.events);
  if (c.events && (!c.noGui || c.localOnly))
    return QStringLiteral("--events prints the headless swarm client's events: add --no-gui (not --local-only)");
  if (c.noGui && parser.isSet(o.uiSnapshot))
    return QStringLiteral("--ui-snapshot needs the desktop window (no --no-gui)");
  if (c.localOnly && (parser.isSet(o.listen) || parser.isSet(o.bootstrap) || parser.isSet(o.rounds) ||
                      parser.isSet(o.exportModel) || c.publicNetwork || c.portMapping))
    return QStringLiteral(
        "--listen, --bootstrap, --public, --port-mapping, --rounds and --export are for swarm "
        "training, not --local-only");
  if (!c.localOnly && (c.steps || !c.experts.empty()))
    return QStringLiteral("--steps and --experts are for --local-only; in a swarm use --rounds (experts are claimed)");
  return std::nullopt;
}

Complaint readRunMagnet(CommandLine& c) {
  if (!c.run.startsWith(QLatin1String("magnet:"))) return std::nullopt;
  c.runMagnetHash = runIdOfMagnet(c.run);
  if (c.runMagnetHash.isEmpty())
    return QStringLiteral(
               "--run: a run's magnet link carries its v2 hash (xt=urn:btmh:1220 and 64 hex digits), "
               "not '%1'")
        .arg(c.run);
  if (c.localOnly) return QStringLiteral("--local-only trains a run folder or the default run, not a magnet link");
  return std::nullopt;
}

}  // namespace

bool isLoopbackEndpoint(const QString& endpoint) {
  return endpoint.startsWith(QLatin1String("127.")) || endpoint.startsWith(QLatin1String("[::1]")) ||
         endpoint.startsWith(QLatin1String("localhost:"));
}

QString runIdOfMagnet(const QString& link) {
  // A run is named by the v2 info-hash of its run torrent (xt=urn:btmh:1220 + 64 hex digits).
  static const QRegularExpression v2(QStringLiteral("^magnet:\\?(.*&)?xt=urn:btmh:1220([0-9a-fA-F]{64})(&|$)"));
  const auto m = v2.match(link.trimmed());
  return m.hasMatch() ? m.captured(2).toLower() : QString();
}

ParseResult parseCommandLine(const QStringList& arguments) {
  QCommandLineParser parser;
  const Options options;
  setUpParser(parser, options);
  if (!parser.parse(arguments)) return failure(parser.errorText());
  if (auto answer = answerWithoutRunning(parser, options)) return *answer;
  CommandLine c;
  // The first complaint wins, so the steps keep the order in which the options are checked.
  for (const auto read : {readModeAndPlace, readStepsAndExperts, readNetwork, readExportPoisonAndRounds,
                          readPositiveInts, checkModeCombinations})
    if (auto complaint = read(parser, options, c)) return failure(*complaint);
  if (auto complaint = readRunMagnet(c)) return failure(*complaint);
  return {c, 0, {}};
}

}  // namespace es::app
