// Small helpers every view shares: byte counts for people, and table cells reused across the
// once-a-second refreshes (so selection and scrolling survive them).
#pragma once

#include <QString>

#include <cstdint>

class QTableWidget;
class QTableWidgetItem;

namespace es::ui {

QString humanBytes(std::int64_t bytes);  // "512 B", "1.50 KiB", "12.3 MiB"
// The item at (row, col), created read-only when missing.
QTableWidgetItem* reusedCell(QTableWidget* table, int row, int col);

}  // namespace es::ui
