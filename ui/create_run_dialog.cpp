#include "ui/create_run_dialog.h"

#include <QApplication>
#include <QClipboard>
#include <QComboBox>
#include <QDialogButtonBox>
#include <QDir>
#include <QFileDialog>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QRegularExpression>
#include <QVBoxLayout>

namespace es::ui {
namespace {

// A line edit with a "Browse…" button that picks a folder into it.
QWidget* folderField(QLineEdit* edit, const QString& caption, QWidget* parent) {
  auto* row = new QWidget(parent);
  auto* layout = new QHBoxLayout(row);
  layout->setContentsMargins(0, 0, 0, 0);
  auto* browse = new QPushButton(QObject::tr("Browse…"), row);
  layout->addWidget(edit, 1);
  layout->addWidget(browse);
  QObject::connect(browse, &QPushButton::clicked, row, [edit, caption, row] {
    const QString dir = QFileDialog::getExistingDirectory(row, caption, edit->text());
    if (!dir.isEmpty()) edit->setText(dir);
  });
  return row;
}

}  // namespace

CreateRunDialog::CreateRunDialog(QString executable, QWidget* parent)
    : QDialog(parent), executable_(std::move(executable)) {
  setWindowTitle(tr("Create a run"));
  corpus_ = new QLineEdit(this);
  corpus_->setPlaceholderText(tr("a folder of .txt / .jsonl files"));
  out_ = new QLineEdit(this);
  out_->setPlaceholderText(tr("the new run's folder (must not exist)"));
  name_ = new QLineEdit(this);
  name_->setPlaceholderText(tr("default: the folder's name"));
  preset_ = new QComboBox(this);
  preset_->addItems({QStringLiteral("tiny"), QStringLiteral("default"), QStringLiteral("gpu-1b")});
  preset_->setCurrentText(QStringLiteral("default"));
  auto* form = new QFormLayout;
  form->addRow(tr("Corpus:"), folderField(corpus_, tr("The corpus folder"), this));
  form->addRow(tr("Run folder:"), out_);
  form->addRow(tr("Model:"), preset_);
  form->addRow(tr("Name:"), name_);
  progress_ = new QProgressBar(this);
  progress_->setRange(0, 100);
  progress_->setValue(0);
  status_ = new QLabel(this);
  status_->setWordWrap(true);
  link_ = new QLineEdit(this);
  link_->setReadOnly(true);
  link_->setObjectName(QStringLiteral("magnetLink"));
  copyButton_ = new QPushButton(tr("Copy link"), this);
  copyButton_->setEnabled(false);
  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Close, this);
  createButton_ = buttons->addButton(tr("Create"), QDialogButtonBox::ActionRole);
  auto* layout = new QVBoxLayout(this);
  layout->addLayout(form);
  layout->addWidget(progress_);
  layout->addWidget(status_);
  auto* linkRow = new QHBoxLayout;
  linkRow->addWidget(link_, 1);
  linkRow->addWidget(copyButton_);
  layout->addLayout(linkRow);
  layout->addWidget(buttons);
  connect(createButton_, &QPushButton::clicked, this, &CreateRunDialog::create);
  connect(buttons, &QDialogButtonBox::rejected, this, [this] {
    cancel();
    reject();
  });
  connect(copyButton_, &QPushButton::clicked, this, [this] { QApplication::clipboard()->setText(magnet_); });
  connect(&process_, &QProcess::readyReadStandardError, this, &CreateRunDialog::readProgress);
  connect(&process_, &QProcess::finished, this, &CreateRunDialog::onFinished);
}

CreateRunDialog::~CreateRunDialog() { cancel(); }

void CreateRunDialog::setForm(const QString& corpus, const QString& out, const QString& preset) {
  corpus_->setText(corpus);
  out_->setText(out);
  preset_->setCurrentText(preset);
}

QString CreateRunDialog::runFolder() const { return QDir::cleanPath(out_->text().trimmed()); }

void CreateRunDialog::create() {
  if (running()) return;
  if (corpus_->text().trimmed().isEmpty() || runFolder().isEmpty() || runFolder() == QLatin1String(".")) {
    status_->setText(tr("Name the corpus folder and the new run's folder."));
    return;
  }
  QStringList args{QStringLiteral("create-run"), QStringLiteral("--out"), runFolder(), QStringLiteral("--preset"),
                   preset_->currentText()};
  if (!name_->text().trimmed().isEmpty()) args << QStringLiteral("--name") << name_->text().trimmed();
  args << corpus_->text().trimmed();
  stderrTail_.clear();
  magnet_.clear();
  link_->clear();
  copyButton_->setEnabled(false);
  progress_->setValue(0);
  status_->setText(tr("Starting…"));
  createButton_->setEnabled(false);
  process_.start(executable_, args);
}

// "create-run: tokenizing  42%": the stage and its share, as the command measured it. The bar
// shows the stages in order: reading 0–10, tokenizer 10–40, tokenizing 40–90, writing 90–100.
void CreateRunDialog::readProgress() {
  static const QRegularExpression line(QStringLiteral("^create-run: (\\w+)\\s+(\\d+)%$"));
  stderrTail_ += QString::fromUtf8(process_.readAllStandardError());
  const QStringList lines = stderrTail_.split(QLatin1Char('\n'));
  for (const auto& text : lines) {
    const auto m = line.match(text.trimmed());
    if (!m.hasMatch()) continue;
    const QString stage = m.captured(1);
    const int percent = m.captured(2).toInt();
    const int base = stage == QLatin1String("reading")      ? 0
                     : stage == QLatin1String("tokenizer")  ? 10
                     : stage == QLatin1String("tokenizing") ? 40
                                                            : 90;
    const int span = stage == QLatin1String("reading")      ? 10
                     : stage == QLatin1String("tokenizer")  ? 30
                     : stage == QLatin1String("tokenizing") ? 50
                                                            : 10;
    progress_->setValue(base + span * percent / 100);
    status_->setText(tr("%1: %2%").arg(stage).arg(percent));
  }
}

void CreateRunDialog::onFinished(int exitCode, QProcess::ExitStatus status) {
  readProgress();
  createButton_->setEnabled(true);
  const QString out = QString::fromUtf8(process_.readAllStandardOutput());
  static const QRegularExpression magnet(QStringLiteral("magnet:\\?xt=urn:btmh:1220[0-9a-f]{64}"));
  const auto m = magnet.match(out);
  if (status != QProcess::NormalExit || exitCode != 0 || !m.hasMatch()) {
    // The command's own reason: its last "expertswarm create-run: …" line.
    QString reason;
    for (const auto& line : stderrTail_.split(QLatin1Char('\n')))
      if (line.startsWith(QLatin1String("expertswarm create-run: "))) reason = line.mid(24);
    status_->setText(tr("Not created: %1").arg(reason.isEmpty() ? tr("exit code %1").arg(exitCode) : reason));
    return;
  }
  magnet_ = m.captured(0);
  progress_->setValue(100);
  link_->setText(magnet_);
  copyButton_->setEnabled(true);
  status_->setText(tr("Created \"%1\". Host it with expertswarm --run \"%1\" and share the link:").arg(runFolder()));
  Q_EMIT created(runFolder(), magnet_);
}

void CreateRunDialog::cancel() {
  if (!running()) return;
  process_.kill();
  process_.waitForFinished(5000);
  QDir(runFolder() + QStringLiteral(".partial")).removeRecursively();  // what the stopped create wrote
  status_->setText(tr("Cancelled: nothing was created"));
}

}  // namespace es::ui
