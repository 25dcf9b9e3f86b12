#include "app/local_training.h"

#include "app/run_setup.h"

#include "core/train/corpus_prep.h"
#include "core/train/trainer.h"

#include <QDir>
#include <QFileInfo>
#include <QStandardPaths>

#include <atomic>
#include <csignal>
#include <cstdio>

namespace es::app {
namespace {

std::atomic<bool> g_stopRequested{false};

void requestStop(int) { g_stopRequested.store(true); }

void installStopHandlers() {
  struct sigaction action {};
  action.sa_handler = requestStop;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}

std::string joinExperts(const std::vector<int>& experts) {
  std::string out;
  for (int e : experts) out.append(out.empty() ? "" : ",").append(std::to_string(e));
  return out;
}

}  // namespace

int runLocalTraining(const CommandLine& cl, const QString& shareDir) {
  auto prepared = prepareRun(cl, shareDir);
  if (prepared.exitCode) return prepared.exitCode;
  const QString& dataDir = prepared.dataDir;
  const QString& runDir = prepared.runDir;
  auto& data = prepared.data;
  train::configureTrainingRuntime(cl.threads);
  train::TrainerOptions options;
  options.model = data->manifest.model;
  options.train = data->manifest.train;
  options.seed = data->manifest.seed;
  options.dataSeed = data->manifest.seed;
  options.localExperts = cl.experts;
  options.device = cl.device.toStdString();
  auto created = train::Trainer::create(options, data->train, data->val);
  if (!created) {
    info("expertswarm: " + created.error());
    return 2;
  }
  train::Trainer& trainer = **created;

  const std::string statePath = (runDir + QStringLiteral("/state/training-state.safetensors")).toStdString();
  if (!cl.fresh && QFileInfo::exists(QString::fromStdString(statePath))) {
    if (auto loaded = trainer.loadState(statePath); !loaded) {
      info("expertswarm: cannot resume: " + loaded.error() + " (start over with --fresh; the file is kept)");
      return 1;
    }
    info("Resumed. Step: " + std::to_string(trainer.step()));
  }
  info("Training alone (no swarm). Run: \"" + data->manifest.name +
       "\". Experts: " + joinExperts(trainer.localExperts()) + " of " + std::to_string(options.model.nExperts) +
       ". Device: " + trainer.deviceName() + ". Data dir: \"" + dataDir.toStdString() + "\"");

  const auto& cfg = options.train;
  const int logEvery = cl.logEvery ? cl.logEvery : cfg.logInterval;
  const int evalEvery = cl.evalEvery ? cl.evalEvery : cfg.evalInterval;
  const std::int64_t endStep = trainer.step() + (cl.steps ? *cl.steps : cfg.totalSteps - trainer.step());
  installStopHandlers();

  double lossSum = 0, seconds = 0;
  std::int64_t tokens = 0, inInterval = 0;
  while (trainer.step() < endStep && !g_stopRequested.load()) {
    const auto stats = trainer.trainStep();
    lossSum += stats.loss;
    seconds += stats.seconds;
    tokens += stats.tokens;
    ++inInterval;
    const bool evalPoint = stats.step % evalEvery == 0 || stats.step == endStep;
    if (stats.step % logEvery == 0 || evalPoint || stats.step == endStep) {
      std::printf("step=%lld loss=%.4f lr=%.3e tok/s=%.0f", static_cast<long long>(stats.step),
                  lossSum / double(inInterval), stats.lr, double(tokens) / seconds);
      if (evalPoint) std::printf(" val_loss=%.4f", trainer.evaluate());
      std::printf("\n");
      std::fflush(stdout);
      lossSum = seconds = 0;
      tokens = inInterval = 0;
    }
    if (stats.step % cfg.checkpointInterval == 0 && stats.step != endStep) {  // the end saves below
      if (auto saved = trainer.saveState(statePath); !saved) {
        info("expertswarm: saving the training state failed: " + saved.error());
        return 1;
      }
    }
  }
  if (auto saved = trainer.saveState(statePath); !saved) {
    info("expertswarm: saving the training state failed: " + saved.error());
    return 1;
  }
  info(g_stopRequested.load() ? "Stopped on request. Step: " + std::to_string(trainer.step()) + ". State saved."
                              : "Done. Step: " + std::to_string(trainer.step()) + ". State saved.");
  return 0;
}

}  // namespace es::app
