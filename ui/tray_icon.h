// The system tray icon: the donor's quick controls while the window is hidden (show the window,
// pause/resume, snooze an hour, finish the round then pause, quit) and, in its tooltip and colour,
// whether this computer is training or why not. Commands go through the DonationController, so
// the tray, the window and the schedule never disagree; only Quit talks to the engine directly.
#pragma once

#include <QObject>
#include <QString>

class QAction;
class QIcon;
class QMenu;
class QSystemTrayIcon;
class QWidget;

namespace es::ui {

class DonationController;
class EngineControl;

class TrayIcon : public QObject {
  Q_OBJECT

 public:
  static constexpr int kSnoozeSeconds = 60 * 60;

  // `window` is what "Show window" and a click on the icon bring up; none is owned.
  TrayIcon(DonationController& controller, EngineControl& engine, QWidget* window, QObject* parent = nullptr);
  ~TrayIcon() override;

  // Shows the icon only when the desktop has a tray; returns whether it did.
  bool show();
  QString toolTip() const;

  QAction* showAction() const { return show_; }
  QAction* pauseAction() const { return pause_; }
  QAction* snoozeAction() const { return snooze_; }
  QAction* finishRoundAction() const { return finishRound_; }
  QAction* quitAction() const { return quit_; }
  QSystemTrayIcon* systemTrayIcon() const { return tray_; }

  // A disc in the state's colour, drawn here so the tray works without icon resources.
  static QIcon stateIcon(bool paused);

 private:
  void refresh();
  void showWindow();

  DonationController& controller_;
  EngineControl& engine_;
  QWidget* window_;
  QMenu* menu_;
  QSystemTrayIcon* tray_;
  QAction* show_;
  QAction* pause_;
  QAction* snooze_;
  QAction* finishRound_;
  QAction* quit_;
};

}  // namespace es::ui
