#include "app/engine_bridge.h"

#include "app/engine.h"

namespace es::app {

EngineBridge::EngineBridge(CommandLine commandLine, QString shareDir, QObject* parent) : ui::EngineControl(parent) {
  thread_.setObjectName(QStringLiteral("engine"));
  engine_ = new Engine(std::move(commandLine), std::move(shareDir));
  engine_->moveToThread(&thread_);
  // Signal to signal: emitted on the engine thread, delivered queued on ours.
  connect(engine_, &Engine::started, this, &EngineControl::started);
  connect(engine_, &Engine::stepped, this, &EngineControl::stepped);
  connect(engine_, &Engine::roundClosed, this, &EngineControl::roundClosed);
  connect(engine_, &Engine::swarmChanged, this, &EngineControl::swarmChanged);
  connect(engine_, &Engine::pausedChanged, this, &EngineControl::pausedChanged);
  connect(engine_, &Engine::message, this, &EngineControl::message);
  connect(engine_, &Engine::networkStatus, this, &EngineControl::networkStatus);
  connect(engine_, &Engine::failed, this, &EngineControl::failed);
  connect(engine_, &Engine::finished, this, &EngineControl::finished);
  thread_.start();
}

EngineBridge::~EngineBridge() {
  if (engine_) {
    // Destroyed where it lives: stops the node (joining the trainer) and closes the session.
    QMetaObject::invokeMethod(
        engine_, [e = engine_] { delete e; }, Qt::BlockingQueuedConnection);
    engine_ = nullptr;
  }
  thread_.quit();
  thread_.wait();
}

void EngineBridge::start() {
  QMetaObject::invokeMethod(
      engine_,
      [this, e = engine_] {
        const int code = e->start();
        if (code)
          QMetaObject::invokeMethod(
              this, [this, code] { Q_EMIT startFailed(code); }, Qt::QueuedConnection);
      },
      Qt::QueuedConnection);
}

void EngineBridge::setPaused(bool paused) {
  QMetaObject::invokeMethod(
      engine_, [e = engine_, paused] { e->setPaused(paused); }, Qt::QueuedConnection);
}

void EngineBridge::finishRoundThenPause() {
  QMetaObject::invokeMethod(
      engine_, [e = engine_] { e->finishRoundThenPause(); }, Qt::QueuedConnection);
}

void EngineBridge::setRateLimits(int uploadBytesPerSecond, int downloadBytesPerSecond) {
  QMetaObject::invokeMethod(
      engine_,
      [e = engine_, uploadBytesPerSecond, downloadBytesPerSecond] {
        e->setRateLimits(uploadBytesPerSecond, downloadBytesPerSecond);
      },
      Qt::QueuedConnection);
}

void EngineBridge::quit() {
  if (quitting_) return;
  quitting_ = true;
  QMetaObject::invokeMethod(
      engine_, [e = engine_] { e->stop(); }, Qt::QueuedConnection);
}

}  // namespace es::app
