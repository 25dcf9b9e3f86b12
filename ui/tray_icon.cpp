#include "ui/tray_icon.h"

#include "ui/donation_controller.h"
#include "ui/engine_control.h"

#include <QAction>
#include <QIcon>
#include <QMenu>
#include <QPainter>
#include <QPixmap>
#include <QSystemTrayIcon>
#include <QWidget>

namespace es::ui {

TrayIcon::TrayIcon(DonationController& controller, EngineControl& engine, QWidget* window, QObject* parent)
    : QObject(parent), controller_(controller), engine_(engine), window_(window) {
  // QMenu is a widget: it cannot have a QObject parent, so this object deletes it.
  menu_ = new QMenu;
  show_ = menu_->addAction(QStringLiteral("Show window"));
  menu_->addSeparator();
  pause_ = menu_->addAction(QStringLiteral("Pause"));
  snooze_ = menu_->addAction(QStringLiteral("Snooze 1 hour"));
  finishRound_ = menu_->addAction(QStringLiteral("Finish this round, then pause"));
  menu_->addSeparator();
  quit_ = menu_->addAction(QStringLiteral("Quit"));

  tray_ = new QSystemTrayIcon(this);
  tray_->setContextMenu(menu_);

  connect(show_, &QAction::triggered, this, &TrayIcon::showWindow);
  // The action's meaning follows the state at the moment it is triggered, as its text does.
  connect(pause_, &QAction::triggered, this, [this] { controller_.setManualPause(!controller_.paused()); });
  connect(snooze_, &QAction::triggered, this, [this] { controller_.snooze(kSnoozeSeconds); });
  connect(finishRound_, &QAction::triggered, this, [this] {
    controller_.finishRoundThenPause();
    refresh();
  });
  connect(quit_, &QAction::triggered, this, [this] { engine_.quit(); });
  connect(tray_, &QSystemTrayIcon::activated, this, [this](QSystemTrayIcon::ActivationReason reason) {
    if (reason == QSystemTrayIcon::Trigger || reason == QSystemTrayIcon::DoubleClick) showWindow();
  });
  connect(&controller_, &DonationController::decisionChanged, this, &TrayIcon::refresh);
  refresh();
}

TrayIcon::~TrayIcon() {
  tray_->setContextMenu(nullptr);
  delete menu_;
}

bool TrayIcon::show() {
  if (!QSystemTrayIcon::isSystemTrayAvailable()) return false;
  tray_->show();
  return true;
}

QString TrayIcon::toolTip() const { return tray_->toolTip(); }

QIcon TrayIcon::stateIcon(bool paused) {
  QIcon icon;
  for (const int size : {16, 22, 32, 64}) {
    QPixmap pixmap(size, size);
    pixmap.fill(Qt::transparent);
    QPainter painter(&pixmap);
    painter.setRenderHint(QPainter::Antialiasing);
    painter.setPen(QPen(QColor(0x26, 0x32, 0x38), qMax(1.0, size / 16.0)));
    painter.setBrush(paused ? QColor(0x9e, 0x9e, 0x9e) : QColor(0x43, 0xa0, 0x47));  // grey / green
    const qreal margin = size / 8.0;
    painter.drawEllipse(QRectF(margin, margin, size - 2 * margin, size - 2 * margin));
    painter.end();
    icon.addPixmap(pixmap);
  }
  return icon;
}

void TrayIcon::refresh() {
  const bool paused = controller_.paused();
  pause_->setText(paused ? QStringLiteral("Resume") : QStringLiteral("Pause"));
  snooze_->setEnabled(!paused);
  finishRound_->setEnabled(!paused && !controller_.finishingRound());
  QString state = paused ? controller_.reason() : QStringLiteral("Training");
  if (!paused && controller_.finishingRound()) state += QStringLiteral(" (pausing after this round)");
  tray_->setToolTip(QStringLiteral("ExpertSwarm: %1").arg(state));
  tray_->setIcon(stateIcon(paused));
}

void TrayIcon::showWindow() {
  if (!window_) return;
  window_->showNormal();
  window_->raise();
  window_->activateWindow();
}

}  // namespace es::ui
