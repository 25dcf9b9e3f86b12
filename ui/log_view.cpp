#include "ui/log_view.h"

#include <QFontDatabase>
#include <QPlainTextEdit>
#include <QScrollBar>
#include <QTime>
#include <QVBoxLayout>

namespace es::ui {

LogView::LogView(QWidget* parent) : QWidget(parent) {
  edit_ = new QPlainTextEdit(this);
  edit_->setReadOnly(true);
  edit_->setMaximumBlockCount(5000);
  edit_->setLineWrapMode(QPlainTextEdit::NoWrap);
  edit_->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(edit_);
}

void LogView::append(const QString& line) {
  // Follow the tail only if the user is already there; someone scrolled up to read keeps their place.
  QScrollBar* bar = edit_->verticalScrollBar();
  const bool atBottom = bar->value() >= bar->maximum();
  const int keep = bar->value();
  edit_->appendPlainText(QTime::currentTime().toString(QStringLiteral("HH:mm:ss ")) + line);
  bar->setValue(atBottom ? bar->maximum() : keep);
}

QString LogView::text() const { return edit_->toPlainText(); }

}  // namespace es::ui
