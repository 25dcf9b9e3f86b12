// Acceptance 2: 300 steps of the default model on the bundled corpus bring validation loss well
// below ln(vocab) (8.32 for 4096 tokens). The threshold comes from observed runs, with margin:
// see docs/PERFORMANCE.md for the measured curve.
#ifndef Q_MOC_RUN  // moc need not parse LibTorch
#include "core/train/trainer.h"
#include "support/default_run.h"
#endif

#include <QtTest>

#include <cmath>

using namespace es;

class TrainQualityTest : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void threeHundredStepsLowerValidationLossWellBelowLnVocab() {
    train::configureTrainingRuntime(1);
    const auto& data = test::defaultRunData();
    train::TrainerOptions options;
    options.model = data.manifest.model;
    options.train = data.manifest.train;
    options.seed = data.manifest.seed;
    options.dataSeed = data.manifest.seed;
    auto created = train::Trainer::create(options, data.train, data.val);
    QVERIFY(created.ok());
    auto& trainer = **created;

    const double lnVocab = std::log(double(options.model.vocabSize));
    const double initial = trainer.evaluate();
    QVERIFY2(std::abs(initial - lnVocab) < 0.2, qPrintable(QString::number(initial)));
    double seconds = 0;
    for (int i = 1; i <= 300; ++i) {
      const auto stats = trainer.trainStep();
      QVERIFY(std::isfinite(stats.loss));
      seconds += stats.seconds;
      if (i % 100 == 0) qInfo("step %d: train loss %.4f, val_loss %.4f", i, stats.loss, trainer.evaluate());
    }
    const double final = trainer.evaluate();
    qInfo("val_loss: initial %.4f final %.4f (ln vocab %.4f), %.0f tok/s", initial, final, lnVocab,
          300.0 * options.train.batchSize * options.model.seqLen / seconds);
    QVERIFY2(final < kThreshold, qPrintable(QString::number(final)));
  }

 private:
  static constexpr double kThreshold = 5.0;  // observed 4.49 at 1 thread (ln 4096 = 8.32)
};

QTEST_APPLESS_MAIN(TrainQualityTest)
#include "tst_train_quality.moc"
