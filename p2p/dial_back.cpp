#include "p2p/dial_back.h"

#include <QTcpSocket>
#include <QTimer>

#include <algorithm>

namespace es::p2p {
namespace {

constexpr std::size_t kMaxTargets = 1024;
constexpr int kMaxInFlight = 16, kMaxRetries = 6;
constexpr auto kAgain = std::chrono::minutes(10);

}  // namespace

DialBackProber::DialBackProber(QObject* parent, std::chrono::milliseconds retryBase, int timeoutMs)
    : parent_(parent), retryBase_(retryBase), timeoutMs_(timeoutMs) {}

void DialBackProber::request(const QHostAddress& ip, quint16 port) {
  if (ip.isNull() || port == 0) return;
  const Key key{ip.toString(), port};
  const auto now = Clock::now();
  auto& targets = state_->targets;
  if (auto it = targets.find(key); it != targets.end()) {
    if (it->second.inFlight || now < it->second.next) return;
    it->second.failures = 0;  // a new request starts a new series of tries
  } else {
    if (targets.size() >= kMaxTargets)  // forget what is no longer pending
      for (auto t = targets.begin(); t != targets.end();)
        t = !t->second.inFlight && now >= t->second.next ? targets.erase(t) : std::next(t);
    if (targets.size() >= kMaxTargets) return;
    targets[key];
  }
  probe(key);
}

void DialBackProber::retryDue() {
  const auto now = Clock::now();
  for (auto& [key, t] : state_->targets)
    if (!t.reached && !t.inFlight && t.failures > 0 && t.failures <= kMaxRetries && now >= t.next) probe(key);
}

void DialBackProber::probe(const Key& key) {
  if (state_->inFlight >= kMaxInFlight) return;  // a later retryDue or request tries again
  auto& target = state_->targets[key];
  target.inFlight = true;
  ++state_->inFlight;
  auto* socket = new QTcpSocket(parent_);
  // Captures the shared state, not `this`: a probe still open when the session goes dies with it.
  auto finish = [socket, state = state_, key, base = retryBase_](bool connected) {
    if (socket->property("esDone").toBool()) return;
    socket->setProperty("esDone", true);
    --state->inFlight;
    auto& t = state->targets[key];
    t.inFlight = false;
    t.reached = connected;
    if (connected) {
      t.next = Clock::now() + kAgain;
    } else {
      ++t.failures;
      t.next = Clock::now() + (t.failures > kMaxRetries ? std::chrono::duration_cast<std::chrono::milliseconds>(kAgain)
                                                        : base * (1 << (t.failures - 1)));
    }
    socket->abort();
    socket->deleteLater();
  };
  QObject::connect(socket, &QTcpSocket::connected, socket, [finish] { finish(true); });
  QObject::connect(socket, &QAbstractSocket::errorOccurred, socket, [finish] { finish(false); });
  QTimer::singleShot(timeoutMs_, socket, [finish] { finish(false); });
  socket->connectToHost(QHostAddress(key.first), key.second);
}

bool DialBackProber::reached(const QHostAddress& ip, quint16 port) const {
  const auto it = state_->targets.find({ip.toString(), port});
  return it != state_->targets.end() && it->second.reached;
}

int DialBackProber::failures(const QHostAddress& ip, quint16 port) const {
  const auto it = state_->targets.find({ip.toString(), port});
  return it == state_->targets.end() ? 0 : it->second.failures;
}

}  // namespace es::p2p
