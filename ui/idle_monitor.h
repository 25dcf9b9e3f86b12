// How long the user has been away from the keyboard, for "pause when I use the computer". The
// desktop knows (the screen saver and GNOME's Mutter both answer over the session bus); the
// DonationController only sees the IdleSource interface, so tests feed it any idle time.
#pragma once

#include <optional>

namespace es::ui {

class IdleSource {
 public:
  virtual ~IdleSource();
  // Seconds since the last user input; nullopt when nobody can tell.
  virtual std::optional<int> idleSeconds() = 0;
};

// Asks org.freedesktop.ScreenSaver (KDE, Xfce, most others), then org.gnome.Mutter.IdleMonitor
// (GNOME, where the former is not implemented). Each call gives up after kTimeoutMs: a stuck
// desktop service must never freeze the GUI. Without a session bus it answers nullopt at once.
class ScreenSaverIdleSource : public IdleSource {
 public:
  static constexpr int kTimeoutMs = 500;
  std::optional<int> idleSeconds() override;

 private:
  int preferred_ = 0;  // the service that answered last, asked first next time
};

}  // namespace es::ui
