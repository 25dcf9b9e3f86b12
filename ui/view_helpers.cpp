#include "ui/view_helpers.h"

#include <QTableWidget>

namespace es::ui {

QString humanBytes(std::int64_t bytes) {
  if (bytes < 1024) return QStringLiteral("%1 B").arg(bytes);
  const char* units[] = {"KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes) / 1024;
  int u = 0;
  while (v >= 1024 && u < 3) {
    v /= 1024;
    ++u;
  }
  return QStringLiteral("%1 %2").arg(QString::number(v, 'f', v < 10 ? 2 : 1), QLatin1String(units[u]));
}

QTableWidgetItem* reusedCell(QTableWidget* table, int row, int col) {
  QTableWidgetItem* item = table->item(row, col);
  if (!item) {
    item = new QTableWidgetItem;
    item->setFlags(Qt::ItemIsSelectable | Qt::ItemIsEnabled);
    table->setItem(row, col, item);
  }
  return item;
}

}  // namespace es::ui
