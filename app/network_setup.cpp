#include "app/network_setup.h"

#include <QSettings>

#include <algorithm>

namespace es::app {

void applyNetworkSettings(CommandLine& cl, settings::ClientSettings& saved, QSettings* store) {
  if (!isLoopbackEndpoint(cl.listen)) {
    cl.publicNetwork = cl.publicNetwork || saved.publicNetwork;
    cl.portMapping = cl.portMapping || saved.portMapping;
  }
  if (cl.publicNetwork && !cl.bootstrapGiven) cl.bootstrap = saved.bootstrapNodes;
  if (cl.listen.isEmpty()) {
    // Kept across starts: a port forwarded on the router, and the DHT nodes that know us, stay valid.
    if (saved.listenPort == 0) {
      saved.listenPort = settings::ClientSettings::randomListenPort();
      if (store) settings::ClientSettings::saveListenPort(*store, saved.listenPort);
    }
    const QString port = QString::number(saved.listenPort);
    cl.listen = QStringLiteral("0.0.0.0:%1,[::]:%1").arg(port);
  }
}

Expected<p2p::SwarmSettings> swarmSettingsFor(const CommandLine& cl, const QString& dataDir) {
  p2p::SwarmSettings s;
  s.listen = cl.listen.toStdString();
  for (const auto& node : cl.bootstrap) s.bootstrap.push_back(node.toStdString());
  s.sameHostSwarm = isLoopbackEndpoint(cl.listen);  // peers on one machine (tests, the two-peer demo)
  if (s.sameHostSwarm) s.useSameHostTiming();
  s.enableUtp = !s.sameHostSwarm;
  const bool reachOut = !s.sameHostSwarm && (cl.publicNetwork || cl.portMapping);
  s.enableUpnp = reachOut;
  s.enableNatPmp = reachOut;
  if (cl.publicNetwork && !s.sameHostSwarm) s.dhtStatePath = (dataDir + QStringLiteral("/dht.state")).toStdString();
  s.uploadRateLimit = std::max(0, cl.uploadLimit);
  s.downloadRateLimit = std::max(0, cl.downloadLimit);
  if (qEnvironmentVariableIsSet("ES_REACHABILITY_GRACE_S")) {  // tests: a shorter wait for "outgoing-only"
    bool ok = false;
    const int grace = qEnvironmentVariable("ES_REACHABILITY_GRACE_S").toInt(&ok);
    if (!ok || grace < 1 || grace > 86400)
      return makeError("ES_REACHABILITY_GRACE_S must be a whole number of seconds from 1 to 86400, not \"" +
                       qEnvironmentVariable("ES_REACHABILITY_GRACE_S").toStdString() + "\"");
    s.reachabilityGraceSeconds = grace;
  }
  return s;
}

}  // namespace es::app
