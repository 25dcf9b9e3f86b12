// Acceptance 4: N steps, save, exit, resume in a new process, N more steps == 2N steps straight,
// bit for bit (CPU, one thread: every kernel used is deterministic there). Also checks the
// progress lines the headless client prints.
#ifndef Q_MOC_RUN  // moc need not parse LibTorch
#include "core/checkpoint/training_state.h"

#include <torch/torch.h>
#endif
#include "support/client_process.h"

#include <QRegularExpression>
#include <QTemporaryDir>
#include <QtTest>

using es::test::runClient;

namespace {

constexpr int kSteps = 6;

QStringList trainArgs(const QString& dataDir, int steps) {
  return {QStringLiteral("--no-gui"),     QStringLiteral("--local-only"),
          QStringLiteral("--threads"),    QStringLiteral("1"),
          QStringLiteral("--experts"),    QStringLiteral("2,5"),
          QStringLiteral("--steps"),      QString::number(steps),
          QStringLiteral("--log-every"),  QStringLiteral("2"),
          QStringLiteral("--eval-every"), QStringLiteral("4"),
          QStringLiteral("--data-dir"),   dataDir};
}

std::string statePath(const QString& dataDir) {
  return (es::test::runFolder(dataDir) + QStringLiteral("/state/training-state.safetensors")).toStdString();
}

void expectSameTensors(const es::ckpt::NamedTensors& a, const es::ckpt::NamedTensors& b) {
  QCOMPARE(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    QCOMPARE(a[i].first, b[i].first);
    QVERIFY2(torch::equal(a[i].second, b[i].second), a[i].first.c_str());
  }
}

}  // namespace

class ResumeTest : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void resumedRunEqualsStraightRunBitForBit() {
    QTemporaryDir straightDir, resumedDir;
    const auto straight = runClient(trainArgs(straightDir.path(), 2 * kSteps));
    QVERIFY2(straight.exitCode == 0, qPrintable(straight.err));
    const auto first = runClient(trainArgs(resumedDir.path(), kSteps));
    QVERIFY2(first.exitCode == 0, qPrintable(first.err));
    // The run folder is keyed by the run id (64 hex digits), not by the manifest's name. Made to
    // look like an older version's runs/<name>/, it is moved back and resumed from.
    const QString keyed = es::test::runFolder(resumedDir.path());
    QVERIFY2(QRegularExpression(QStringLiteral("/runs/[0-9a-f]{64}$")).match(keyed).hasMatch(), qPrintable(keyed));
    QVERIFY(QDir().rename(keyed, resumedDir.filePath(QStringLiteral("runs/sotu-default"))));
    const auto second = runClient(trainArgs(resumedDir.path(), kSteps));
    QVERIFY2(second.exitCode == 0, qPrintable(second.err));
    QVERIFY2(second.err.contains(QStringLiteral("Moved the run folder")), qPrintable(second.err));
    QCOMPARE(es::test::runFolder(resumedDir.path()), keyed);
    QVERIFY2(second.err.contains(QStringLiteral("Resumed. Step: %1").arg(kSteps)), qPrintable(second.err));

    // Progress lines: one per log interval, val_loss at eval points.
    const QRegularExpression line(
        QStringLiteral(R"(^step=(\d+) loss=[0-9.]+ lr=[0-9.e+-]+ tok/s=\d+( val_loss=[0-9.]+)?$)"));
    const auto lines = straight.out.trimmed().split(QLatin1Char('\n'));
    QCOMPARE(lines.size(), kSteps);  // steps 2, 4, ..., 12
    for (const QString& l : lines) {
      const auto m = line.match(l);
      QVERIFY2(m.hasMatch(), qPrintable(l));
      QCOMPARE(!m.captured(2).isEmpty(), m.captured(1).toInt() % 4 == 0 || m.captured(1).toInt() == 2 * kSteps);
    }
    // The same step prints the same loss in both runs.
    QCOMPARE(second.out.trimmed().split(QLatin1Char('\n')).last().section(QLatin1Char(' '), 0, 1),
             lines.last().section(QLatin1Char(' '), 0, 1));

    auto a = es::ckpt::loadTrainingState(statePath(straightDir.path()));
    auto b = es::ckpt::loadTrainingState(statePath(resumedDir.path()));
    QVERIFY2(a.ok(), a.ok() ? "" : a.error().c_str());
    QVERIFY2(b.ok(), b.ok() ? "" : b.error().c_str());
    QCOMPARE(a->step, 2 * kSteps);
    QCOMPARE(b->step, 2 * kSteps);
    QCOMPARE(a->dataCursor, b->dataCursor);
    expectSameTensors(a->weights, b->weights);
    expectSameTensors(a->expAvg, b->expAvg);
    expectSameTensors(a->expAvgSq, b->expAvgSq);
  }
};

QTEST_GUILESS_MAIN(ResumeTest)
#include "tst_resume.moc"
