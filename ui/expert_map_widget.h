// The "Experts" page: a layers × experts grid saying who trains which expert, how many replicas it
// has and when it last changed. A claim covers an expert in every layer, so each column reads the
// same top to bottom; the grid keeps the model's shape visible and makes orphaned experts (no
// owner: they stop improving) stand out. Our own claims are starred.
#pragma once

#include "core/node/node_reports.h"

#include <QMap>
#include <QStringList>
#include <QTableWidget>
#include <QWidget>

#include <cstdint>
#include <string>
#include <vector>

class QLabel;

namespace es::ui {

class ExpertMapWidget : public QWidget {
  Q_OBJECT

 public:
  explicit ExpertMapWidget(QWidget* parent = nullptr);

  // Owners from view.peers[*].claims (banned peers do not count); shape from nExperts/nLayers.
  void showSwarm(const es::node::SwarmView& view);
  // summary.updatedExperts were changed in summary.round.
  void noteRound(const es::node::RoundSummary& summary);

  QStringList ownersOf(int expert) const;  // full peer ids, sorted
  int replicaCount(int expert) const;
  std::int64_t lastUpdateRound(int expert) const;  // 0 = never
  bool claimedBySelf(int expert) const;
  QTableWidget* table() const { return table_; }

 private:
  void refreshCells();

  QLabel* legend_ = nullptr;
  QTableWidget* table_ = nullptr;
  int nExperts_ = 0;
  int nLayers_ = 0;
  std::string runId_;
  std::vector<QStringList> owners_;     // per expert, sorted full ids
  std::vector<bool> mine_;              // per expert: claimed by this peer
  QMap<int, std::int64_t> lastUpdate_;  // expert → round; kept across views of the same run
};

}  // namespace es::ui
