#include "ui/expert_map_widget.h"

#include "ui/expert_colors.h"

#include <QApplication>
#include <QHeaderView>
#include <QLabel>
#include <QPainter>
#include <QStyledItemDelegate>
#include <QTableWidget>
#include <QVBoxLayout>

#include <algorithm>
#include <vector>

namespace es::ui {

namespace {

const QColor kOrphanBackground(255, 214, 170);
const QColor kOrphanText(170, 60, 0);

// A pale tint of the expert's colour: keeps the column recognisable and the text readable.
QColor tint(const QColor& c) {
  return QColor((c.red() + 3 * 255) / 4, (c.green() + 3 * 255) / 4, (c.blue() + 3 * 255) / 4);
}

constexpr int kMinCellHeight = 48;  // room for the three lines even when many layers share the height
constexpr int kMinCellWidth = 80;   // an owner id (8 characters, larger and bold) still fits
constexpr int kPad = 3;

// The font of a cell's line `i`: the first (the owners) a little larger than the item's own font.
QFont lineFont(const QFont& base, int i) {
  QFont f = base;
  if (i != 0) return f;
  if (f.pointSizeF() > 0)
    f.setPointSizeF(f.pointSizeF() * 1.2);
  else if (f.pixelSize() > 0)
    f.setPixelSize(f.pixelSize() * 6 / 5);
  return f;
}

// The lines of a cell's display text (the delegate hands '\n' over as U+2028, the line separator).
QStringList cellLines(QString text) {
  return text.replace(QChar::LineSeparator, QLatin1Char('\n')).split(QLatin1Char('\n'));
}

// Paints a cell's text lines centred one above the other, wrapping a long owner list at its commas.
// Background, font (bold for our own claims) and colour still come from the item.
class CellDelegate : public QStyledItemDelegate {
 public:
  using QStyledItemDelegate::QStyledItemDelegate;

  void paint(QPainter* painter, const QStyleOptionViewItem& option, const QModelIndex& index) const override {
    QStyleOptionViewItem opt = option;
    initStyleOption(&opt, index);
    const QStringList lines = cellLines(opt.text);
    opt.text.clear();                      // the style draws the background only; the lines are drawn below
    opt.state &= ~QStyle::State_HasFocus;  // a display, not a form: no focus frame on the current cell
    const QWidget* widget = opt.widget;
    QStyle* style = widget ? widget->style() : QApplication::style();
    style->drawControl(QStyle::CE_ItemViewItem, &opt, painter, widget);

    const QRect area = opt.rect.adjusted(kPad, kPad, -kPad, -kPad);
    const int flags = Qt::AlignHCenter | Qt::AlignTop | Qt::TextWordWrap;
    std::vector<int> heights;
    int total = 0;
    for (int i = 0; i < lines.size(); ++i) {
      const QFontMetrics fm(lineFont(opt.font, i));
      heights.push_back(fm.boundingRect(QRect(0, 0, std::max(1, area.width()), 1 << 16), flags, lines[i]).height());
      total += heights.back();
    }
    int y = area.top() + std::max(0, (area.height() - total) / 2);
    painter->save();
    painter->setClipRect(opt.rect);
    painter->setPen(opt.palette.color(QPalette::Text));
    for (int i = 0; i < lines.size(); ++i) {
      painter->setFont(lineFont(opt.font, i));
      painter->drawText(QRect(area.left(), y, area.width(), heights[i]), flags, lines[i]);
      y += heights[i];
    }
    painter->restore();
  }

  QSize sizeHint(const QStyleOptionViewItem& option, const QModelIndex& index) const override {
    QStyleOptionViewItem opt = option;
    initStyleOption(&opt, index);
    const QStringList lines = cellLines(opt.text);
    int width = 0, height = 0;
    for (int i = 0; i < lines.size(); ++i) {
      const QFontMetrics fm(lineFont(opt.font, i));
      width = std::max(width, fm.horizontalAdvance(lines[i]));
      height += fm.height();
    }
    return {width + 2 * kPad, std::max(kMinCellHeight, height + 2 * kPad)};
  }
};

}  // namespace

ExpertMapWidget::ExpertMapWidget(QWidget* parent) : QWidget(parent) {
  legend_ = new QLabel(tr("Columns: experts, rows: layers (a claim covers all layers) · ★ your claim · ×N replicas · "
                          "rN last updated in round N · — no owner"),
                       this);
  legend_->setWordWrap(false);
  table_ = new QTableWidget(0, 0, this);
  table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table_->setSelectionMode(QAbstractItemView::NoSelection);
  table_->setWordWrap(true);
  table_->setItemDelegate(new CellDelegate(table_));
  // The grid fills the page: columns share the width, layers share the height, down to a readable
  // minimum (below it the table scrolls).
  table_->horizontalHeader()->setSectionResizeMode(QHeaderView::Stretch);
  table_->horizontalHeader()->setMinimumSectionSize(kMinCellWidth);
  table_->verticalHeader()->setSectionResizeMode(QHeaderView::Stretch);
  table_->verticalHeader()->setMinimumSectionSize(kMinCellHeight);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(legend_);
  layout->addWidget(table_, 1);
}

void ExpertMapWidget::showSwarm(const es::node::SwarmView& view) {
  // Another run: its expert indices mean other experts, so the update history no longer applies.
  if (!runId_.empty() && view.runId != runId_) lastUpdate_.clear();
  runId_ = view.runId;
  nExperts_ = std::max(0, view.nExperts);
  nLayers_ = std::max(0, view.nLayers);
  owners_.assign(nExperts_, {});
  mine_.assign(nExperts_, false);
  for (const auto& p : view.peers) {
    if (p.banned) continue;  // a banned peer's claims are ignored by the merge, so they own nothing
    const bool self = p.self || (!view.selfId.empty() && p.id == view.selfId);
    for (int e : p.claims) {
      if (e < 0 || e >= nExperts_) continue;
      const QString id = QString::fromStdString(p.id);
      if (!owners_[e].contains(id)) owners_[e] << id;
      if (self) mine_[e] = true;
    }
  }
  for (auto& list : owners_) list.sort();
  refreshCells();
}

void ExpertMapWidget::noteRound(const es::node::RoundSummary& summary) {
  for (int e : summary.updatedExperts)
    if (e >= 0) lastUpdate_[e] = std::max(lastUpdate_.value(e, 0), summary.round);
  refreshCells();
}

QStringList ExpertMapWidget::ownersOf(int expert) const {
  return expert >= 0 && expert < nExperts_ ? owners_[expert] : QStringList();
}

int ExpertMapWidget::replicaCount(int expert) const { return static_cast<int>(ownersOf(expert).size()); }

std::int64_t ExpertMapWidget::lastUpdateRound(int expert) const { return lastUpdate_.value(expert, 0); }

bool ExpertMapWidget::claimedBySelf(int expert) const { return expert >= 0 && expert < nExperts_ && mine_[expert]; }

void ExpertMapWidget::refreshCells() {
  if (table_->rowCount() != nLayers_ || table_->columnCount() != nExperts_) {
    table_->clear();
    table_->setRowCount(nLayers_);
    table_->setColumnCount(nExperts_);
    QStringList rows, cols;
    for (int l = 0; l < nLayers_; ++l) rows << tr("Layer %1").arg(l);
    for (int e = 0; e < nExperts_; ++e) cols << QStringLiteral("E%1").arg(e);
    table_->setVerticalHeaderLabels(rows);
    table_->setHorizontalHeaderLabels(cols);
  }
  QFont plain = table_->font();
  QFont bold = plain;
  bold.setBold(true);
  for (int e = 0; e < nExperts_; ++e) {
    const QStringList& owners = owners_[e];
    const bool orphan = owners.isEmpty();
    const std::int64_t last = lastUpdateRound(e);
    QStringList shorts;
    for (const QString& id : owners) shorts << id.left(8);
    // Three lines: owners (or "—"), replicas, last update.
    const QString text = QStringLiteral("%1%2\n%3\n%4")
                             .arg(mine_[e] ? QStringLiteral("★ ") : QString(),
                                  orphan ? QStringLiteral("—") : shorts.join(QStringLiteral(", ")),
                                  owners.size() == 1 ? tr("×1 replica") : tr("×%1 replicas").arg(owners.size()),
                                  last > 0 ? QStringLiteral("r%1").arg(last) : QStringLiteral("r–"));
    const QBrush background(orphan ? kOrphanBackground : tint(expertColor(e, nExperts_)));
    for (int l = 0; l < nLayers_; ++l) {
      QTableWidgetItem* item = table_->item(l, e);
      if (!item) {
        item = new QTableWidgetItem;
        item->setFlags(Qt::ItemIsEnabled);
        item->setTextAlignment(Qt::AlignCenter);
        table_->setItem(l, e, item);
      }
      item->setText(text);
      item->setBackground(background);
      item->setForeground(orphan ? QBrush(kOrphanText) : QBrush(Qt::black));
      item->setFont(mine_[e] ? bold : plain);
      item->setToolTip(tr("Expert %1, layer %2\nOwners: %3\nReplicas: %4\nLast updated: %5")
                           .arg(e)
                           .arg(l)
                           .arg(orphan ? tr("none (orphaned)") : owners.join(QStringLiteral(", ")))
                           .arg(owners.size())
                           .arg(last > 0 ? tr("round %1").arg(last) : tr("never")));
    }
  }
}

}  // namespace es::ui
