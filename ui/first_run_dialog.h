// The first start's questions: which run to join, and whether to join the public network. Most
// donors take the default run; anyone can paste a magnet link of another run instead. The answers
// become ClientSettings::runSource and ClientSettings::publicNetwork; the dialog says what joining
// contacts (the DHT routers by name) and that peers will connect to this machine's port.
#pragma once

#include <QDialog>
#include <QString>

class QCheckBox;
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
  bool joinPublicNetwork() const;
  // The checkbox's state and what the note names: the routers contacted, the listen port.
  void setNetwork(bool join, const QStringList& routers, int listenPort);

 private:
  void updateState();

  QRadioButton* defaultRun_;
  QRadioButton* magnetRun_;
  QLineEdit* magnet_;
  QLabel* error_;
  QCheckBox* publicNetwork_;
  QLabel* networkNote_;
  QDialogButtonBox* buttons_;
};

}  // namespace es::ui
