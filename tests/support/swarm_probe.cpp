// Test helper: one swarm peer in its own process, driven by line commands on stdin and reporting
// JSON-line events on stdout, so multi-process tests and benchmarks can run real libtorrent
// sessions side by side on 127.0.0.1.
//
//   swarm_probe --listen 127.0.0.1:0 [--bootstrap IP:PORT]... --key FILE [--run TORRENT --run-dir DIR]
//               [--internet]   (peers on other hosts: no same-host relaxations; the netlab's DHT node)
//               [--alert-queue N]  (libtorrent's alert queue: tiny makes it drop alerts)
//               [--work-bits N]  (the run's identity_work_bits: asked of every key, proven for ours)
//               [--gossip-per-address N]  (gossip connections one address may hold; none on loopback otherwise)
//   swarm_probe --make-torrent PATH --out FILE.torrent   (prints the v2 info-hash)
//
// Commands: record SEQ ROUND CLAIMS(1,2|-) LEASE [CONTRIB(R=HASH,…|-) [SNAPSHOT(R=HASH,…)]] | publish PATH |
//           fetch HASH DIR [SIZES(N,N…): the metadata check's sizes] | inject HEX |
//           fetch-files HASH DIR NAME,NAME…  (a folder torrent: only these files of it) |
//           limit HASH BYTES_PER_S | leases ROUND EXPERTS LEASE_ROUNDS | status | quit
//           flood keys|garbage N  (an attacker: N valid records of fresh keys, or N garbage messages)
//           equivocate SEQ        (two different records of our key, both with SEQ)
// Events carry "t": milliseconds since the epoch (all processes share the host clock).
#include "p2p/identity.h"
#include "p2p/identity_work.h"
#include "p2p/leases.h"
#include "p2p/swarm_session.h"
#include "p2p/torrent_maker.h"

#include <QCommandLineParser>
#include <QCoreApplication>
#include <QCryptographicHash>
#include <QDateTime>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QSocketNotifier>

#include <unistd.h>

#include <cstdio>
#include <set>

using namespace es::p2p;

namespace {

void emitEvent(QJsonObject event) {
  event.insert("t", QDateTime::currentMSecsSinceEpoch());
  std::printf("%s\n", QJsonDocument(event).toJson(QJsonDocument::Compact).constData());
  std::fflush(stdout);
}

QString sha256Of(const QString& path) {
  QFile file(path);
  if (!file.open(QIODevice::ReadOnly)) return {};
  QCryptographicHash hash(QCryptographicHash::Sha256);
  hash.addData(&file);
  return QString::fromLatin1(hash.result().toHex());
}

std::vector<int> parseClaims(const QString& text) {
  std::vector<int> claims;
  if (text == "-") return claims;
  for (const auto& part : text.split(',')) claims.push_back(part.toInt());
  return claims;
}

// "R=HASH,R=HASH" ("-": none).
std::map<std::int64_t, std::string> parseRoundMap(const QString& text) {
  std::map<std::int64_t, std::string> out;
  if (text == "-") return out;
  for (const auto& entry : text.split(',', Qt::SkipEmptyParts))
    out[entry.section('=', 0, 0).toLongLong()] = entry.section('=', 1).toStdString();
  return out;
}

// Hidden attacker modes for tests/tst_swarm_flood.cpp: bytes pushed straight into the gossip.
void flood(SwarmSession& swarm, const QString& kind, int n) {
  for (int i = 0; i < n; ++i) {
    if (kind != "keys") {
      swarm.injectRawGossip("garbage " + std::to_string(i));
      continue;
    }
    std::array<std::uint8_t, 32> seed{};
    seed.fill(0xee);
    for (int b = 0; b < 4; ++b) seed[b] = static_cast<std::uint8_t>(i >> (8 * b));
    const auto id = Identity::fromSeed(seed);
    PeerRecord r;
    r.run = swarm.runId();
    r.pk = id.publicKey();
    r.seq = 1;
    if (auto bytes = signRecord(r, id)) swarm.injectRawGossip(*bytes);
  }
}

// Our key's identity work goes in, so the two records pass the run's work check.
void equivocate(SwarmSession& swarm, const Identity& identity, std::int64_t seq, std::int64_t work) {
  for (std::int64_t round : {1, 2}) {
    PeerRecord r;
    r.run = swarm.runId();
    r.pk = identity.publicKey();
    r.seq = seq;
    r.round = round;
    r.work = work;
    if (auto bytes = signRecord(r, identity)) swarm.injectRawGossip(*bytes);
  }
}

}  // namespace

int main(int argc, char** argv) {
  QCoreApplication app(argc, argv);
  QCommandLineParser parser;
  parser.addOptions({{"listen", "IP:PORT", "endpoint"},
                     {"bootstrap", "DHT node", "endpoint"},
                     {"key", "identity file", "file"},
                     {"run", "run torrent", "file"},
                     {"run-dir", "run folder", "dir"},
                     {"make-torrent", "write PATH's torrent to --out and exit", "path"},
                     {"out", "torrent file", "file"},
                     {"internet", "a peer among others on other hosts (tests/netlab): libtorrent's internet defaults"},
                     {"alert-queue", "libtorrent's alert queue size (tiny: alerts are dropped)", "n"},
                     {"work-bits", "the run's identity_work_bits: asked of every key, proven for ours", "n"},
                     {"gossip-per-address", "gossip connections one address may hold with us", "n"}});
  parser.process(app);
  if (parser.isSet("make-torrent")) {
    auto torrent = makeTorrent(parser.value("make-torrent").toStdString());
    QFile out(parser.value("out"));
    if (!torrent || !out.open(QIODevice::WriteOnly)) return std::fprintf(stderr, "cannot make the torrent\n"), 1;
    out.write(torrent->bytes.data(), qint64(torrent->bytes.size()));
    std::printf("%s\n", torrent->infoHashV2.c_str());
    return 0;
  }
  auto identity = Identity::loadOrCreate(parser.value("key").toStdString());
  if (!identity) return std::fprintf(stderr, "%s\n", identity.error().c_str()), 1;
  SwarmSettings settings;
  settings.listen = parser.value("listen").toStdString();
  for (const auto& node : parser.values("bootstrap")) settings.bootstrap.push_back(node.toStdString());
  if (parser.isSet("alert-queue")) settings.alertQueueSize = parser.value("alert-queue").toInt();
  settings.gossipConnectionsPerAddress = parser.value("gossip-per-address").toInt();
  if (!parser.isSet("internet")) {
    settings.sameHostSwarm = true;
    settings.limitLocalPeers = true;  // so `limit` applies on loopback
    settings.enableUtp = false;
    settings.useSameHostTiming();
    settings.firstRetryMs = settings.maxRetryMs = 500;
    settings.bep44PollMs = 2000;
  }
  settings.log = [](const std::string& line) { emitEvent({{"event", "log"}, {"line", QString::fromStdString(line)}}); };
  auto created = SwarmSession::create(settings, *identity);
  if (!created) return std::fprintf(stderr, "%s\n", created.error().c_str()), 1;
  auto& swarm = **created;

  QObject::connect(&swarm, &SwarmSession::recordAccepted, [](const PeerRecord& r) {
    emitEvent({{"event", "record"}, {"pk", QString::fromStdString(toHex(r.pk))}, {"seq", qint64(r.seq)}});
  });
  QObject::connect(&swarm, &SwarmSession::recordDropped, [](const QString& sender, const QString& reason) {
    emitEvent({{"event", "dropped"}, {"sender", sender}, {"reason", reason}});
  });
  QObject::connect(&swarm, &SwarmSession::keyBanned, [](const QString& id, const QString& reason) {
    emitEvent({{"event", "banned"}, {"id", id}, {"reason", reason}});
  });
  QObject::connect(&swarm, &SwarmSession::transferFinished, [](const QString& hash, const QString& path) {
    emitEvent({{"event", "finished"}, {"hash", hash}, {"path", path}, {"sha256", sha256Of(path)}});
  });
  QObject::connect(&swarm, &SwarmSession::transferFailed, [](const QString& hash, const QString& reason) {
    emitEvent({{"event", "failed"}, {"hash", hash}, {"reason", reason}});
  });
  QObject::connect(&swarm, &SwarmSession::transferRefused, [](const QString& hash, const QString& reason) {
    emitEvent({{"event", "refused"}, {"hash", hash}, {"reason", reason}});
  });
  QObject::connect(&swarm, &SwarmSession::pieceHashFailed, [](const QString& hash) {
    emitEvent({{"event", "hashfail"}, {"hash", hash}});
  });

  std::int64_t work = 0;
  if (parser.isSet("run")) {
    const int bits = parser.value("work-bits").toInt();
    work = es::p2p::solveIdentityWork(identity->publicKey(), bits);
    if (auto s = swarm.joinRun(parser.value("run").toStdString(), parser.value("run-dir").toStdString(), {bits, work});
        !s)
      return std::fprintf(stderr, "%s\n", s.error().c_str()), 1;
  }
  emitEvent({{"event", "ready"},
             {"endpoint", QString::fromStdString(swarm.listenEndpoint())},
             {"pk", QString::fromStdString(toHex(identity->publicKey()))}});

  auto fail = [](const QString& what, const std::string& why) {
    emitEvent({{"event", "error"}, {"command", what}, {"message", QString::fromStdString(why)}});
  };
  QSocketNotifier input(STDIN_FILENO, QSocketNotifier::Read);
  std::string pending;  // raw read(2), not std::cin: a buffered stream would hide queued lines from the notifier
  auto handle = [&](const std::string& line) {
    const auto words = QString::fromStdString(line).split(' ', Qt::SkipEmptyParts);
    if (words.isEmpty()) return;
    const QString& cmd = words[0];
    if (cmd == "quit") return app.quit();
    if (cmd == "record" && words.size() >= 5 && words.size() <= 7) {
      PeerRecord r;
      r.seq = words[1].toLongLong();
      r.round = words[2].toLongLong();
      r.claims = parseClaims(words[3]);
      r.leaseUntil = words[4].toLongLong();
      if (words.size() >= 6) r.contrib = parseRoundMap(words[5]);
      if (words.size() == 7) r.snapshot = parseRoundMap(words[6]);
      if (auto s = swarm.publishRecord(r); !s)
        fail(cmd, s.error());
      else
        emitEvent({{"event", "published-record"}, {"seq", qint64(r.seq)}});
    } else if (cmd == "publish" && words.size() == 2) {
      auto hash = swarm.publishFile(words[1].toStdString());
      if (!hash)
        fail(cmd, hash.error());
      else
        emitEvent({{"event", "published"}, {"hash", QString::fromStdString(*hash)}});
    } else if (cmd == "fetch" && (words.size() == 3 || words.size() == 4)) {
      es::node::FetchLimits limits;
      if (words.size() == 4)
        for (const auto& size : words[3].split(',', Qt::SkipEmptyParts)) limits.sizes.push_back(size.toLongLong());
      if (auto s = swarm.fetch(words[1].toStdString(), words[2].toStdString(), limits); !s) fail(cmd, s.error());
    } else if ((cmd == "fetch-files" || cmd == "more-files") && words.size() == 4) {
      // A folder torrent, only these files of it. more-files: the transfer is removed first, its
      // files kept (Node::recomputeShards asks a folder again with more of its files).
      if (cmd == "more-files") swarm.retire(words[1].toStdString(), false);
      es::node::FetchLimits limits;
      limits.folder = [](const std::string&, const es::node::FetchLimits::FolderFiles&) { return std::string(); };
      std::set<std::string> wanted;
      for (const auto& f : words[3].split(',', Qt::SkipEmptyParts)) wanted.insert(f.toStdString());
      limits.folderWanted = [wanted](const es::node::FetchLimits::FolderFiles&) { return wanted; };
      if (auto s = swarm.fetch(words[1].toStdString(), words[2].toStdString(), limits); !s) fail(cmd, s.error());
    } else if (cmd == "refetch" && words.size() == 3) {  // retire with its file, and fetch again at once
      swarm.retire(words[1].toStdString(), true);
      if (auto s = swarm.fetch(words[1].toStdString(), words[2].toStdString()); !s) fail(cmd, s.error());
    } else if (cmd == "inject" && words.size() == 2) {
      swarm.injectRawGossip(QByteArray::fromHex(words[1].toLatin1()).toStdString());
    } else if (cmd == "flood" && words.size() == 3) {
      flood(swarm, words[1], words[2].toInt());
      emitEvent({{"event", "flooded"}, {"count", words[2].toInt()}});
    } else if (cmd == "equivocate" && words.size() == 2) {
      equivocate(swarm, *identity, words[1].toLongLong(), work);
      emitEvent({{"event", "equivocated"}});
    } else if (cmd == "limit" && words.size() == 3) {
      swarm.setTransferUploadLimit(words[1].toStdString(), words[2].toInt());
    } else if (cmd == "leases" && words.size() == 4) {
      const auto map =
          ownershipMap(swarm.records().records(), words[1].toLongLong(), words[2].toInt(), words[3].toInt());
      QJsonArray owners;
      for (const auto& expertOwners : map.owners) {
        QJsonArray keys;
        for (const auto& k : expertOwners) keys.append(QString::fromStdString(toHex(k).substr(0, 8)));
        owners.append(keys);
      }
      emitEvent({{"event", "leases"}, {"owners", owners}});
    } else if (cmd == "status") {
      const auto c = swarm.counters();
      QJsonArray transfers;
      for (const auto& t : swarm.transfers())
        transfers.append(QJsonObject{{"hash", QString::fromStdString(t.infoHash)},
                                     {"done", qint64(t.doneBytes)},
                                     {"uploaded", qint64(t.uploadedBytes)},
                                     {"downloaded", qint64(t.downloadedBytes)},
                                     {"peers", t.peers},
                                     {"finished", t.finished}});
      emitEvent({{"event", "status"},
                 {"records", int(swarm.records().size())},
                 {"dropped", c.recordsDropped},
                 {"hashfail", c.hashFailures},
                 {"refused", c.refusedFetches},
                 {"droppedAlerts", c.droppedAlerts},
                 {"runPeers", c.runPeers},
                 {"runLinks", c.runLinks},
                 {"relinks", c.relinks},
                 {"rateDropped", c.gossipRateDropped},
                 {"inboxDropped", c.gossipInboxDropped},
                 {"disconnects", c.gossipDisconnects},
                 {"addressCapped", c.gossipAddressCapped},
                 {"mostPerAddress", c.gossipMostPerAddress},
                 {"bannedKeys", c.bannedKeys},
                 {"transfers", transfers}});
    } else {
      fail(cmd, "unknown command or wrong arguments: " + line);
    }
  };
  QObject::connect(&input, &QSocketNotifier::activated, [&] {
    char buffer[4096];
    const auto n = ::read(STDIN_FILENO, buffer, sizeof buffer);
    if (n <= 0) return app.quit();  // stdin closed: the test is gone
    pending.append(buffer, static_cast<std::size_t>(n));
    for (auto end = pending.find('\n'); end != std::string::npos; end = pending.find('\n')) {
      const std::string line = pending.substr(0, end);
      pending.erase(0, end + 1);
      handle(line);
    }
  });
  return app.exec();
}
