#include "ui/settings_dialog.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDialogButtonBox>
#include <QFileDialog>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSpinBox>
#include <QTabWidget>
#include <QTimeEdit>
#include <QVBoxLayout>

namespace es::ui {

namespace {

template <typename W>
W* named(W* widget, const char* name) {
  widget->setObjectName(QLatin1String(name));
  return widget;
}

QSpinBox* spin(QWidget* parent, const char* name, int min, int max, const QString& suffix, const QString& zero) {
  auto* s = named(new QSpinBox(parent), name);
  s->setRange(min, max);
  s->setSuffix(suffix);
  s->setSpecialValueText(zero);  // shown for the minimum (0)
  s->setAccelerated(true);
  return s;
}

}  // namespace

SettingsDialog::SettingsDialog(const settings::ClientSettings& current, QWidget* parent)
    : QDialog(parent), base_(current) {
  setWindowTitle(QStringLiteral("ExpertSwarm settings"));
  auto* layout = new QVBoxLayout(this);
  auto* tabs = named(new QTabWidget(this), "tabs");
  tabs->addTab(buildComputeTab(), QStringLiteral("Compute"));
  tabs->addTab(buildNetworkTab(), QStringLiteral("Network"));
  tabs->addTab(buildDonateTab(), QStringLiteral("When to donate"));
  tabs->addTab(buildStorageTab(), QStringLiteral("Storage && desktop"));
  layout->addWidget(tabs);

  auto* note =
      new QLabel(QStringLiteral("Device, memory caps, claim size, data dir and the network settings other than the "
                                "limits take effect at the next start."),
                 this);
  note->setWordWrap(true);
  layout->addWidget(note);
  error_ = named(new QLabel(this), "error");
  error_->setWordWrap(true);
  error_->setStyleSheet(QStringLiteral("color: #c62828;"));
  error_->hide();
  layout->addWidget(error_);

  auto* buttons = named(new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel, this), "buttons");
  connect(buttons, &QDialogButtonBox::accepted, this, &SettingsDialog::accept);
  connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
  layout->addWidget(buttons);

  setSettings(current);
}

QWidget* SettingsDialog::buildComputeTab() {
  auto* page = new QWidget(this);
  auto* form = new QFormLayout(page);
  device_ = named(new QComboBox(page), "device");
  device_->setEditable(true);  // cuda:N for machines with more than four GPUs
  device_->addItems({QStringLiteral("auto"), QStringLiteral("cpu"), QStringLiteral("cuda"), QStringLiteral("cuda:0"),
                     QStringLiteral("cuda:1"), QStringLiteral("cuda:2"), QStringLiteral("cuda:3")});
  device_->setToolTip(QStringLiteral("auto picks the GPU when there is one"));
  form->addRow(QStringLiteral("Device:"), device_);
  hostMemoryCap_ = spin(page, "hostMemoryCap", 0, 1024 * 1024, QStringLiteral(" MiB"), QStringLiteral("no cap"));
  hostMemoryCap_->setSingleStep(256);
  hostMemoryCap_->setToolTip(
      QStringLiteral("Most of this computer's memory training on the CPU may size its claim by"));
  form->addRow(QStringLiteral("Host memory cap:"), hostMemoryCap_);
  gpuMemoryCap_ = spin(page, "gpuMemoryCap", 0, 1024 * 1024, QStringLiteral(" MiB"), QStringLiteral("no cap"));
  gpuMemoryCap_->setSingleStep(256);
  gpuMemoryCap_->setToolTip(QStringLiteral("Most of the GPU's memory training on the GPU may size its claim by"));
  form->addRow(QStringLiteral("GPU memory cap:"), gpuMemoryCap_);
  diskQuota_ = spin(page, "diskQuota", 0, 64 * 1024 * 1024, QStringLiteral(" MiB"), QStringLiteral("auto"));
  diskQuota_->setSingleStep(1024);
  diskQuota_->setToolTip(
      QStringLiteral("Most the run folder may hold; at the quota no new contribution is fetched "
                     "(training goes on). auto: from the run's model size"));
  form->addRow(QStringLiteral("Disk quota:"), diskQuota_);
  dataBudget_ = spin(page, "dataBudget", 0, 64 * 1024 * 1024, QStringLiteral(" MiB"), QStringLiteral("all"));
  dataBudget_->setSingleStep(1024);
  dataBudget_->setToolTip(
      QStringLiteral("Most disk the training shards of a run joined by its magnet link may take; this computer "
                     "fetches and trains on the shards assigned to it within it. all: every shard"));
  form->addRow(QStringLiteral("Training data budget:"), dataBudget_);
  claimSize_ = spin(page, "claimSize", 0, 64, QStringLiteral(" experts"), QStringLiteral("auto"));
  claimSize_->setToolTip(
      QStringLiteral("How many experts this computer trains; auto fits the run's default in memory"));
  form->addRow(QStringLiteral("Claim size:"), claimSize_);
  return page;
}

QWidget* SettingsDialog::buildNetworkTab() {
  auto* page = new QWidget(this);
  auto* form = new QFormLayout(page);
  const QString unit = QStringLiteral(" KiB/s");
  uploadLimit_ = spin(page, "uploadLimit", 0, 10 * 1024 * 1024, unit, QStringLiteral("unlimited"));
  uploadLimit_->setSingleStep(64);
  downloadLimit_ = spin(page, "downloadLimit", 0, 10 * 1024 * 1024, unit, QStringLiteral("unlimited"));
  downloadLimit_->setSingleStep(64);
  form->addRow(QStringLiteral("Upload limit:"), uploadLimit_);
  form->addRow(QStringLiteral("Download limit:"), downloadLimit_);
  publicNetwork_ = named(new QCheckBox(QStringLiteral("Join the public ExpertSwarm network"), page), "publicNetwork");
  publicNetwork_->setToolTip(
      QStringLiteral("Find peers through the DHT routers below, map the port on your router "
                     "(UPnP, NAT-PMP) and let peers on the internet connect to the listen port"));
  form->addRow(publicNetwork_);
  portMapping_ =
      named(new QCheckBox(QStringLiteral("Map the listen port on my router (UPnP, NAT-PMP)"), page), "portMapping");
  portMapping_->setToolTip(QStringLiteral("Always on when joining the public network"));
  form->addRow(portMapping_);
  bootstrap_ = named(new QLineEdit(page), "bootstrap");
  bootstrap_->setToolTip(
      QStringLiteral("DHT nodes to start from (HOST:PORT, comma-separated), contacted only when "
                     "joining the public network"));
  form->addRow(QStringLiteral("DHT bootstrap nodes:"), bootstrap_);
  listenPort_ = spin(page, "listenPort", 0, 65535, QString(), QStringLiteral("choose at the next start"));
  listenPort_->setToolTip(
      QStringLiteral("TCP and UDP, on every interface: forward both on your router if it does "
                     "not map ports itself"));
  form->addRow(QStringLiteral("Listen port:"), listenPort_);
  connect(publicNetwork_, &QCheckBox::toggled, this, &SettingsDialog::updateEnabled);
  return page;
}

QWidget* SettingsDialog::buildDonateTab() {
  auto* page = new QWidget(this);
  auto* form = new QFormLayout(page);
  pauseWhenUserActive_ =
      named(new QCheckBox(QStringLiteral("Pause while I use the computer"), page), "pauseWhenUserActive");
  form->addRow(pauseWhenUserActive_);
  idleMinutes_ = spin(page, "idleMinutes", 1, 24 * 60, QStringLiteral(" min"), QString());
  form->addRow(QStringLiteral("Resume after I have been away for:"), idleMinutes_);
  pauseOnBattery_ =
      named(new QCheckBox(QStringLiteral("Pause while the computer runs on battery"), page), "pauseOnBattery");
  form->addRow(pauseOnBattery_);
  pauseAboveGpuC_ = spin(page, "pauseAboveGpuC", 0, 110, QStringLiteral(" \u00b0C"), QStringLiteral("off"));
  pauseAboveGpuC_->setToolTip(QStringLiteral("Training resumes once the GPU has cooled 5 \u00b0C below this"));
  form->addRow(QStringLiteral("Pause when the GPU reaches:"), pauseAboveGpuC_);

  scheduleEnabled_ = named(new QCheckBox(QStringLiteral("Only train during these hours"), page), "scheduleEnabled");
  form->addRow(scheduleEnabled_);
  scheduleStart_ = named(new QTimeEdit(page), "scheduleStart");
  scheduleEnd_ = named(new QTimeEdit(page), "scheduleEnd");
  auto* hours = new QHBoxLayout;
  for (QTimeEdit* edit : {scheduleStart_, scheduleEnd_}) edit->setDisplayFormat(QStringLiteral("HH:mm"));
  hours->addWidget(scheduleStart_);
  hours->addWidget(new QLabel(QStringLiteral("to"), page));
  hours->addWidget(scheduleEnd_);
  hours->addStretch();
  form->addRow(QStringLiteral("From:"), hours);
  auto* wrapNote = new QLabel(QStringLiteral("A window may span midnight, e.g. 22:00 to 07:00."), page);
  form->addRow(wrapNote);

  connect(pauseWhenUserActive_, &QCheckBox::toggled, this, &SettingsDialog::updateEnabled);
  connect(scheduleEnabled_, &QCheckBox::toggled, this, &SettingsDialog::updateEnabled);
  return page;
}

QWidget* SettingsDialog::buildStorageTab() {
  auto* page = new QWidget(this);
  auto* form = new QFormLayout(page);
  dataDir_ = named(new QLineEdit(page), "dataDir");
  dataDir_->setPlaceholderText(QStringLiteral("the default application data folder"));
  auto* browse = named(new QPushButton(QStringLiteral("Browse\u2026"), page), "browseDataDir");
  connect(browse, &QPushButton::clicked, this, &SettingsDialog::browseDataDir);
  auto* row = new QHBoxLayout;
  row->addWidget(dataDir_, 1);
  row->addWidget(browse);
  form->addRow(QStringLiteral("Data folder:"), row);
  startAtLogin_ = named(new QCheckBox(QStringLiteral("Start ExpertSwarm when I log in"), page), "startAtLogin");
  form->addRow(startAtLogin_);
  return page;
}

settings::ClientSettings SettingsDialog::settings() const {
  settings::ClientSettings s = base_;
  s.device = device_->currentText().trimmed();
  s.hostMemoryCapMiB = hostMemoryCap_->value();
  s.gpuMemoryCapMiB = gpuMemoryCap_->value();
  s.diskQuotaMiB = diskQuota_->value();
  s.dataBudgetMiB = dataBudget_->value();
  s.claimSize = claimSize_->value();
  s.uploadLimitKiB = uploadLimit_->value();
  s.downloadLimitKiB = downloadLimit_->value();
  s.publicNetwork = publicNetwork_->isChecked();
  s.portMapping = portMapping_->isChecked();
  s.bootstrapNodes.clear();
  for (const QString& node : bootstrap_->text().split(QLatin1Char(','), Qt::SkipEmptyParts))
    if (!node.trimmed().isEmpty()) s.bootstrapNodes << node.trimmed();
  s.listenPort = listenPort_->value();
  s.pauseWhenUserActive = pauseWhenUserActive_->isChecked();
  s.idleMinutes = idleMinutes_->value();
  s.pauseOnBattery = pauseOnBattery_->isChecked();
  s.pauseAboveGpuC = pauseAboveGpuC_->value();
  s.scheduleEnabled = scheduleEnabled_->isChecked();
  s.scheduleStart = scheduleStart_->time();
  s.scheduleEnd = scheduleEnd_->time();
  s.dataDir = dataDir_->text().trimmed();
  s.startAtLogin = startAtLogin_->isChecked();
  return s;
}

void SettingsDialog::setSettings(const settings::ClientSettings& s) {
  base_ = s;
  device_->setCurrentText(s.device);
  hostMemoryCap_->setValue(s.hostMemoryCapMiB);
  gpuMemoryCap_->setValue(s.gpuMemoryCapMiB);
  diskQuota_->setValue(s.diskQuotaMiB);
  dataBudget_->setValue(s.dataBudgetMiB);
  claimSize_->setValue(s.claimSize);
  uploadLimit_->setValue(s.uploadLimitKiB);
  downloadLimit_->setValue(s.downloadLimitKiB);
  publicNetwork_->setChecked(s.publicNetwork);
  portMapping_->setChecked(s.portMapping);
  bootstrap_->setText(s.bootstrapNodes.join(QStringLiteral(", ")));
  listenPort_->setValue(s.listenPort);
  pauseWhenUserActive_->setChecked(s.pauseWhenUserActive);
  idleMinutes_->setValue(s.idleMinutes);
  pauseOnBattery_->setChecked(s.pauseOnBattery);
  pauseAboveGpuC_->setValue(s.pauseAboveGpuC);
  scheduleEnabled_->setChecked(s.scheduleEnabled);
  scheduleStart_->setTime(s.scheduleStart);
  scheduleEnd_->setTime(s.scheduleEnd);
  dataDir_->setText(s.dataDir);
  startAtLogin_->setChecked(s.startAtLogin);
  error_->clear();
  error_->hide();
  updateEnabled();
}

void SettingsDialog::accept() {
  const QString problem = settings().validate();
  if (!problem.isEmpty()) {
    error_->setText(problem);
    error_->show();
    return;  // stay open so the user can fix it
  }
  error_->hide();
  QDialog::accept();
}

void SettingsDialog::updateEnabled() {
  idleMinutes_->setEnabled(pauseWhenUserActive_->isChecked());
  scheduleStart_->setEnabled(scheduleEnabled_->isChecked());
  scheduleEnd_->setEnabled(scheduleEnabled_->isChecked());
  bootstrap_->setEnabled(publicNetwork_->isChecked());
}

void SettingsDialog::browseDataDir() {
  const QString dir =
      QFileDialog::getExistingDirectory(this, QStringLiteral("Choose the data folder"), dataDir_->text());
  if (!dir.isEmpty()) dataDir_->setText(dir);
}

}  // namespace es::ui
