// MemorySwarm's folders (support/memory_swarm_folders.h), which the node's in-process tests of a
// sharded round will publish and fetch as the p2p layer does (tst_swarm_shard_fetch shows that
// layer): equal folders are one content; a fetch shows the folder's file list to its limits
// before anything moves and copies only the wanted files; limits of one file refuse a folder,
// and a folder the limits refuse is the sender's fault; a retired copy goes with its files.
#include "support/memory_swarm.h"
#include "support/wait_until.h"

#include <QDir>
#include <QFile>
#include <QTemporaryDir>
#include <QtTest>

using namespace es;
using namespace es::node;

namespace {

void writeFile(const QString& path, const QByteArray& bytes) {
  QDir().mkpath(QFileInfo(path).path());
  QFile f(path);
  if (!f.open(QIODevice::WriteOnly) || f.write(bytes) != bytes.size()) qFatal("cannot write %s", qPrintable(path));
}

}  // namespace

class MemorySwarmTest : public QObject {
  Q_OBJECT
  QTemporaryDir dir_;

  struct Got {
    std::string path, failure;
    bool refused = false;
    bool done() const { return !path.empty() || !failure.empty(); }
  };
  SwarmEvents recordInto(Got& got) {
    SwarmEvents e;
    e.fetched = [&got](const ContentId&, const std::string& path) { got.path = path; };
    e.fetchFailed = [&got](const ContentId&, const std::string& reason, bool refused) {
      got.failure = reason;
      got.refused = refused;
    };
    return e;
  }

 private Q_SLOTS:
  void aFolderIsFetchedFileByFileAsItsLimitsSay() {
    for (const QString who : {"a", "b"}) {
      writeFile(dir_.filePath(who + "/round-3/shared-0.safetensors"), "shard zero");
      writeFile(dir_.filePath(who + "/round-3/expert-1-0.safetensors"), "expert one");
      writeFile(dir_.filePath(who + "/round-3/figures.safetensors"), "figures");
    }
    MemorySwarmHub hub("run");
    MemorySwarm a(hub, "a"), b(hub, "b"), c(hub, "c");
    const auto id = a.publish(dir_.filePath("a/round-3").toStdString());
    QVERIFY(id.ok());
    QCOMPARE(b.publish(dir_.filePath("b/round-3").toStdString()).value(), *id);  // equal folders: one content

    Got got;
    c.setEvents(recordInto(got));
    FetchLimits limits;
    FetchLimits::FolderFiles seen;
    limits.folder = [&](const std::string& name, const FetchLimits::FolderFiles& files) {
      seen = files;
      return name == "round-3" ? std::string() : "not a round's folder";
    };
    limits.folderWanted = [](const FetchLimits::FolderFiles&) {
      return std::set<std::string>{"figures.safetensors", "shared-0.safetensors"};
    };
    QVERIFY(c.fetch(*id, dir_.filePath("c").toStdString(), limits).ok());
    QVERIFY(test::waitUntil([&] { return got.done(); }, 5000));
    QVERIFY2(got.failure.empty(), got.failure.c_str());
    QCOMPARE(int(seen.size()), 3);
    QCOMPARE(seen[0], (std::pair<std::string, std::int64_t>{"expert-1-0.safetensors", 10}));
    const QDir fetched(QString::fromStdString(got.path));
    QCOMPARE(fetched.entryList(QDir::Files), (QStringList{"figures.safetensors", "shared-0.safetensors"}));
    c.retire(*id, true);
    QVERIFY(!fetched.exists());
  }

  void limitsThatRefuseTheFolderMakeItTheSendersFault() {
    writeFile(dir_.filePath("d/round-4/shared-0.safetensors"), "x");
    MemorySwarmHub hub("run");
    MemorySwarm d(hub, "d"), e(hub, "e");
    const auto id = d.publish(dir_.filePath("d/round-4").toStdString());
    QVERIFY(id.ok());
    for (const bool oneFile : {true, false}) {
      Got got;
      e.setEvents(recordInto(got));
      FetchLimits limits;
      if (oneFile)
        limits.sizes = {1};  // a contribution of one file was predicted
      else
        limits.folder = [](const std::string&, const FetchLimits::FolderFiles&) { return std::string("no figures"); };
      QVERIFY(e.fetch(*id, dir_.filePath("e").toStdString(), limits).ok());
      QVERIFY(test::waitUntil([&] { return got.done(); }, 5000));
      QVERIFY(got.path.empty());
      QVERIFY(got.refused);
      QVERIFY2(!got.failure.empty(), "refused without a reason");
    }
    QVERIFY(!QDir(dir_.filePath("e/round-4")).exists());
  }
};

QTEST_GUILESS_MAIN(MemorySwarmTest)
#include "tst_memory_swarm.moc"
