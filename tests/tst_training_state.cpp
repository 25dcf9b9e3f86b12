// Specification of the training-state checkpoint (core/checkpoint/training_state.h): everything a
// resume needs comes back bit-exact, inconsistent or foreign files are refused, and a failed save
// never damages the previous checkpoint.
#include "core/checkpoint/training_state.h"

#include <ATen/ATen.h>

#include <QByteArray>
#include <QDir>
#include <QFile>
#include <QTemporaryDir>
#include <QTest>

#include <sys/resource.h>
#include <csignal>
#include <random>

using namespace es::ckpt;

namespace {

QByteArray bytesOf(const at::Tensor& t) {
  const at::Tensor c = t.contiguous();
  return QByteArray(static_cast<const char*>(c.data_ptr()), static_cast<int>(c.numel() * c.element_size()));
}

at::Tensor randomBits(at::ScalarType type, std::vector<std::int64_t> shape, std::mt19937& rng) {
  at::Tensor t = at::empty(shape, at::TensorOptions().dtype(type));
  auto* p = static_cast<unsigned char*>(t.data_ptr());
  for (std::int64_t i = 0; i < t.numel() * t.element_size(); ++i) p[i] = static_cast<unsigned char>(rng());
  return t;
}

// Same names (in the same order), dtypes, shapes and bytes.
bool bitEqual(const NamedTensors& a, const NamedTensors& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i].first != b[i].first || a[i].second.scalar_type() != b[i].second.scalar_type() ||
        a[i].second.sizes() != b[i].second.sizes() || bytesOf(a[i].second) != bytesOf(b[i].second)) {
      return false;
    }
  }
  return true;
}

NamedTensors sortedByName(NamedTensors tensors) {
  std::sort(tensors.begin(), tensors.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
  return tensors;
}

TrainingState sampleState(std::int64_t weightElements = 20) {
  std::mt19937 rng(7);
  TrainingState s;
  s.weights = {{"layers.1.expert.0.w1", randomBits(at::kFloat, {weightElements}, rng)},
               {"embed.weight", randomBits(at::kBFloat16, {5, 4}, rng)},
               {"router.count", randomBits(at::kLong, {3}, rng)},
               {"scalar", randomBits(at::kFloat, {}, rng)}};
  s.expAvg = {{"layers.1.expert.0.w1", randomBits(at::kFloat, {weightElements}, rng)},
              {"embed.weight", randomBits(at::kFloat, {5, 4}, rng)}};
  s.expAvgSq = {{"embed.weight", randomBits(at::kFloat, {5, 4}, rng)},
                {"layers.1.expert.0.w1", randomBits(at::kFloat, {weightElements}, rng)}};
  s.step = 123456789012;
  s.dataCursor = (std::uint64_t(1) << 63) + 5;  // beyond int64: must stay unsigned
  s.rngState = at::globalContext().defaultGenerator(at::kCPU).get_state();
  s.extra = {{"config", R"({"d_model":64,"experts":4})"}, {"peer", "alpha"}};
  return s;
}

// A file with the training-state metadata but arbitrary tensors/metadata overrides.
void writeRaw(const QString& path, const NamedTensors& tensors, const Metadata& overrides = {}) {
  Metadata metadata = {{"format", "expertswarm-training-state"}, {"version", "1"}, {"step", "1"}, {"data_cursor", "0"}};
  for (const auto& [key, value] : overrides) metadata[key] = value;
  QVERIFY(saveSafetensors(path.toStdString(), tensors, metadata).ok());
}

QStringList filesIn(const QString& dir) { return QDir(dir).entryList(QDir::Files | QDir::Hidden | QDir::System); }

QByteArray readBytes(const QString& path) {
  QFile f(path);
  return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
}

}  // namespace

class TstTrainingState : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void roundTripsEveryFieldBitExactly();
  void roundTripsWithoutRngState();
  void rejectsExpAvgWithoutMatchingExpAvgSq();
  void rejectsWrongFormatOrVersion();
  void rejectsNonIntegerStepOrCursor_data();
  void rejectsNonIntegerStepOrCursor();
  void rejectsUnknownTensors();
  void refusesToSaveReservedExtraKeysOrUnpairedMoments();
  void failedSaveLeavesNoTempFileAndKeepsOldFile();

 private:
  QTemporaryDir dir_;
};

void TstTrainingState::roundTripsEveryFieldBitExactly() {
  const TrainingState state = sampleState();
  const std::string path = dir_.filePath("state.safetensors").toStdString();
  const auto saved = saveTrainingState(path, state);
  QVERIFY2(saved.ok(), saved.ok() ? "" : saved.error().c_str());

  const auto loaded = loadTrainingState(path);
  QVERIFY2(loaded.ok(), loaded.ok() ? "" : loaded.error().c_str());
  QVERIFY(bitEqual(loaded->weights, sortedByName(state.weights)));
  QVERIFY(bitEqual(loaded->expAvg, sortedByName(state.expAvg)));
  QVERIFY(bitEqual(loaded->expAvgSq, sortedByName(state.expAvgSq)));
  QCOMPARE(loaded->step, state.step);
  QCOMPARE(loaded->dataCursor, state.dataCursor);
  QVERIFY(loaded->extra == state.extra);
  QVERIFY(loaded->rngState.defined());
  QCOMPARE(bytesOf(loaded->rngState), bytesOf(state.rngState));

  // The restored generator state reproduces the same random stream.
  at::Generator generator = at::globalContext().defaultGenerator(at::kCPU);
  generator.set_state(state.rngState);
  const at::Tensor expected = at::randn({8}, generator);
  at::randn({8}, generator);  // move away from the saved state
  generator.set_state(loaded->rngState);
  QVERIFY(at::equal(at::randn({8}, generator), expected));
}

void TstTrainingState::roundTripsWithoutRngState() {
  TrainingState state = sampleState();
  state.rngState = at::Tensor();
  state.extra.clear();
  const std::string path = dir_.filePath("no-rng.safetensors").toStdString();
  QVERIFY(saveTrainingState(path, state).ok());
  const auto loaded = loadTrainingState(path);
  QVERIFY(loaded.ok());
  QVERIFY(!loaded->rngState.defined());
  QVERIFY(loaded->extra.empty());
  QCOMPARE(loaded->weights.size(), state.weights.size());
}

void TstTrainingState::rejectsExpAvgWithoutMatchingExpAvgSq() {
  const QString path = dir_.filePath("unpaired.safetensors");
  const at::Tensor t = at::zeros({2});
  writeRaw(path,
           {{"model.w", t}, {"model.v", t}, {"adam.exp_avg.w", t}, {"adam.exp_avg_sq.w", t}, {"adam.exp_avg.v", t}});
  auto loaded = loadTrainingState(path.toStdString());
  QVERIFY(!loaded.ok());
  QVERIFY2(QString::fromStdString(loaded.error()).contains("adam.exp_avg_sq.v"), loaded.error().c_str());

  writeRaw(path, {{"model.w", t}, {"adam.exp_avg_sq.w", t}});  // the other direction
  loaded = loadTrainingState(path.toStdString());
  QVERIFY(!loaded.ok());
  QVERIFY2(QString::fromStdString(loaded.error()).contains("adam.exp_avg.w"), loaded.error().c_str());
}

void TstTrainingState::rejectsWrongFormatOrVersion() {
  const QString path = dir_.filePath("format.safetensors");
  const NamedTensors tensors = {{"model.w", at::zeros({2})}};
  const std::vector<std::pair<Metadata, QString>> cases = {
      {{{"format", "something-else"}}, "not a training state"},
      {{{"format", ""}}, "not a training state"},
      {{{"version", "2"}}, "version"},
  };
  for (const auto& [metadata, keyword] : cases) {
    writeRaw(path, tensors, metadata);
    const auto loaded = loadTrainingState(path.toStdString());
    QVERIFY2(!loaded.ok(), qPrintable(keyword));
    QVERIFY2(QString::fromStdString(loaded.error()).contains(keyword), loaded.error().c_str());
  }
  // A plain safetensors file without any training-state metadata.
  QVERIFY(saveSafetensors(path.toStdString(), tensors).ok());
  const auto loaded = loadTrainingState(path.toStdString());
  QVERIFY(!loaded.ok());
  QVERIFY2(QString::fromStdString(loaded.error()).contains("not a training state"), loaded.error().c_str());
}

void TstTrainingState::rejectsNonIntegerStepOrCursor_data() {
  QTest::addColumn<QString>("key");
  QTest::addColumn<QString>("value");
  for (const char* bad : {"12x", "", " 1", "+1", "1.5", "0x10", "99999999999999999999"}) {
    QTest::addRow("step \"%s\"", bad) << "step" << bad;
  }
  for (const char* bad : {"-1", "abc", "18446744073709551616", "1 "})
    QTest::addRow("data_cursor \"%s\"", bad) << "data_cursor" << bad;
}

void TstTrainingState::rejectsNonIntegerStepOrCursor() {
  QFETCH(QString, key);
  QFETCH(QString, value);
  const QString path = dir_.filePath("integers.safetensors");
  writeRaw(path, {{"model.w", at::zeros({2})}}, {{key.toStdString(), value.toStdString()}});
  const auto loaded = loadTrainingState(path.toStdString());
  QVERIFY(!loaded.ok());
  const QString error = QString::fromStdString(loaded.error());
  QVERIFY2(error.contains("\"" + key + "\"") && error.contains("integer"), qPrintable(error));
}

void TstTrainingState::rejectsUnknownTensors() {
  const QString path = dir_.filePath("unknown.safetensors");
  writeRaw(path, {{"model.w", at::zeros({2})}, {"optimizer.momentum.w", at::zeros({2})}});
  const auto loaded = loadTrainingState(path.toStdString());
  QVERIFY(!loaded.ok());
  QVERIFY2(QString::fromStdString(loaded.error()).contains("optimizer.momentum.w"), loaded.error().c_str());
}

void TstTrainingState::refusesToSaveReservedExtraKeysOrUnpairedMoments() {
  const QString path = dir_.filePath("refused.safetensors");
  for (const char* reserved : {"format", "version", "step", "data_cursor"}) {
    TrainingState state = sampleState();
    state.extra[reserved] = "x";
    const auto saved = saveTrainingState(path.toStdString(), state);
    QVERIFY2(!saved.ok(), reserved);
    QVERIFY2(QString::fromStdString(saved.error()).contains("reserved"), saved.error().c_str());
  }
  TrainingState unpaired = sampleState();
  unpaired.expAvgSq.pop_back();
  QVERIFY(!saveTrainingState(path.toStdString(), unpaired).ok());
  QVERIFY(!QFile::exists(path));
}

void TstTrainingState::failedSaveLeavesNoTempFileAndKeepsOldFile() {
  QTemporaryDir dir;
  const QString path = dir.filePath("state.safetensors");
  QVERIFY(saveTrainingState(path.toStdString(), sampleState()).ok());
  const QByteArray old = readBytes(path);
  QVERIFY(!old.isEmpty());

  // A path in a directory that does not exist: an error, and nothing created anywhere.
  const auto missingDir = saveTrainingState(dir.filePath("missing/state.safetensors").toStdString(), sampleState());
  QVERIFY(!missingDir.ok());
  QVERIFY2(QString::fromStdString(missingDir.error()).contains("missing/state.safetensors"),
           missingDir.error().c_str());
  QVERIFY(!QDir(dir.filePath("missing")).exists());

  // A write that fails halfway (file size limit: EFBIG) while replacing the old file. Tests run as
  // root here, so a read-only directory would not make the write fail; RLIMIT_FSIZE does.
  rlimit saved{};
  QVERIFY(getrlimit(RLIMIT_FSIZE, &saved) == 0);
  const auto previousHandler = std::signal(SIGXFSZ, SIG_IGN);
  rlimit small = saved;
  small.rlim_cur = static_cast<rlim_t>(old.size()) + 1024;  // the new file is ~100x larger
  QVERIFY(setrlimit(RLIMIT_FSIZE, &small) == 0);
  const auto failed = saveTrainingState(path.toStdString(), sampleState(/*weightElements=*/100000));
  setrlimit(RLIMIT_FSIZE, &saved);
  std::signal(SIGXFSZ, previousHandler);
  QVERIFY(!failed.ok());
  QVERIFY2(QString::fromStdString(failed.error()).contains("write failed"), failed.error().c_str());

  QCOMPARE(filesIn(dir.path()), QStringList{"state.safetensors"});  // no leftover temp file
  QCOMPARE(readBytes(path), old);
  const auto stillThere = loadTrainingState(path.toStdString());
  QVERIFY2(stillThere.ok(), stillThere.ok() ? "" : stillThere.error().c_str());
}

QTEST_APPLESS_MAIN(TstTrainingState)
#include "tst_training_state.moc"
