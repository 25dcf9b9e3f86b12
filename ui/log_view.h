// The "Log" page: the engine's messages, one timestamped line each, newest at the bottom. Capped at
// 5000 lines so a client left running for weeks does not grow without bound.
#pragma once

#include <QString>
#include <QWidget>

class QPlainTextEdit;

namespace es::ui {

class LogView : public QWidget {
  Q_OBJECT

 public:
  explicit LogView(QWidget* parent = nullptr);

  void append(const QString& line);  // prefixed with the local time, "HH:mm:ss "
  QString text() const;

  QPlainTextEdit* editor() const { return edit_; }

 private:
  QPlainTextEdit* edit_ = nullptr;
};

}  // namespace es::ui
