// Test helper: starts swarm_probe processes (tests/support/swarm_probe.cpp) and waits on their
// JSON-line events. Waits are conditions with deadlines, never fixed sleeps.
#pragma once

#include "support/wait_until.h"

#include <QDir>
#include <QElapsedTimer>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QtTest>

#include <functional>
#include <memory>
#include <vector>

namespace es::test {

class Probe {
 public:
  // `wrapper`: a command the probe runs under, e.g. {"ip", "netns", "exec", NS} (tests/netlab).
  Probe(const QString& name, const QStringList& args, const QStringList& wrapper = {}) : name_(name) {
    process_.setProcessChannelMode(QProcess::SeparateChannels);
    QObject::connect(&process_, &QProcess::readyReadStandardOutput, [this] { read(); });
    QObject::connect(&process_, &QProcess::readyReadStandardError, [this] {
      const auto err = process_.readAllStandardError();
      if (!err.trimmed().isEmpty()) qWarning().noquote() << name_ << "stderr:" << err.trimmed();
    });
    if (wrapper.isEmpty())
      process_.start(QStringLiteral(ES_SWARM_PROBE), args);
    else
      process_.start(wrapper.front(), wrapper.mid(1) + QStringList{QStringLiteral(ES_SWARM_PROBE)} + args);
  }
  ~Probe() {
    if (process_.state() == QProcess::NotRunning) return;
    send("quit");
    if (!process_.waitForFinished(5000)) process_.kill(), process_.waitForFinished();
  }

  void send(const QString& line) { process_.write((line + "\n").toUtf8()); }
  const std::vector<QJsonObject>& events() const { return events_; }
  const QString& name() const { return name_; }
  bool running() const { return process_.state() == QProcess::Running; }
  QProcess& process() { return process_; }

  // The first event (from index `from`) satisfying `match`, or an empty object.
  QJsonObject find(const std::function<bool(const QJsonObject&)>& match, std::size_t from = 0) const {
    for (std::size_t i = from; i < events_.size(); ++i)
      if (match(events_[i])) return events_[i];
    return {};
  }
  int count(const std::function<bool(const QJsonObject&)>& match) const {
    int n = 0;
    for (const auto& e : events_) n += match(e) ? 1 : 0;
    return n;
  }

 private:
  void read() {
    buffer_ += process_.readAllStandardOutput();
    for (int end = buffer_.indexOf('\n'); end >= 0; end = buffer_.indexOf('\n')) {
      const auto line = buffer_.left(end);
      buffer_.remove(0, end + 1);
      const auto doc = QJsonDocument::fromJson(line);
      if (doc.isObject()) events_.push_back(doc.object());
    }
  }
  QString name_;
  QProcess process_;
  QByteArray buffer_;
  std::vector<QJsonObject> events_;
};

inline bool isEvent(const QJsonObject& e, const char* name) {
  return e.value("event").toString() == QLatin1String(name);
}

// The last event of a kind after sending `command` (e.g. "status" → "status").
inline QJsonObject ask(Probe& probe, const QString& command, const char* reply, int timeoutMs = 10000) {
  const auto before = probe.events().size();
  probe.send(command);
  QJsonObject found;
  waitUntil(
      [&] {
        found = probe.find([&](const QJsonObject& e) { return isEvent(e, reply); }, before);
        return !found.isEmpty();
      },
      timeoutMs);
  return found;
}

}  // namespace es::test
