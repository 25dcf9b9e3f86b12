#include "ui/idle_monitor.h"

#include <QDBusConnection>
#include <QDBusMessage>
#include <QVariant>

#include <climits>

namespace es::ui {

IdleSource::~IdleSource() = default;

namespace {

struct IdleService {
  const char* service;
  const char* path;
  const char* interface;
  const char* method;
};

// Both answer in milliseconds.
constexpr IdleService kServices[] = {
    {"org.freedesktop.ScreenSaver", "/org/freedesktop/ScreenSaver", "org.freedesktop.ScreenSaver",
     "GetSessionIdleTime"},
    {"org.gnome.Mutter.IdleMonitor", "/org/gnome/Mutter/IdleMonitor/Core", "org.gnome.Mutter.IdleMonitor",
     "GetIdletime"},
};
constexpr int kServiceCount = sizeof(kServices) / sizeof(kServices[0]);

// A raw method call rather than QDBusInterface: QDBusInterface introspects the remote object in its
// constructor with the default 25 s timeout, which is exactly the stall this must avoid.
std::optional<int> ask(QDBusConnection& bus, const IdleService& s, int timeoutMs) {
  const QDBusMessage call = QDBusMessage::createMethodCall(QLatin1String(s.service), QLatin1String(s.path),
                                                           QLatin1String(s.interface), QLatin1String(s.method));
  const QDBusMessage reply = bus.call(call, QDBus::Block, timeoutMs);
  if (reply.type() != QDBusMessage::ReplyMessage || reply.arguments().isEmpty()) return std::nullopt;
  bool ok = false;
  const qulonglong ms = reply.arguments().constFirst().toULongLong(&ok);
  if (!ok) return std::nullopt;
  return static_cast<int>(qMin<qulonglong>(ms / 1000, INT_MAX));
}

}  // namespace

std::optional<int> ScreenSaverIdleSource::idleSeconds() {
  QDBusConnection bus = QDBusConnection::sessionBus();
  if (!bus.isConnected()) return std::nullopt;
  for (int i = 0; i < kServiceCount; ++i) {
    const int index = (preferred_ + i) % kServiceCount;
    if (const auto seconds = ask(bus, kServices[index], kTimeoutMs)) {
      preferred_ = index;
      return seconds;
    }
  }
  return std::nullopt;
}

}  // namespace es::ui
