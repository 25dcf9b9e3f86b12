// The "Peers" page: the painted peer map on the left and a table with one row per peer on the
// right. The map shows the shape of the swarm, the table the exact numbers (round, claims, lease,
// loss, speed) that the map's tooltips would otherwise hide.
#pragma once

#include "core/node/node_reports.h"

#include <QTableWidget>
#include <QWidget>

class QSplitter;

namespace es::ui {

class PeerMapWidget;

class PeersView : public QWidget {
  Q_OBJECT

 public:
  explicit PeersView(QWidget* parent = nullptr);

  void showSwarm(const es::node::SwarmView& view);

  PeerMapWidget* map() const { return map_; }
  QTableWidget* table() const { return table_; }

  // Table columns, in order.
  enum Column { Peer, Round, Experts, LeaseUntil, Steps, Loss, TokensPerSecond, Status, ColumnCount };

 private:
  QSplitter* splitter_ = nullptr;
  PeerMapWidget* map_ = nullptr;
  QTableWidget* table_ = nullptr;
};

}  // namespace es::ui
