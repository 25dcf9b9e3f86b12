// Checkpoint distribution through the swarm against a star (issue 4, acceptance 7), printed as
// `name: value unit` lines.
//
// What: the time to deliver one file (default 64 MiB of random bytes) from one publisher to N
// downloaders (default N = 2, 4, 8), two ways:
//   swarm  one torrent, every peer uploads (BitTorrent as the client runs it)
//   star   only the publisher uploads: it seeds N hard links of the file under different names
//          (N torrents, N disjoint swarms) and downloader i fetches torrent i, so no downloader has
//          anyone to upload to; the publisher's uplink is split evenly (uplink / N per torrent).
//          star_downloader_upload_bytes_nN checks it (must be 0).
// plus the single-stream loopback throughput of the swarm (1 publisher → 1 downloader, no caps)
// against a plain TCP copy of the same bytes over 127.0.0.1.
//
// Why: a volunteer's uplink, not the publisher's, is the bottleneck of a checkpoint's spread. With
// every session's upload capped at a home uplink (--uplink-mib, default 16 MiB/s) a star's time grows
// with N (N × size / uplink) while the swarm's should stay flat: goal swarm_over_star_n8 ≤ 0.5.
//
// Why not throttle the star's downloaders to 1 B/s instead: libtorrent's rate limits count every
// byte a peer sends, requests included, so a downloader capped at 1 B/s never downloads (measured:
// 0 bytes in 120 s; at 16 KiB/s the 8-peer star took 5× its uplink-bound time).
//
// How: all sessions live in this process, on the main thread's Qt event loop (SwarmSession's
// threading rule), listening on 127.0.0.1:0 with TCP only, sameHostSwarm and limitLocalPeers. The
// uplink cap is set twice: SwarmSettings::uploadRateLimit (the session's) and, since that one does
// not act on loopback peers here (measured: 50 MB/s out of a 16 MiB/s session), a per-transfer
// limit, which does (one transfer per session, so the same cap). The first session (the publisher)
// is the DHT bootstrap node of the others. Fresh sessions and a fresh download folder for every
// measurement; sessions get 1 s to form the DHT before the clock starts. Time = from the fetch
// calls until the last downloader's transferFinished (so it includes the DHT lookup and the
// metadata exchange: ~0.5 s, which dominates the 64 MiB single-stream figure). Every downloaded
// file's SHA-256 is checked against the original (exit 1 if one differs, a transfer fails 3 times
// — each failure starts it afresh, counted in *_restarts_nN — or a measurement passes --timeout-s). The TCP copy reads
// the file and sends it from one thread; the receiver writes it to a file; time = connect → last byte written.
//
// Usage: swarm_distribution [--size-mib N] [--uplink-mib X] [--peers 2,4,8] [--timeout-s S] [--threads N (ignored)]
// ES_P2P_TRACE=1 prints every libtorrent alert to stderr.
#include "p2p/identity.h"
#include "p2p/swarm_session.h"

#include <QCoreApplication>
#include <QCryptographicHash>
#include <QDir>
#include <QElapsedTimer>
#include <QEventLoop>
#include <QFile>
#include <QTemporaryDir>
#include <QTimer>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

using es::p2p::Identity;
using es::p2p::SwarmSession;
using es::p2p::SwarmSettings;

struct Args {
  int sizeMib = 64;
  double uplinkMib = 16;
  std::vector<int> peers{2, 4, 8};
  int timeoutS = 120;  // per measurement
};

bool parseArgs(int argc, char** argv, Args& a) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    std::string v;
    auto next = [&] { return i + 1 < argc ? (v = argv[++i], true) : false; };
    if (arg == "--size-mib" && next())
      a.sizeMib = std::atoi(v.c_str());
    else if (arg == "--uplink-mib" && next())
      a.uplinkMib = std::atof(v.c_str());
    else if (arg == "--timeout-s" && next())
      a.timeoutS = std::atoi(v.c_str());
    else if (arg == "--threads" && next()) {
    }  // scripts/bench's common option; libtorrent picks its own threads
    else if (arg == "--peers" && next()) {
      a.peers.clear();
      std::stringstream list(v);
      for (std::string item; std::getline(list, item, ',');) a.peers.push_back(std::atoi(item.c_str()));
    } else
      return false;
  }
  const bool peersOk = !a.peers.empty() && std::all_of(a.peers.begin(), a.peers.end(), [](int n) { return n > 0; });
  return a.sizeMib > 0 && a.uplinkMib > 0 && a.timeoutS > 0 && peersOk;
}

void print(const std::string& name, double value, int decimals = 4, const char* unit = "") {
  std::printf("%s: %.*f%s%s\n", name.c_str(), decimals, value, *unit ? " " : "", unit);
  std::fflush(stdout);
}

[[noreturn]] void die(const std::string& message) {
  std::fprintf(stderr, "swarm_distribution: FAILED: %s\n", message.c_str());
  std::exit(1);
}

QByteArray sha256Of(const QString& path) {
  QFile file(path);
  if (!file.open(QIODevice::ReadOnly)) return {};
  QCryptographicHash hash(QCryptographicHash::Sha256);
  hash.addData(&file);
  return hash.result().toHex();
}

// Runs the event loop (the sessions' thread) for `ms`, or until `done()` holds (checked every 20 ms).
template <typename Done>
bool spin(int ms, Done done) {
  QElapsedTimer clock;
  clock.start();
  while (!done()) {
    if (clock.elapsed() >= ms) return false;
    QEventLoop loop;
    QTimer::singleShot(20, &loop, &QEventLoop::quit);
    loop.exec();
  }
  return true;
}

SwarmSettings baseSettings(int uploadRateLimit) {
  SwarmSettings s;
  s.listen = "127.0.0.1:0";
  s.sameHostSwarm = true;
  s.enableUtp = false;
  s.limitLocalPeers = true;
  s.uploadRateLimit = uploadRateLimit;
  s.useSameHostTiming();
  s.firstRetryMs = s.maxRetryMs = 500;
  return s;
}

std::unique_ptr<SwarmSession> makeSession(const SwarmSettings& settings) {
  auto created = SwarmSession::create(settings, Identity::generate());
  if (!created) die("cannot create a session: " + created.error());
  return std::move(*created);
}

std::int64_t uploadedOf(const SwarmSession& s, const std::string& hash) {
  for (const auto& t : s.transfers())
    if (t.infoHash == hash) return t.uploadedBytes;
  return 0;
}

std::int64_t downloadedOf(const SwarmSession& s, const std::string& hash) {
  for (const auto& t : s.transfers())
    if (t.infoHash == hash) return t.downloadedBytes;
  return 0;
}

struct Distribution {
  double seconds = 0;
  std::int64_t publisherUploaded = 0;
  std::int64_t downloadersUploaded = 0;
  std::int64_t downloadersDownloaded = 0;
  int restarts = 0;  // failed transfers started again
};

// The downloads of one measurement: downloader i fetches hashes[i]. A transfer that fails is
// dropped with its partial file and started again in a fresh folder, at most kMostTries times in
// all — what the client does ("Transfers that fail" in docs/ARCHITECTURE.md: libtorrent 2.0.8's
// hybrid downloads now and then fail with "v1 and v2 hashes do not describe the same data";
// this bench died of it at d96d24b). The restarts are printed and their time is in the figure.
struct Downloads {
  static constexpr int kMostTries = 3;
  Downloads(std::vector<std::unique_ptr<SwarmSession>>& sessions, const std::vector<std::string>& hashes,
            const QString& workDir, int uplink)
      : paths(hashes.size()),
        sessions_(sessions),
        hashes_(hashes),
        workDir_(workDir),
        uplink_(uplink),
        tries_(hashes.size()) {
    for (std::size_t i = 0; i < hashes.size(); ++i) {
      QObject::connect(sessions_[i].get(), &SwarmSession::transferFinished,
                       [this, i](const QString& h, const QString& path) {
                         if (h.toStdString() != hashes_[i] || !paths[i].isEmpty()) return;
                         paths[i] = path;
                         ++finished;
                       });
      QObject::connect(sessions_[i].get(), &SwarmSession::transferFailed,
                       [this, i](const QString& h, const QString& why) {
                         if (h.toStdString() == hashes_[i]) failed(int(i), why.toStdString());
                       });
    }
  }
  void start(int i) {
    const QString dir = QDir(workDir_).filePath(QString("d%1-try%2").arg(i).arg(++tries_[i]));
    if (auto s = sessions_[i]->fetch(hashes_[i], dir.toStdString()); !s) failure = "fetch: " + s.error();
    if (uplink_ > 0) sessions_[i]->setTransferUploadLimit(hashes_[i], uplink_);
  }
  std::vector<QString> paths;
  int finished = 0;
  int restarts = 0;
  std::string failure;  // a fetch that could not start, or failed kMostTries times

 private:
  void failed(int i, const std::string& reason) {
    std::fprintf(stderr, "swarm_distribution: downloader %d, try %d of %d: %s\n", i, tries_[i], kMostTries,
                 reason.c_str());
    sessions_[i]->retire(hashes_[i], true);
    if (tries_[i] >= kMostTries) return void(failure = "downloader " + std::to_string(i) + ": " + reason);
    ++restarts;
    QTimer::singleShot(500, sessions_[i].get(), [this, i] { start(i); });  // as the node does
  }
  std::vector<std::unique_ptr<SwarmSession>>& sessions_;
  const std::vector<std::string>& hashes_;
  QString workDir_;
  int uplink_;
  std::vector<int> tries_;
};

enum class Mode { Swarm, Star };

// One publisher → n downloaders of `source`, every session's upload capped at `uplink` B/s (0 =
// none). Swarm: one torrent, everyone uploads. Star: the publisher seeds n hard links of the file
// under different names (n torrents, n disjoint swarms), downloader i fetches torrent i, so no
// downloader has anyone to upload to; the publisher's uplink is split evenly (uplink / n per torrent).
Distribution distribute(const QString& source, const QByteArray& sha, const QString& workDir, int n, Mode mode,
                        int uplink, int timeoutS, const std::string& label) {
  auto publisher = makeSession(baseSettings(uplink));
  std::vector<std::string> hashes(n);  // downloader i fetches hashes[i]
  if (mode == Mode::Swarm) {
    auto hash = publisher->publishFile(source.toStdString());
    if (!hash) die(label + ": publishFile: " + hash.error());
    if (uplink > 0) publisher->setTransferUploadLimit(*hash, uplink);
    std::fill(hashes.begin(), hashes.end(), *hash);
  } else {
    const QString seedDir = QDir(workDir).filePath("publisher");
    QDir().mkpath(seedDir);
    for (int i = 0; i < n; ++i) {
      const QString copy = QDir(seedDir).filePath(QString("snapshot-%1.bin").arg(i));
      if (::link(QFile::encodeName(source).constData(), QFile::encodeName(copy).constData()) != 0 &&
          !QFile::copy(source, copy))
        die(label + ": cannot link or copy the file to " + copy.toStdString());
      auto hash = publisher->publishFile(copy.toStdString());
      if (!hash) die(label + ": publishFile: " + hash.error());
      if (uplink > 0) publisher->setTransferUploadLimit(*hash, std::max(1, uplink / n));
      hashes[i] = *hash;
    }
    if (std::set<std::string>(hashes.begin(), hashes.end()).size() != hashes.size())
      die(label + ": the star's torrents share an info-hash");
  }
  SwarmSettings downloaderSettings = baseSettings(uplink);
  downloaderSettings.bootstrap = {publisher->listenEndpoint()};
  std::vector<std::unique_ptr<SwarmSession>> downloaders;
  for (int i = 0; i < n; ++i) downloaders.push_back(makeSession(downloaderSettings));

  Downloads downloads(downloaders, hashes, workDir, uplink);
  spin(1000, [] { return false; });  // the DHT forms (not timed)

  QElapsedTimer clock;
  clock.start();
  for (int i = 0; i < n; ++i) downloads.start(i);
  const bool done = spin(timeoutS * 1000, [&] { return downloads.finished == n || !downloads.failure.empty(); });
  Distribution r;
  r.seconds = clock.nsecsElapsed() / 1e9;
  r.restarts = downloads.restarts;
  if (!downloads.failure.empty()) die(label + ": " + downloads.failure);
  if (!done) {
    std::string progress;
    for (int i = 0; i < n; ++i)
      for (const auto& t : downloaders[i]->transfers())
        progress +=
            " d" + std::to_string(i) + "=" + std::to_string(t.doneBytes) + "B/" + std::to_string(t.peers) + "peers";
    die(label + ": only " + std::to_string(downloads.finished) + " of " + std::to_string(n) +
        " downloads finished within " + std::to_string(timeoutS) + " s;" + progress);
  }
  const auto& paths = downloads.paths;
  for (const auto& t : publisher->transfers()) r.publisherUploaded += t.uploadedBytes;
  for (int i = 0; i < n; ++i) {
    r.downloadersUploaded += uploadedOf(*downloaders[i], hashes[i]);
    r.downloadersDownloaded += downloadedOf(*downloaders[i], hashes[i]);
  }
  downloaders.clear();
  publisher.reset();
  for (int i = 0; i < n; ++i)
    if (sha256Of(paths[i]) != sha)
      die(label + ": downloader " + std::to_string(i) + "'s file " + paths[i].toStdString() +
          " does not have the original's SHA-256");
  std::fprintf(
      stderr,
      "swarm_distribution: %s: %.2f s, publisher uploaded %lld B, downloaders uploaded %lld B, downloaded %lld B\n",
      label.c_str(), r.seconds, static_cast<long long>(r.publisherUploaded),
      static_cast<long long>(r.downloadersUploaded), static_cast<long long>(r.downloadersDownloaded));
  return r;
}

// A plain TCP copy over 127.0.0.1: a thread reads `source` and sends it; we receive it into
// `target`. Seconds from connect() to the last byte written.
double tcpCopy(const QString& source, const QString& target, std::int64_t size) {
  const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (listener < 0 || ::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(listener, 1) != 0 || ::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) != 0)
    die("tcp copy: cannot listen on 127.0.0.1");
  std::thread sender([listener, path = source.toStdString()] {
    const int peer = ::accept(listener, nullptr, nullptr);
    QFile file(QString::fromStdString(path));
    if (peer < 0 || !file.open(QIODevice::ReadOnly)) die("tcp copy: accept or open failed");
    std::vector<char> buffer(1 << 20);
    for (qint64 n; (n = file.read(buffer.data(), qint64(buffer.size()))) > 0;)
      for (qint64 off = 0; off < n;) {
        const auto sent = ::send(peer, buffer.data() + off, static_cast<size_t>(n - off), MSG_NOSIGNAL);
        if (sent <= 0) die("tcp copy: send failed");
        off += sent;
      }
    ::close(peer);
  });
  QFile out(target);
  if (!out.open(QIODevice::WriteOnly)) die("tcp copy: cannot write " + target.toStdString());
  const int sock = ::socket(AF_INET, SOCK_STREAM, 0);
  QElapsedTimer clock;
  clock.start();
  if (sock < 0 || ::connect(sock, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0)
    die("tcp copy: connect failed");
  std::vector<char> buffer(1 << 20);
  std::int64_t received = 0;
  while (received < size) {
    const auto n = ::recv(sock, buffer.data(), buffer.size(), 0);
    if (n <= 0) die("tcp copy: connection closed after " + std::to_string(received) + " bytes");
    if (out.write(buffer.data(), n) != n) die("tcp copy: write failed");
    received += n;
  }
  out.flush();
  const double seconds = clock.nsecsElapsed() / 1e9;
  sender.join();
  ::close(sock);
  ::close(listener);
  return seconds;
}

}  // namespace

int main(int argc, char** argv) {
  QCoreApplication app(argc, argv);
  Args args;
  if (!parseArgs(argc, argv, args)) {
    std::fprintf(stderr, "usage: %s [--size-mib N] [--uplink-mib X] [--peers 2,4,8] [--timeout-s S]\n", argv[0]);
    return 2;
  }
  QElapsedTimer total;
  total.start();
  QTemporaryDir root;
  if (!root.isValid()) die("cannot create a temporary folder");
  const std::int64_t size = std::int64_t(args.sizeMib) << 20;
  const int uplink = static_cast<int>(std::min(args.uplinkMib * (1 << 20), 2e9));

  // The file: random bytes, written once.
  QDir(root.path()).mkpath("source");
  const QString source = QDir(root.path()).filePath("source/snapshot.bin");
  {
    QFile file(source);
    if (!file.open(QIODevice::WriteOnly)) die("cannot write " + source.toStdString());
    std::mt19937_64 rng(42);
    std::vector<std::uint64_t> block((1 << 20) / 8);
    for (std::int64_t written = 0; written < size; written += 1 << 20) {
      for (auto& w : block) w = rng();
      file.write(reinterpret_cast<const char*>(block.data()), 1 << 20);
    }
  }
  const QByteArray sha = sha256Of(source);

  int measurement = 0;
  auto freshDir = [&] {
    const QString dir = QDir(root.path()).filePath(QString("m%1").arg(measurement++));
    QDir().mkpath(dir);
    return dir;
  };

  std::fprintf(stderr, "swarm_distribution: %d MiB, uplink cap %.1f MiB/s per session\n", args.sizeMib, args.uplinkMib);
  for (const int n : args.peers) {
    const std::string sfx = "_n" + std::to_string(n);
    QString dir = freshDir();
    const auto swarm = distribute(source, sha, dir, n, Mode::Swarm, uplink, args.timeoutS, "swarm" + sfx);
    QDir(dir).removeRecursively();
    dir = freshDir();
    const auto star = distribute(source, sha, dir, n, Mode::Star, uplink, args.timeoutS, "star" + sfx);
    QDir(dir).removeRecursively();
    print("swarm_seconds" + sfx, swarm.seconds, 2, "s");
    print("star_seconds" + sfx, star.seconds, 2, "s");
    print("swarm_over_star" + sfx, swarm.seconds / star.seconds, 3);
    print("star_downloader_upload_bytes" + sfx, double(star.downloadersUploaded), 0, "B");
    print("swarm_restarts" + sfx, swarm.restarts, 0);
    print("star_restarts" + sfx, star.restarts, 0);
    print("swarm_downloader_upload_share" + sfx,
          swarm.downloadersDownloaded > 0 ? double(swarm.downloadersUploaded) / double(swarm.downloadersDownloaded) : 0,
          3);
  }

  // Loopback throughput, no caps: the swarm with one downloader against a plain TCP copy.
  {
    const QString dir = freshDir();
    const auto single = distribute(source, sha, dir, 1, Mode::Swarm, 0, args.timeoutS, "single");
    QDir(dir).removeRecursively();
    const QString tcpDir = freshDir();
    const double tcpSeconds = tcpCopy(source, QDir(tcpDir).filePath("copy.bin"), size);
    if (sha256Of(QDir(tcpDir).filePath("copy.bin")) != sha) die("tcp copy: the copy's SHA-256 differs");
    QDir(tcpDir).removeRecursively();
    const double swarmRate = args.sizeMib / single.seconds;
    const double tcpRate = args.sizeMib / tcpSeconds;
    print("swarm_single_mib_per_s", swarmRate, 1, "MiB/s");
    print("tcp_copy_mib_per_s", tcpRate, 1, "MiB/s");
    print("swarm_over_tcp_throughput", swarmRate / tcpRate, 3);
  }
  print("total_seconds", total.nsecsElapsed() / 1e9, 1, "s");
  return 0;
}
