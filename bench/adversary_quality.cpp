// What the attacks of tst_swarm_adversary cost in quality (issue 15: "validation loss after 6
// rounds within 2 % of the same run without attackers"): runs that test twice — as it is, and with
// ES_ADVERSARY_BASELINE=1 (the same honest peers, newcomer and run, no attacker) — and prints the
// mean final validation loss of the honest peers in each and their ratio. Two cores: ~4 minutes.
// One pair of runs is one sample: the honest peers' claims and round timing differ between runs,
// so repeat it (ES_REPEAT=N) before reading a difference under ~1 % as the attackers'.
#include <QCoreApplication>
#include <QProcess>
#include <QRegularExpression>

#include <cstdio>
#include <optional>

namespace {

// The mean of the "final val_loss NAME X" lines of one run, or nothing when the run failed.
std::optional<double> meanFinalLoss(bool baseline) {
  QProcess test;
  auto env = QProcessEnvironment::systemEnvironment();
  env.insert("QT_QPA_PLATFORM", "offscreen");
  env.insert("OMP_NUM_THREADS", "1");
  env.insert("OMP_WAIT_POLICY", "PASSIVE");
  if (baseline) env.insert("ES_ADVERSARY_BASELINE", "1");
  test.setProcessEnvironment(env);
  test.setProcessChannelMode(QProcess::MergedChannels);
  test.start(QStringLiteral(ES_ADVERSARY_TEST), {});
  if (!test.waitForFinished(1200000)) return std::nullopt;
  const QString out = QString::fromUtf8(test.readAll());
  static const QRegularExpression line(QStringLiteral("final val_loss (\\S+) ([0-9.]+)"));
  double sum = 0;
  int n = 0;
  for (auto it = line.globalMatch(out); it.hasNext();) {
    sum += it.next().captured(2).toDouble();
    ++n;
  }
  if (test.exitCode() != 0 || n == 0) {
    // The failing check first (its line and location): the tail alone is the clients' exit logs.
    QStringList failures;
    for (const auto& l : out.split('\n'))
      if (l.startsWith(QStringLiteral("FAIL!")) || l.trimmed().startsWith(QStringLiteral("Loc:"))) failures << l;
    std::fprintf(stderr, "adversary_quality: the %s run failed:\n%s\n...\n%s\n", baseline ? "baseline" : "attacked",
                 qPrintable(failures.join('\n')), qPrintable(out.right(4000)));
    return std::nullopt;
  }
  return sum / n;
}

}  // namespace

int main(int argc, char** argv) {
  QCoreApplication app(argc, argv);
  const int repeat = qEnvironmentVariableIntValue("ES_REPEAT") > 0 ? qEnvironmentVariableIntValue("ES_REPEAT") : 1;
  for (int i = 0; i < repeat; ++i) {
    const auto attacked = meanFinalLoss(false), baseline = meanFinalLoss(true);
    if (!attacked || !baseline) return 1;
    std::printf("adversary_val_loss_attacked: %.4f nats\n", *attacked);
    std::printf("adversary_val_loss_baseline: %.4f nats\n", *baseline);
    std::printf("adversary_val_loss_ratio: %.4f x\n", *attacked / *baseline);
  }
  return 0;
}
