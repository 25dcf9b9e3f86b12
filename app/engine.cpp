#include "app/engine.h"
#include "app/engine_parts.h"

#include "app/network_setup.h"
#include "app/run_setup.h"
#include "core/node/node.h"
#include "core/store/ledger.h"
#include "p2p/identity.h"
#include "p2p/identity_work.h"
#include "p2p/p2p_swarm.h"
#include "p2p/swarm_session.h"

#include <QDir>

#include <algorithm>

namespace es::app {
namespace {

QString capsLine(int up, int down) {
  auto rate = [](int bytes) {
    return bytes ? QStringLiteral("%1 KiB/s").arg(bytes / 1024) : QStringLiteral("unlimited");
  };
  return QStringLiteral("Bandwidth caps: upload %1, download %2").arg(rate(up), rate(down));
}

}  // namespace

Engine::Engine(CommandLine commandLine, QString shareDir, QObject* parent)
    : QObject(parent),
      cl_(std::move(commandLine)),
      shareDir_(std::move(shareDir)),
      parts_(std::make_unique<Parts>()),
      viewTimer_(this),
      manifestDeadline_(this) {  // children, so they move to the engine thread with us
  connect(&viewTimer_, &QTimer::timeout, this, [this] {
    if (parts_->node) Q_EMIT swarmChanged(parts_->node->view());
  });
}

// The node first (it stops its trainer thread), the session last (the swarm refers to it).
Engine::~Engine() {
  viewTimer_.stop();
  parts_->node.reset();
  parts_->ledger.reset();
  parts_->swarm.reset();
  parts_->session.reset();
  setInfoSink({});
}

// Setup failures are printed like every setup line (prepareRun's own print themselves).
int Engine::fail(int code, const std::string& error, bool printed) {
  if (!printed) info("expertswarm: " + error);
  Q_EMIT failed(QString::fromStdString(error));
  return code;
}

int Engine::start() {
  // What run setup prints reaches the GUI's log too; its last line is the reason of a failure.
  setInfoSink([this](const std::string& line) {
    lastSetupLine_ = line;
    Q_EMIT message(QString::fromStdString(line));
  });
  // A run named by its magnet link: its manifest comes from its peers first (engine_magnet.cpp).
  if (!cl_.runMagnetHash.isEmpty() && !parts_->session) return joinByMagnet();
  return startRun();
}

// Identity and libtorrent session (before the run is known when joining by magnet link).
int Engine::openSession(const QString& dataDir) {
  auto& p = *parts_;
  if (!QDir().mkpath(dataDir)) return fail(1, "cannot create \"" + dataDir.toStdString() + "\"");
  auto identity = p2p::Identity::loadOrCreate((dataDir + QStringLiteral("/identity.key")).toStdString());
  if (!identity) return fail(1, identity.error());
  p.identity = std::make_unique<p2p::Identity>(*identity);
  auto settings = swarmSettingsFor(cl_, dataDir);
  if (!settings) return fail(2, settings.error());
  // Network lines (listen and external addresses, reachability, DHT state): start lines before
  // the node runs, log lines after.
  settings->log = [this](const std::string& line) {
    if (parts_->node)
      Q_EMIT message(QString::fromStdString(line));
    else
      info(line);
  };
  auto session = p2p::SwarmSession::create(*settings, *p.identity);
  if (!session) return fail(2, session.error());
  p.session = std::move(*session);
  auto* s = p.session.get();
  connect(s, &p2p::SwarmSession::networkChanged, this,
          [this, s] { Q_EMIT networkStatus(QString::fromStdString(s->networkSummary())); });
  Q_EMIT networkStatus(QString::fromStdString(s->networkSummary()));
  if (cl_.uploadLimit || cl_.downloadLimit) info(capsLine(cl_.uploadLimit, cl_.downloadLimit).toStdString());
  return 0;
}

// The run asks every key for `bits` of identity work (p2p/identity_work.h): kept beside the key,
// found once (the start line says how long it took).
Expected<p2p::IdentityWork> Engine::identityWork(const QString& dataDir, int bits) {
  static_assert(p2p::kMaxIdentityWorkBits == 30, "the run manifest bounds identity_work_bits by 30");
  auto work = p2p::loadOrSolveIdentityWork((dataDir + QStringLiteral("/identity.work")).toStdString(),
                                           parts_->identity->publicKey(), bits);
  if (work && work->solved)
    info("Identity work: " + std::to_string(work->bits) + " bits (the run asks " + std::to_string(bits) +
         ") found for this key in " + QString::number(work->seconds, 'f', 1).toStdString() +
         " s; kept in identity.work");
  return work;
}

void Engine::wireNode() {
  auto* node = parts_->node.get();
  connect(node, &node::Node::message, this, &Engine::message);
  connect(node, &node::Node::noted, this, &Engine::noted);
  connect(node, &node::Node::stepped, this, &Engine::stepped);
  connect(node, &node::Node::roundClosed, this, [this](const node::RoundSummary& s) {
    Q_EMIT roundClosed(s);
    Q_EMIT swarmChanged(parts_->node->view());
  });
  connect(node, &node::Node::roundRepaired, this, &Engine::roundRepaired);
  connect(node, &node::Node::pausedChanged, this, &Engine::pausedChanged);
  connect(node, &node::Node::failed, this, [this](const QString& error) {
    Q_EMIT failed(error);
    parts_->node->stop();
  });
  connect(node, &node::Node::finished, this, [this] {
    viewTimer_.stop();  // the last view stays the one of the last round (not the empty leaving one)
    if (!cl_.exportPath.isEmpty()) {
      if (auto s = parts_->node->exportModel(cl_.exportPath); !s)
        Q_EMIT failed(QStringLiteral("--export: ") + QString::fromStdString(s.error()));
      else
        Q_EMIT message(QStringLiteral("Exported the merged model to \"%1\"").arg(cl_.exportPath));
    }
    Q_EMIT finished();
  });
}

void Engine::stop() {
  if (parts_->node)
    parts_->node->stop();
  else
    Q_EMIT finished();
}

void Engine::setPaused(bool paused) {
  if (parts_->node) parts_->node->setPaused(paused);
}

void Engine::finishRoundThenPause() {
  if (parts_->node) parts_->node->finishRoundThenPause();
}

// Before start() the caps are only kept (start() applies and logs them with the session).
void Engine::setRateLimits(int uploadBytesPerSecond, int downloadBytesPerSecond) {
  cl_.uploadLimit = uploadBytesPerSecond;
  cl_.downloadLimit = downloadBytesPerSecond;
  if (!parts_->session) return;
  parts_->session->setRateLimits(uploadBytesPerSecond, downloadBytesPerSecond);
  Q_EMIT message(capsLine(uploadBytesPerSecond, downloadBytesPerSecond));
}

EngineSummary Engine::summary() const {
  EngineSummary s;
  if (!parts_->node) return s;
  s.rounds = parts_->node->roundsClosed();
  s.trainerBusyFraction = parts_->node->trainerBusyFraction();
  s.meanRoundSeconds = parts_->node->meanRoundSeconds();
  const auto c = parts_->session->counters();
  const double rounds = std::max<double>(1, double(s.rounds));
  s.bytesSentPerRound = double(c.bytesSent) / rounds;
  s.bytesReceivedPerRound = double(c.bytesReceived) / rounds;
  const auto transfers = parts_->session->transfers();
  s.transfers = static_cast<int>(transfers.size());
  for (const auto& t : transfers)
    s.transferFiles << QStringLiteral("%1 (%2)").arg(
        QString::fromStdString(t.path), t.finished ? QStringLiteral("complete") : QStringLiteral("partial"));
  s.refusedFetches = c.refusedFetches;
  return s;
}

Status Engine::exportModel(const QString& path) {
  if (!parts_->node) return makeError("the engine has not started");
  return parts_->node->exportModel(path);
}

}  // namespace es::app
