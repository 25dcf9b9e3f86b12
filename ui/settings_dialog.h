// The settings window: every ClientSettings field a donor may change, on four tabs (compute,
// network, when to donate, storage & desktop). It edits a copy; the caller saves and applies what
// settings() returns after exec() accepts, and accept() refuses values validate() rejects.
#pragma once

#include "core/settings/client_settings.h"

#include <QDialog>

class QCheckBox;
class QComboBox;
class QLabel;
class QLineEdit;
class QSpinBox;
class QTimeEdit;

namespace es::ui {

class SettingsDialog : public QDialog {
  Q_OBJECT

 public:
  explicit SettingsDialog(const settings::ClientSettings& current, QWidget* parent = nullptr);

  // The values in the widgets; fields the dialog does not show (firstRunDone, runSource) are kept
  // from the settings it was given.
  settings::ClientSettings settings() const;
  void setSettings(const settings::ClientSettings& s);

 public Q_SLOTS:
  void accept() override;

 private:
  QWidget* buildComputeTab();
  QWidget* buildNetworkTab();
  QWidget* buildDonateTab();
  QWidget* buildStorageTab();
  void updateEnabled();
  void browseDataDir();

  settings::ClientSettings base_;
  QComboBox* device_ = nullptr;
  QSpinBox* hostMemoryCap_ = nullptr;
  QSpinBox* gpuMemoryCap_ = nullptr;
  QSpinBox* diskQuota_ = nullptr;
  QSpinBox* dataBudget_ = nullptr;
  QSpinBox* claimSize_ = nullptr;
  QSpinBox* uploadLimit_ = nullptr;
  QSpinBox* downloadLimit_ = nullptr;
  QCheckBox* publicNetwork_ = nullptr;
  QCheckBox* portMapping_ = nullptr;
  QLineEdit* bootstrap_ = nullptr;  // HOST:PORT, comma-separated
  QSpinBox* listenPort_ = nullptr;
  QCheckBox* pauseWhenUserActive_ = nullptr;
  QSpinBox* idleMinutes_ = nullptr;
  QCheckBox* pauseOnBattery_ = nullptr;
  QSpinBox* pauseAboveGpuC_ = nullptr;
  QCheckBox* scheduleEnabled_ = nullptr;
  QTimeEdit* scheduleStart_ = nullptr;
  QTimeEdit* scheduleEnd_ = nullptr;
  QLineEdit* dataDir_ = nullptr;
  QCheckBox* startAtLogin_ = nullptr;
  QLabel* error_ = nullptr;
};

}  // namespace es::ui
