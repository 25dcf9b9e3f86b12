// The dashboard tab: live training and validation loss (Qt Charts), tokens/s, progress through
// the round, peers, bytes up/down, and what the donor's machine is doing (training / paused).
// Fed by the engine's reports; history (after a restart) comes from the ledger's metrics.
#pragma once

#include "core/node/node_reports.h"

#include <QString>
#include <QWidget>

#include <cstdint>
#include <set>
#include <vector>

class QLabel;
class QProgressBar;
class QChart;
class QLineSeries;
class QScatterSeries;
class QValueAxis;

namespace es::store {
struct MetricRow;
}

namespace es::ui {

class Dashboard : public QWidget {
  Q_OBJECT

 public:
  explicit Dashboard(QWidget* parent = nullptr);

  void setSyncEvery(int steps) { syncEvery_ = steps > 0 ? steps : 1; }
  // Past metrics of the run (the ledger's, ordered by step): steps become training points, rows
  // with a validation loss become validation points at their round's last step (as live ones).
  void loadHistory(const std::vector<store::MetricRow>& rows);
  void addStep(const node::StepReport& report);
  void addRound(const node::RoundSummary& summary);
  void showSwarm(const node::SwarmView& view);
  void setState(const QString& state);  // "Training", "Paused by you", …

  // For tests and the UI snapshot: what the chart holds.
  int trainPointCount() const;
  int valPointCount() const;
  std::set<std::int64_t> roundsWithTrainPoints() const;  // rounds (1-based) that have ≥ 1 training point
  std::set<std::int64_t> roundsWithValPoints() const;
  QChart* chart() const { return chart_; }
  QString gpuText() const;  // the GPU row: its last reading, "—" before any

 private:
  void addTrainPoint(std::int64_t step, double loss);
  void addValPoint(std::int64_t step, double loss);
  void fitAxes();

  int syncEvery_ = 1;
  QChart* chart_ = nullptr;
  QLineSeries* train_ = nullptr;
  QLineSeries* val_ = nullptr;
  QScatterSeries* valDots_ = nullptr;
  QValueAxis* xAxis_ = nullptr;
  QValueAxis* yAxis_ = nullptr;
  QLabel* state_ = nullptr;
  QLabel* round_ = nullptr;
  QLabel* loss_ = nullptr;
  QLabel* speed_ = nullptr;
  QLabel* peers_ = nullptr;
  QLabel* traffic_ = nullptr;
  QLabel* gpu_ = nullptr;
  QProgressBar* roundProgress_ = nullptr;
  double minLoss_ = 0, maxLoss_ = 0;
  std::int64_t maxStep_ = 0;
};

}  // namespace es::ui
