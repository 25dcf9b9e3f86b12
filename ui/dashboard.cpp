#include "ui/dashboard.h"

#include "core/store/ledger.h"
#include "ui/view_helpers.h"

#include <QChart>
#include <QChartView>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLegend>
#include <QLegendMarker>
#include <QLineSeries>
#include <QProgressBar>
#include <QScatterSeries>
#include <QVBoxLayout>
#include <QValueAxis>

#include <algorithm>
#include <cmath>

namespace es::ui {
namespace {
// Training points beyond this are thinned (every other one dropped): a long run stays light to
// draw while its shape is kept.
constexpr int kMaxTrainPoints = 4000;

// Drops every point at or beyond `step` (a restart trains steps after the last merge again).
void truncateFrom(QXYSeries* series, std::int64_t step) {
  int keep = series->count();
  while (keep > 0 && series->at(keep - 1).x() >= double(step)) --keep;
  if (keep < series->count()) series->removePoints(keep, series->count() - keep);
}
}  // namespace

Dashboard::Dashboard(QWidget* parent) : QWidget(parent) {
  chart_ = new QChart;
  chart_->setTitle(tr("Loss"));
  train_ = new QLineSeries(chart_);
  train_->setName(tr("training (this peer)"));
  val_ = new QLineSeries(chart_);
  val_->setName(tr("validation (merged model)"));
  valDots_ = new QScatterSeries(chart_);
  valDots_->setMarkerSize(7);
  chart_->addSeries(train_);
  chart_->addSeries(val_);
  chart_->addSeries(valDots_);
  chart_->legend()->markers(valDots_).value(0)->setVisible(false);
  xAxis_ = new QValueAxis;
  xAxis_->setTitleText(tr("step"));
  xAxis_->setLabelFormat(QStringLiteral("%d"));
  yAxis_ = new QValueAxis;
  yAxis_->setTitleText(tr("loss (nats/token)"));
  chart_->addAxis(xAxis_, Qt::AlignBottom);
  chart_->addAxis(yAxis_, Qt::AlignLeft);
  for (auto* s : std::initializer_list<QXYSeries*>{train_, val_, valDots_}) {
    s->attachAxis(xAxis_);
    s->attachAxis(yAxis_);
  }
  valDots_->setColor(val_->color());
  auto* view = new QChartView(chart_);
  view->setRenderHint(QPainter::Antialiasing);
  view->setMinimumSize(480, 300);

  state_ = new QLabel(tr("Starting…"));
  QFont big = state_->font();
  big.setPointSizeF(big.pointSizeF() * 1.3);
  big.setBold(true);
  state_->setFont(big);
  round_ = new QLabel(QStringLiteral("—"));
  loss_ = new QLabel(QStringLiteral("—"));
  speed_ = new QLabel(QStringLiteral("—"));
  peers_ = new QLabel(QStringLiteral("—"));
  traffic_ = new QLabel(QStringLiteral("—"));
  gpu_ = new QLabel(QStringLiteral("—"));
  gpu_->setObjectName(QStringLiteral("gpu"));
  gpu_->setToolTip(tr("The GPU's last reading (NVML): utilisation, memory used, temperature, power"));
  roundProgress_ = new QProgressBar;
  roundProgress_->setRange(0, 1);
  roundProgress_->setValue(0);
  auto* facts = new QFormLayout;
  facts->addRow(tr("State"), state_);
  facts->addRow(tr("Round"), round_);
  facts->addRow(tr("Progress in round"), roundProgress_);
  facts->addRow(tr("Loss"), loss_);
  facts->addRow(tr("Speed"), speed_);
  facts->addRow(tr("Peers"), peers_);
  facts->addRow(tr("Traffic"), traffic_);
  facts->addRow(tr("GPU"), gpu_);
  auto* side = new QWidget;
  side->setLayout(facts);
  side->setMinimumWidth(260);
  auto* layout = new QHBoxLayout(this);
  layout->addWidget(view, 1);
  layout->addWidget(side);
}

void Dashboard::loadHistory(const std::vector<store::MetricRow>& rows) {
  // A round's row shares its step with that step's own row (the ledger keeps one per step) and
  // carries the last training loss too: it gives both points.
  for (const auto& row : rows) {
    if (row.valLoss) addValPoint(row.round * syncEvery_, *row.valLoss);
    addTrainPoint(row.step, row.loss);
  }
  fitAxes();
}

void Dashboard::addTrainPoint(std::int64_t step, double loss) {
  if (!std::isfinite(loss)) return;
  truncateFrom(train_, step);
  if (train_->count() >= kMaxTrainPoints) {
    QList<QPointF> thinned;
    const auto points = train_->points();
    for (int i = 0; i < points.size(); i += 2) thinned.append(points[i]);
    train_->replace(thinned);
  }
  train_->append(double(step), loss);
  if (train_->count() == 1 && val_->count() == 0) minLoss_ = maxLoss_ = loss;
  minLoss_ = std::min(minLoss_, loss);
  maxLoss_ = std::max(maxLoss_, loss);
  maxStep_ = std::max(maxStep_, step);
}

void Dashboard::addValPoint(std::int64_t step, double loss) {
  if (!std::isfinite(loss) || loss <= 0) return;
  truncateFrom(val_, step);  // a round merged again after a restart replaces its point
  truncateFrom(valDots_, step);
  val_->append(double(step), loss);
  valDots_->append(double(step), loss);
  if (train_->count() == 0 && val_->count() == 1) minLoss_ = maxLoss_ = loss;
  minLoss_ = std::min(minLoss_, loss);
  maxLoss_ = std::max(maxLoss_, loss);
  maxStep_ = std::max(maxStep_, step);
}

void Dashboard::fitAxes() {
  xAxis_->setRange(0, double(std::max<std::int64_t>(maxStep_, syncEvery_)));
  xAxis_->applyNiceNumbers();  // ticks on round numbers of steps
  const double pad = std::max(0.05, (maxLoss_ - minLoss_) * 0.05);
  yAxis_->setRange(std::max(0.0, minLoss_ - pad), maxLoss_ + pad);
}

void Dashboard::addStep(const node::StepReport& r) {
  addTrainPoint(r.step, r.loss);
  fitAxes();
  const std::int64_t round = (r.step - 1) / syncEvery_ + 1;
  const int inRound = int((r.step - 1) % syncEvery_) + 1;
  round_->setText(tr("%1 (step %2)").arg(round).arg(r.step));
  roundProgress_->setRange(0, syncEvery_);
  roundProgress_->setValue(inRound);
  roundProgress_->setFormat(tr("step %1 of %2").arg(inRound).arg(syncEvery_));
  loss_->setText(tr("%1 (training)").arg(r.loss, 0, 'f', 3));
  speed_->setText(tr("%1 tokens/s").arg(r.tokensPerSecond, 0, 'f', 0));
  if (r.gpu) {  // most steps carry no reading (at most one a second): the label keeps the last one
    const auto gib = [](std::int64_t bytes) { return double(bytes) / double(1LL << 30); };
    gpu_->setText(tr("%1 % · %2 of %3 GiB · %4 °C · %5 W")
                      .arg(r.gpu->utilizationPercent)
                      .arg(gib(r.gpu->memoryUsedBytes), 0, 'f', 1)
                      .arg(gib(r.gpu->memoryTotalBytes), 0, 'f', 1)
                      .arg(r.gpu->temperatureC)
                      .arg(r.gpu->powerWatts, 0, 'f', 0));
  }
}

void Dashboard::addRound(const node::RoundSummary& s) {
  if (!s.valLoss) return;  // not an eval round: the chart and the label keep what was measured
  addValPoint(s.round * syncEvery_, *s.valLoss);
  fitAxes();
  loss_->setText(tr("%1 (validation, round %2)").arg(*s.valLoss, 0, 'f', 3).arg(s.round));
}

void Dashboard::showSwarm(const node::SwarmView& v) {
  int active = 0;
  for (const auto& p : v.peers) active += !p.banned ? 1 : 0;
  peers_->setText(tr("%1 in the run (%2 connections)").arg(active).arg(v.connections));
  traffic_->setText(tr("↑ %1  ↓ %2").arg(humanBytes(v.bytesSent), humanBytes(v.bytesReceived)));
}

void Dashboard::setState(const QString& state) { state_->setText(state); }

QString Dashboard::gpuText() const { return gpu_->text(); }

int Dashboard::trainPointCount() const { return train_->count(); }
int Dashboard::valPointCount() const { return val_->count(); }

std::set<std::int64_t> Dashboard::roundsWithTrainPoints() const {
  std::set<std::int64_t> rounds;
  for (const auto& p : train_->points()) rounds.insert((std::int64_t(p.x()) - 1) / syncEvery_ + 1);
  return rounds;
}

std::set<std::int64_t> Dashboard::roundsWithValPoints() const {
  std::set<std::int64_t> rounds;
  for (const auto& p : val_->points()) rounds.insert(std::int64_t(p.x()) / syncEvery_);
  return rounds;
}

}  // namespace es::ui
