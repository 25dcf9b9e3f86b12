#include "app/create_run_command.h"

#include "core/train/corpus_text.h"
#include "core/train/prepared_run.h"
#include "core/train/run_create.h"
#include "core/train/run_manifest.h"
#include "p2p/torrent_maker.h"

#include <QCommandLineParser>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QSaveFile>
#include <QTextStream>

#include <unistd.h>

#include <cmath>
#include <cstdio>

namespace es::app {
namespace {

struct Parsed {
  train::CreateRunRequest request;
  QString error;  // bad input
  bool help = false;
};

void addOptions(QCommandLineParser& p) {
  p.setApplicationDescription(QStringLiteral(
      "Make a run of your own from a text corpus (.txt and .jsonl files, or folders of them): the tokenizer is "
      "trained once, the text tokenized into shards, and the folder is the run torrent others join by magnet."));
  p.addOption({{QStringLiteral("h"), QStringLiteral("help")}, QStringLiteral("Show this help.")});
  p.addOption(
      {QStringLiteral("out"), QStringLiteral("The run folder to create (must not exist)."), QStringLiteral("dir")});
  p.addOption({QStringLiteral("preset"), QStringLiteral("Model size: tiny, default or gpu-1b (default: default)."),
               QStringLiteral("name"), QStringLiteral("default")});
  p.addOption(
      {QStringLiteral("name"), QStringLiteral("The run's name (default: the folder's)."), QStringLiteral("name")});
  p.addOption({QStringLiteral("seed"), QStringLiteral("The run's seed."), QStringLiteral("n"), QStringLiteral("1234")});
  p.addOption({QStringLiteral("val-fraction"), QStringLiteral("Share of the text held out for validation."),
               QStringLiteral("f"), QStringLiteral("0.01")});
  p.addOption({QStringLiteral("val"),
               QStringLiteral("Validation text apart from the corpus (a file or folder; repeatable). Default: the "
                              "corpus' tail, --val-fraction of it."),
               QStringLiteral("path")});
  p.addOption({QStringLiteral("shard-tokens"), QStringLiteral("Tokens per training shard."), QStringLiteral("n"),
               QStringLiteral("1048576")});
  p.addOption({QStringLiteral("sync-every"), QStringLiteral("Training steps per round (default: the preset's)."),
               QStringLiteral("n")});
  p.addOption({QStringLiteral("experts-per-peer"), QStringLiteral("Experts each peer claims."), QStringLiteral("n")});
  p.addPositionalArgument(QStringLiteral("corpus"), QStringLiteral("Text files and folders."),
                          QStringLiteral("CORPUS..."));
}

// An integer option in [lo, hi] into `out`; false when set and not one.
template <typename T>
bool integerOption(const QCommandLineParser& p, const char* name, long long lo, long long hi, T& out) {
  if (!p.isSet(QLatin1String(name))) return true;
  bool ok = false;
  const long long v = p.value(QLatin1String(name)).toLongLong(&ok);
  if (!ok || v < lo || v > hi) return false;
  out = static_cast<T>(v);
  return true;
}

Parsed parse(const QStringList& arguments) {
  Parsed out;
  QCommandLineParser p;
  addOptions(p);
  QStringList args = arguments;
  args.removeAt(1);  // the verb
  if (!p.parse(args)) return out.error = p.errorText(), out;
  if (p.isSet(QStringLiteral("help"))) {
    out.help = true;
    QTextStream(stdout) << p.helpText();
    return out;
  }
  auto& r = out.request;
  r.out = p.value(QStringLiteral("out")).toStdString();
  r.preset = p.value(QStringLiteral("preset")).toStdString();
  r.name = p.value(QStringLiteral("name")).toStdString();
  for (const auto& c : p.positionalArguments()) r.corpus.push_back(c.toStdString());
  for (const auto& v : p.values(QStringLiteral("val"))) r.valCorpus.push_back(v.toStdString());
  bool ok = true;
  r.valFraction = p.value(QStringLiteral("val-fraction")).toDouble(&ok);
  if (r.out.empty()) return out.error = QStringLiteral("--out DIR is required"), out;
  if (r.corpus.empty()) return out.error = QStringLiteral("name the corpus: one or more files or folders"), out;
  const QString folder = QFileInfo(QDir::cleanPath(QString::fromStdString(r.out))).fileName();
  if (!train::isValidRunName(folder.toStdString()))
    return out.error = QStringLiteral("--out: the folder's name \"%1\" names the run torrent: use [A-Za-z0-9._-]{1,64}")
                           .arg(folder),
           out;
  if (!r.name.empty() && !train::isValidRunName(r.name))
    return out.error = QStringLiteral("--name: use [A-Za-z0-9._-]{1,64}"), out;
  if (!train::presetModel(r.preset)) return out.error = QStringLiteral("--preset must be tiny, default or gpu-1b"), out;
  if (!ok || !std::isfinite(r.valFraction) || r.valFraction <= 0 || r.valFraction >= 0.5)
    return out.error = QStringLiteral("--val-fraction must be a number in (0, 0.5)"), out;
  if (!integerOption(p, "seed", 0, (1LL << 40), r.seed))
    return out.error = QStringLiteral("--seed must be an integer in [0, 2^40]"), out;
  if (!integerOption(p, "shard-tokens", 1024, train::kMaxShardTokens, r.shardTokens))
    return out.error = QStringLiteral("--shard-tokens must be an integer in [1024, 2^28]"), out;
  if (!integerOption(p, "sync-every", 1, 100000, r.syncEvery))
    return out.error = QStringLiteral("--sync-every must be an integer in [1, 100000]"), out;
  if (!integerOption(p, "experts-per-peer", 1, 1024, r.expertsPerPeer))
    return out.error = QStringLiteral("--experts-per-peer must be a positive integer"), out;
  return out;
}

// The preset's training footprint against this machine's memory: refused before any work.
QString memoryProblem(const train::CreateRunRequest& r) {
  const auto model = train::presetModel(r.preset);
  const std::int64_t need = train::trainingMemoryBytes(*model, train::presetBatchSize(r.preset));
  const std::int64_t have = std::int64_t(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGE_SIZE);
  if (have <= 0 || need <= have) return {};
  return QStringLiteral("the %1 preset needs about %2 GiB to train, this machine has %3 GiB: pick a smaller preset")
      .arg(QString::fromStdString(r.preset))
      .arg(double(need) / double(1 << 30), 0, 'f', 1)
      .arg(double(have) / double(1 << 30), 0, 'f', 1);
}

// "create-run: tokenizing  42%", each line what was measured when it was printed; a stage's
// percentage is printed when it moves by 5 points or the stage changes.
train::ProgressFn terminalProgress() {
  auto last = std::make_shared<std::pair<std::string, int>>("", -100);
  return [last](const std::string& stage, double fraction) {
    const int percent = int(std::floor(fraction * 100));
    if (stage == last->first && percent < last->second + 5 && percent < 100) return;
    *last = {stage, percent};
    std::fprintf(stderr, "create-run: %-10s %3d%%\n", stage.c_str(), percent);
  };
}

}  // namespace

bool isCreateRunCommand(const QStringList& arguments) {
  return arguments.size() > 1 && arguments[1] == QLatin1String("create-run");
}

int runCreateRunCommand(const QStringList& arguments, const QString& shareDir) {
  auto parsed = parse(arguments);
  if (parsed.help) return 0;
  if (parsed.error.isEmpty()) parsed.error = memoryProblem(parsed.request);
  if (parsed.error.isEmpty())  // missing files, compressed or too large: before anything is read
    if (auto files = train::listCorpusFiles(parsed.request.corpus, train::kMaxCreateTextBytes); !files)
      parsed.error = QString::fromStdString(files.error());
  if (!parsed.error.isEmpty()) {
    QTextStream(stderr) << "expertswarm create-run: " << parsed.error
                        << "\nTry 'expertswarm create-run --help' for more information.\n";
    return 2;
  }
  // The bundled text run's settings: the bundled default run is itself made from them.
  QFile manifestTemplate(shareDir + QStringLiteral("/runs/sotu-text/run.json"));
  if (!manifestTemplate.open(QIODevice::ReadOnly)) {
    QTextStream(stderr) << "expertswarm create-run: cannot read " << manifestTemplate.fileName() << "\n";
    return 1;
  }
  parsed.request.manifestTemplate = manifestTemplate.readAll().toStdString();
  const auto created = train::createRun(parsed.request, terminalProgress());
  if (!created) {
    QTextStream(stderr) << "expertswarm create-run: " << QString::fromStdString(created.error()) << "\n";
    return created.error().find("exists already") != std::string::npos ? 2 : 1;
  }
  // The run id: the v2 info-hash of the folder's torrent, as every peer computes it.
  const auto torrent = p2p::makeTorrent(created->dir);
  if (!torrent) {
    QTextStream(stderr) << "expertswarm create-run: " << QString::fromStdString(torrent.error()) << "\n";
    return 1;
  }
  // Kept in the folder (hidden: no torrent carries it) to tell a damaged file from the original.
  QSaveFile kept(QString::fromStdString(created->dir) + QLatin1Char('/') + QLatin1String(train::kCreatedRunTorrent));
  if (!kept.open(QIODevice::WriteOnly) || kept.write(torrent->bytes.data(), qint64(torrent->bytes.size())) < 0 ||
      !kept.commit()) {
    QTextStream(stderr) << "expertswarm create-run: cannot write " << kept.fileName() << "\n";
    return 1;
  }
  QTextStream(stdout) << "Created run \"" << QString::fromStdString(created->dir) << "\": " << created->trainTokens
                      << " training tokens in " << created->shards << " shards, " << created->valTokens
                      << " validation tokens\n"
                      << "Host it:  expertswarm --run " << QString::fromStdString(created->dir) << "\n"
                      << "Magnet:   magnet:?xt=urn:btmh:1220" << QString::fromStdString(torrent->infoHashV2) << "\n";
  return 0;
}

}  // namespace es::app
