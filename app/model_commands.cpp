#include "app/model_commands.h"

#include "app/data_dir.h"
#include "app/run_setup.h"
#include "core/common/atomic_file.h"
#include "core/export/hf_export.h"
#include "core/infer/generate.h"
#include "core/infer/merged_model.h"
#include "core/store/ledger.h"
#include "core/train/corpus_prep.h"
#include "core/train/trainer.h"
#include "p2p/torrent_maker.h"

#include <QFileInfo>

#include <cmath>
#include <cstdio>

namespace es::app {
namespace {

constexpr std::int64_t kMaxEvalTextBytes = std::int64_t(64) << 20;

struct LoadedRun {
  QString dataDir, runDir, runId;
  train::RunData data;
  infer::MergedState state;
};

// The run's folder in the data dir, keyed by run id as prepareRun makes it.
Expected<LoadedRun> loadRun(const ModelCommand& c, const QString& shareDir) {
  const QString dataDir = dataDirFor(c.dataDir, info);
  QString runId = c.runMagnetHash;
  if (runId.isEmpty()) {
    const QString source = c.run == QLatin1String("default") ? shareDir + QStringLiteral("/runs/default") : c.run;
    auto manifest = train::loadRunManifest((source + QStringLiteral("/run.json")).toStdString());
    if (!manifest) return makeError("no run at \"" + source.toStdString() + "\": " + manifest.error());
    auto torrent = runTorrentOf(source, *manifest);
    if (!torrent) return makeError("no run at \"" + source.toStdString() + "\": " + torrent.error());
    runId = QString::fromStdString(torrent->infoHashV2);
  }
  const QString runDir = dataDir + QStringLiteral("/runs/") + runId;
  if (!QFileInfo::exists(runDir + QStringLiteral("/run.json")))
    return makeError("run " + runId.toStdString() + " has not been joined in \"" + dataDir.toStdString() +
                     "\" (train it first, or pass --data-dir)");
  auto data = train::loadRunData(runDir.toStdString());
  if (!data) return makeError(data.error());
  auto state = infer::loadNewestState(runDir.toStdString());
  if (!state) return makeError(state.error());
  return LoadedRun{dataDir, runDir, runId, std::move(*data), std::move(*state)};
}

// What the ledger knows of the run, for the model card; a missing ledger leaves it unknown.
hf::ModelCard modelCard(const LoadedRun& run) {
  hf::ModelCard card;
  card.runId = run.runId.toStdString();
  card.runName = run.data.manifest.name;
  card.round = run.state.round;
  auto reader = store::LedgerReader::open((run.dataDir + QStringLiteral("/expertswarm.db")).toStdString());
  if (!reader) return card;
  std::int64_t contributions = 0;
  if (auto accepted = (*reader)->acceptedRounds(card.runId)) {
    card.peersContributed = int(accepted->size());
    for (const auto& [peer, rounds] : *accepted) contributions += rounds;
  }
  const auto& m = run.data.manifest;
  card.tokensSeen = contributions * m.swarm.syncEvery * std::int64_t(m.train.batchSize) * m.model.seqLen;
  if (auto metrics = (*reader)->metrics(card.runId))
    for (auto it = metrics->rbegin(); it != metrics->rend() && !card.validationLoss; ++it)
      card.validationLoss = it->valLoss;
  return card;
}

int exportRun(const ModelCommand& c, LoadedRun& run) {
  hf::ExportInput in{run.data.manifest.model, &run.state.weights, &run.data.tokenizer, modelCard(run)};
  if (auto s = hf::exportHuggingFace(in, c.out.toStdString()); !s) {
    info("expertswarm export: " + s.error());
    return 1;
  }
  info("Exported round " + std::to_string(run.state.round) + " of run \"" + run.data.manifest.name + "\" to \"" +
       QFileInfo(c.out).absoluteFilePath().toStdString() + "\" (Hugging Face Mixtral folder)");
  return 0;
}

std::vector<std::int64_t> widen(const std::vector<train::TokenId>& ids) { return {ids.begin(), ids.end()}; }

int sampleRun(const ModelCommand& c, model::MoeTransformer& model, const train::BpeTokenizer& tokenizer) {
  const auto prompt = widen(tokenizer.encode(c.prompt.toStdString()));
  auto out = infer::generate(model, prompt, {c.tokens, c.temperature, c.topK, c.seed});
  if (!out) {
    info("expertswarm sample: " + out.error());
    return 2;
  }
  const std::vector<train::TokenId> ids(out->begin(), out->end());
  std::printf("%s%s\n", c.prompt.toStdString().c_str(), tokenizer.decode(ids).c_str());
  return 0;
}

int evalRun(const ModelCommand& c, model::MoeTransformer& model, const train::BpeTokenizer& tokenizer) {
  const QFileInfo file(c.textFile);
  if (!file.isFile() || file.size() > kMaxEvalTextBytes) {
    info("expertswarm eval: \"" + c.textFile.toStdString() + "\" is not a readable file of at most 64 MiB");
    return 2;
  }
  auto text = readWholeFile(c.textFile.toStdString());
  if (!text) {
    info("expertswarm eval: " + text.error());
    return 1;
  }
  auto loss = infer::textLoss(model, widen(tokenizer.encode(*text)));
  if (!loss) {
    info("expertswarm eval: " + loss.error());
    return 2;
  }
  std::printf("tokens %lld  loss %.4f  perplexity %.2f\n", static_cast<long long>(loss->tokens), loss->loss,
              std::exp(loss->loss));
  return 0;
}

}  // namespace

int runModelCommand(const ModelCommand& c, const QString& shareDir) {
  auto run = loadRun(c, shareDir);
  if (!run) {
    info("expertswarm " + c.verb.toStdString() + ": " + run.error());
    return 1;
  }
  info("Run \"" + run->data.manifest.name + "\": " +
       (run->state.round > 0 ? "merged round " + std::to_string(run->state.round) : std::string("local state")) +
       " from \"" + run->state.path + "\"");
  if (c.verb == QLatin1String("export")) return exportRun(c, *run);
  if (auto usable = train::checkDevice(c.device.toStdString()); !usable) {
    info("expertswarm " + c.verb.toStdString() + ": --device: " + usable.error());
    return 2;
  }
  auto model = infer::buildModel(run->data.manifest.model, run->state.weights, c.device.toStdString());
  if (!model) {
    info("expertswarm " + c.verb.toStdString() + ": " + model.error());
    return 1;
  }
  return c.verb == QLatin1String("sample") ? sampleRun(c, *model, run->data.tokenizer)
                                           : evalRun(c, *model, run->data.tokenizer);
}

}  // namespace es::app
