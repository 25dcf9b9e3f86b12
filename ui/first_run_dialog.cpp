#include "ui/first_run_dialog.h"

#include "core/settings/client_settings.h"

#include <QCheckBox>
#include <QDialogButtonBox>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QRadioButton>
#include <QVBoxLayout>

namespace es::ui {

QString magnetError(const QString& text) {
  const QString link = text.trimmed();
  if (link.isEmpty()) return QStringLiteral("Paste the run's magnet link.");
  if (!link.startsWith(QLatin1String("magnet:?"))) return QStringLiteral("A magnet link starts with \"magnet:?\".");
  // ClientSettings::validate() is the one definition of a joinable run source; the default
  // settings are valid, so the run source is the only thing it can object to here.
  settings::ClientSettings probe;
  probe.runSource = link;
  if (!probe.validate().isEmpty())
    return QStringLiteral(
        "ExpertSwarm runs are named by their v2 info-hash: the link needs xt=urn:btmh:1220 followed by 64 hex "
        "digits (peers print it when they start: \"Others join this run with --run "
        "magnet:?xt=urn:btmh:1220\u2026\"); v1 links (btih) cannot name a run.");
  return {};
}

FirstRunDialog::FirstRunDialog(QWidget* parent) : QDialog(parent) {
  setWindowTitle(QStringLiteral("Welcome to ExpertSwarm"));
  auto* layout = new QVBoxLayout(this);

  auto* intro = new QLabel(
      QStringLiteral("ExpertSwarm trains a language model together with other volunteers: this computer trains a "
                     "few experts and shares them with its peers.\n\nWhich run do you want to join? Runs are "
                     "prepared from the corpus bundled with ExpertSwarm. Another run's magnet link comes from one of "
                     "its peers: a peer prints it when it starts, and its window shows it in the log."),
      this);
  intro->setWordWrap(true);
  layout->addWidget(intro);

  defaultRun_ = new QRadioButton(QStringLiteral("Join the default run (recommended)"), this);
  defaultRun_->setObjectName(QStringLiteral("defaultRun"));
  magnetRun_ = new QRadioButton(QStringLiteral("Join a run from a magnet link"), this);
  magnetRun_->setObjectName(QStringLiteral("magnetRun"));
  magnet_ = new QLineEdit(this);
  magnet_->setObjectName(QStringLiteral("magnetLink"));
  magnet_->setPlaceholderText(QStringLiteral("magnet:?xt=urn:btmh:1220\u2026"));
  magnet_->setClearButtonEnabled(true);
  error_ = new QLabel(this);
  error_->setObjectName(QStringLiteral("magnetError"));
  error_->setWordWrap(true);
  error_->setStyleSheet(QStringLiteral("color: #c62828;"));
  layout->addWidget(defaultRun_);
  layout->addWidget(magnetRun_);
  layout->addWidget(magnet_);
  layout->addWidget(error_);

  publicNetwork_ = new QCheckBox(QStringLiteral("Join the public ExpertSwarm network"), this);
  publicNetwork_->setObjectName(QStringLiteral("publicNetwork"));
  networkNote_ = new QLabel(this);
  networkNote_->setObjectName(QStringLiteral("networkNote"));
  networkNote_->setWordWrap(true);
  layout->addWidget(publicNetwork_);
  layout->addWidget(networkNote_);
  settings::ClientSettings defaults;
  setNetwork(true, defaults.bootstrapNodes, defaults.listenPort);

  buttons_ = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel, this);
  buttons_->setObjectName(QStringLiteral("buttons"));
  layout->addWidget(buttons_);
  connect(buttons_, &QDialogButtonBox::accepted, this, &QDialog::accept);
  connect(buttons_, &QDialogButtonBox::rejected, this, &QDialog::reject);

  defaultRun_->setChecked(true);
  connect(defaultRun_, &QRadioButton::toggled, this, &FirstRunDialog::updateState);
  connect(magnet_, &QLineEdit::textChanged, this, &FirstRunDialog::updateState);
  // Typing or pasting a link means the user wants that run.
  connect(magnet_, &QLineEdit::textEdited, this, [this] { magnetRun_->setChecked(true); });
  updateState();
}

QString FirstRunDialog::runSource() const {
  return magnetRun_->isChecked() ? magnet_->text().trimmed() : QStringLiteral("default");
}

void FirstRunDialog::setRunSource(const QString& source) {
  const bool isDefault = source.trimmed().isEmpty() || source.trimmed() == QLatin1String("default");
  magnet_->setText(isDefault ? QString() : source.trimmed());
  (isDefault ? defaultRun_ : magnetRun_)->setChecked(true);
  updateState();
}

bool FirstRunDialog::joinPublicNetwork() const { return publicNetwork_->isChecked(); }

void FirstRunDialog::setNetwork(bool join, const QStringList& routers, int listenPort) {
  publicNetwork_->setChecked(join);
  const QString port = listenPort > 0 ? QStringLiteral("port %1").arg(listenPort) : QStringLiteral("its listen port");
  networkNote_->setText(
      QStringLiteral("Joining contacts the public BitTorrent DHT routers (%1) to find other peers, asks your router to "
                     "forward the port (UPnP and NAT-PMP), and lets peers on the internet connect to this computer on "
                     "%2 (TCP and UDP). Without it, ExpertSwarm only meets peers you name. Change it later in Settings "
                     "→ Network.")
          .arg(routers.isEmpty() ? QStringLiteral("none listed") : routers.join(QStringLiteral(", ")), port));
}

void FirstRunDialog::updateState() {
  // The field stays enabled even for the default run: typing into it selects the magnet option.
  const QString error = magnetRun_->isChecked() ? magnetError(magnet_->text()) : QString();
  error_->setText(error);
  error_->setVisible(!error.isEmpty());
  buttons_->button(QDialogButtonBox::Ok)->setEnabled(error.isEmpty());
}

}  // namespace es::ui
