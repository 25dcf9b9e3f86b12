#include "ui/transfers_view.h"
#include "ui/view_helpers.h"

#include <QHeaderView>
#include <QTableWidget>
#include <QVBoxLayout>

#include <algorithm>
#include <cmath>

namespace es::ui {

TransfersView::TransfersView(QWidget* parent) : QWidget(parent) {
  table_ = new QTableWidget(0, ColumnCount, this);
  table_->setHorizontalHeaderLabels({tr("Kind"), tr("Round"), tr("Peer"), tr("Direction"), tr("Progress"), tr("Size"),
                                     tr("Uploaded"), tr("Downloaded"), tr("Connections"), tr("State")});
  table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  table_->verticalHeader()->setVisible(false);
  table_->horizontalHeader()->setStretchLastSection(true);
  table_->setAlternatingRowColors(true);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(table_);
}

int TransfersView::rowCount() const { return table_->rowCount(); }

void TransfersView::showSwarm(const es::node::SwarmView& view) {
  // Newest round first: the transfers that matter now are at the top; ties keep the engine's order.
  std::vector<const es::node::TransferView*> rows;
  for (const auto& t : view.transfers) rows.push_back(&t);
  std::stable_sort(rows.begin(), rows.end(), [](auto* a, auto* b) { return a->round > b->round; });

  table_->setRowCount(static_cast<int>(rows.size()));
  for (int row = 0; row < static_cast<int>(rows.size()); ++row) {
    const auto& t = *rows[row];
    const QString peerId = QString::fromStdString(t.peer);
    const bool mine = t.ours || (!t.peer.empty() && t.peer == view.selfId);
    const double fraction =
        t.totalBytes > 0 ? std::clamp(static_cast<double>(t.doneBytes) / static_cast<double>(t.totalBytes), 0.0, 1.0)
                         : (t.finished ? 1.0 : 0.0);
    // Ours are complete from the start and only ever upload; someone else's is "done" once fetched,
    // and "seeding" again while peers are connected to fetch it from us in turn.
    const QString state = t.ours              ? tr("seeding")
                          : !t.finished       ? tr("downloading")
                          : t.connections > 0 ? tr("seeding")
                                              : tr("done");

    reusedCell(table_, row, Kind)->setText(QString::fromStdString(t.kind));
    reusedCell(table_, row, Kind)->setToolTip(QString::fromStdString(t.contentId));
    reusedCell(table_, row, Round)->setText(QString::number(t.round));
    QTableWidgetItem* peer = reusedCell(table_, row, Peer);
    peer->setText(mine ? tr("you") : peerId.isEmpty() ? QStringLiteral("—") : peerId.left(8));
    peer->setToolTip(peerId);
    reusedCell(table_, row, Direction)->setText(t.ours ? tr("upload") : tr("download"));
    reusedCell(table_, row, Progress)->setText(QStringLiteral("%1%").arg(static_cast<int>(std::floor(fraction * 100))));
    reusedCell(table_, row, Size)->setText(humanBytes(t.totalBytes));
    reusedCell(table_, row, Uploaded)->setText(humanBytes(t.uploadedBytes));
    reusedCell(table_, row, Downloaded)->setText(humanBytes(t.downloadedBytes));
    reusedCell(table_, row, Connections)->setText(QString::number(t.connections));
    reusedCell(table_, row, State)->setText(state);
    for (int col : {Round, Progress, Size, Uploaded, Downloaded, Connections})
      table_->item(row, col)->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
  }
  table_->resizeColumnsToContents();
}

}  // namespace es::ui
