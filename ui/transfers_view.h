// The "Transfers" page: every checkpoint transfer of the session, one row each — our contributions
// and snapshots seeding to the swarm, other peers' being downloaded (and seeded on afterwards).
// It makes the peer-to-peer traffic visible, which is what a donor of bandwidth wants to see.
#pragma once

#include "core/node/node_reports.h"

#include <QTableWidget>
#include <QWidget>

#include <cstdint>

namespace es::ui {

class TransfersView : public QWidget {
  Q_OBJECT

 public:
  explicit TransfersView(QWidget* parent = nullptr);

  void showSwarm(const es::node::SwarmView& view);
  int rowCount() const;
  QTableWidget* table() const { return table_; }

  // Table columns, in order.
  enum Column { Kind, Round, Peer, Direction, Progress, Size, Uploaded, Downloaded, Connections, State, ColumnCount };

  // "512 B", "1.5 KiB", "12.0 MiB", "1.20 GiB".

 private:
  QTableWidget* table_ = nullptr;
};

}  // namespace es::ui
