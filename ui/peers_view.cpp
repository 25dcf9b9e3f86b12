#include "ui/peers_view.h"

#include "ui/expert_colors.h"
#include "ui/peer_map_widget.h"
#include "ui/view_helpers.h"

#include <QHBoxLayout>
#include <QHeaderView>
#include <QSplitter>
#include <QTableWidget>

#include <algorithm>

namespace es::ui {

PeersView::PeersView(QWidget* parent) : QWidget(parent) {
  splitter_ = new QSplitter(Qt::Horizontal, this);
  map_ = new PeerMapWidget(splitter_);
  table_ = new QTableWidget(0, ColumnCount, splitter_);
  table_->setHorizontalHeaderLabels({tr("Peer"), tr("Round"), tr("Experts"), tr("Lease until"), tr("Steps"), tr("Loss"),
                                     tr("Tokens/s"), tr("Status")});
  table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  table_->verticalHeader()->setVisible(false);
  table_->horizontalHeader()->setStretchLastSection(true);
  table_->setAlternatingRowColors(true);
  splitter_->addWidget(map_);
  splitter_->addWidget(table_);
  splitter_->setStretchFactor(0, 1);
  splitter_->setStretchFactor(1, 1);
  auto* layout = new QHBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(splitter_);
}

void PeersView::showSwarm(const es::node::SwarmView& view) {
  map_->showSwarm(view);

  // Same order as the map (self first), so row i and the map's peer i are the same peer.
  const QStringList ids = map_->peerIds();
  table_->setRowCount(static_cast<int>(ids.size()));
  int row = 0;
  for (const QString& id : ids) {
    const auto it = std::find_if(view.peers.begin(), view.peers.end(),
                                 [&](const es::node::PeerView& p) { return QString::fromStdString(p.id) == id; });
    if (it == view.peers.end()) continue;
    const auto& p = *it;
    const bool self = p.self || p.id == view.selfId;
    QStringList experts;
    for (int e : p.claims) experts << QString::number(e);

    QTableWidgetItem* peer = reusedCell(table_, row, Peer);
    peer->setText(self ? tr("%1 (you)").arg(id.left(8)) : id.left(8));
    peer->setToolTip(id);
    QFont f = table_->font();
    f.setBold(self);
    peer->setFont(f);
    // A colour chip of the first claimed expert ties the row to the map's pie.
    peer->setData(Qt::DecorationRole,
                  p.claims.empty() ? noExpertColor() : expertColor(p.claims.front(), view.nExperts));

    reusedCell(table_, row, Round)->setText(QString::number(p.round));
    reusedCell(table_, row, Experts)
        ->setText(experts.isEmpty() ? QStringLiteral("—") : experts.join(QStringLiteral(", ")));
    reusedCell(table_, row, LeaseUntil)
        ->setText(p.leaseUntil > 0 ? QString::number(p.leaseUntil) : QStringLiteral("—"));
    reusedCell(table_, row, Steps)->setText(QString::number(p.steps));
    reusedCell(table_, row, Loss)->setText(p.steps > 0 ? QString::number(p.loss, 'f', 3) : QStringLiteral("—"));
    reusedCell(table_, row, TokensPerSecond)->setText(QString::number(p.tokensPerSecond, 'f', 0));
    QTableWidgetItem* status = reusedCell(table_, row, Status);
    status->setText(p.banned ? tr("banned") : p.claims.empty() ? tr("no claims") : tr("active"));
    status->setForeground(p.banned ? QBrush(QColor(205, 40, 40)) : QBrush());
    for (int col : {Round, LeaseUntil, Steps, Loss, TokensPerSecond})
      table_->item(row, col)->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
    ++row;
  }
  table_->setRowCount(row);
  table_->resizeColumnsToContents();
}

}  // namespace es::ui
