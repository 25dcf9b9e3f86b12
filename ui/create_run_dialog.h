// ExpertSwarm ▸ Create a run… (issue 40): the window's face of `expertswarm create-run`. The corpus
// folder, the new run's folder, a preset and a name; Create runs the same command as a child
// process (the GUI never tokenizes on its own thread, and the command line and the dialog cannot
// drift apart), shows its progress lines ("create-run: <stage> NN%") as a bar, and at the end the
// magnet link others join by, with a button to copy it. Cancel stops the child; what it left is
// only `<folder>.partial`, which is removed (core/train/run_create.h).
#pragma once

#include <QDialog>
#include <QProcess>
#include <QString>

class QComboBox;
class QLabel;
class QLineEdit;
class QProgressBar;
class QPushButton;

namespace es::ui {

class CreateRunDialog : public QDialog {
  Q_OBJECT

 public:
  // `executable`: the expertswarm binary that runs `create-run`.
  explicit CreateRunDialog(QString executable, QWidget* parent = nullptr);
  ~CreateRunDialog() override;

  // For tests: fill the form, then create() as the button does.
  void setForm(const QString& corpus, const QString& out, const QString& preset);
  void create();
  QString magnetLink() const { return magnet_; }  // once created
  QString runFolder() const;                      // the folder typed in
  QProgressBar* progress() const { return progress_; }
  QLabel* status() const { return status_; }
  bool running() const { return process_.state() != QProcess::NotRunning; }

 Q_SIGNALS:
  void created(const QString& runFolder, const QString& magnetLink);

 private:
  void readProgress();
  void onFinished(int exitCode, QProcess::ExitStatus status);
  void cancel();

  QString executable_;
  QProcess process_;
  QString stderrTail_, magnet_;
  QLineEdit* corpus_ = nullptr;
  QLineEdit* out_ = nullptr;
  QLineEdit* name_ = nullptr;
  QComboBox* preset_ = nullptr;
  QProgressBar* progress_ = nullptr;
  QLabel* status_ = nullptr;
  QLineEdit* link_ = nullptr;
  QPushButton* createButton_ = nullptr;
  QPushButton* copyButton_ = nullptr;
};

}  // namespace es::ui
