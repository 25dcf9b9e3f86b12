// The first start's one question: which run to join. Most donors take the default run; anyone can
// paste a magnet link of another run instead. The answer becomes ClientSettings::runSource.
#pragma once

#include <QDialog>
#include <QString>

class QDialogButtonBox;
class QLabel;
class QLineEdit;
class QRadioButton;

namespace es::ui {

// "" when `text` (trimmed) is a magnet link that names a run: "magnet:?" with xt=urn:btmh:1220 + 64
// hex digits (a run's id is the v2 info-hash of its run torrent; v1 btih links cannot name one);
// otherwise a short sentence saying what is wrong.
QString magnetError(const QString& text);

class FirstRunDialog : public QDialog {
  Q_OBJECT

 public:
  explicit FirstRunDialog(QWidget* parent = nullptr);

  // "default", or the trimmed magnet link.
  QString runSource() const;
  void setRunSource(const QString& source);

 private:
  void updateState();

  QRadioButton* defaultRun_;
  QRadioButton* magnetRun_;
  QLineEdit* magnet_;
  QLabel* error_;
  QDialogButtonBox* buttons_;
};

}  // namespace es::ui
