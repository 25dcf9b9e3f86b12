// Issue 38, design item 1: a contribution is one v2 torrent with one file per shard, and a reducer
// downloads and verifies just its shard's file. Two swarm_probe processes (real libtorrent
// sessions on 127.0.0.1): the sender publishes a contribution folder of the bundled model's shape
// cut for 16 peers (core/sync/shard_file.h); the reducer asks for one shared shard's file
// and the contribution's figures file (node::FetchLimits::folderWanted), receives only those two
// files — byte for byte the sender's, read back strictly as that shard and its signed figures, the
// shard's figure recomputed from its bytes — and downloads no more than those files' pieces. Two
// reducers that merged a shard alike publish one info-hash (merged_shard_file.h: nothing in the
// file names its reducer), so a third peer downloads the merged shard from both at once.
#ifndef Q_MOC_RUN  // moc need not parse LibTorch
#include "core/model/tensor_names.h"
#include "core/sync/fetch_size.h"
#include "core/sync/merged_shard_file.h"
#include "core/sync/shard_figures_file.h"
#include "core/sync/shard_file.h"
#include "core/sync/shard_reduce.h"
#include "support/shard_model.h"

#include <torch/torch.h>
#endif
#include "support/swarm_probes.h"

#include <QCryptographicHash>
#include <QDirIterator>
#include <QJsonArray>
#include <QTemporaryDir>

#include <filesystem>

using namespace es;
using namespace es::test;

namespace {

QByteArray sha256(const QString& path) {
  QFile file(path);
  if (!file.open(QIODevice::ReadOnly)) return {};
  QCryptographicHash hash(QCryptographicHash::Sha256);
  hash.addData(&file);
  return hash.result().toHex();
}

}  // namespace

class SwarmShardFetch : public QObject {
  Q_OBJECT

  QTemporaryDir dir_;

  std::unique_ptr<Probe> start(const QString& name, const QString& bootstrap) {
    QStringList args{"--listen", "127.0.0.1:0", "--key", dir_.filePath(name + ".key")};
    if (!bootstrap.isEmpty()) args << "--bootstrap" << bootstrap;
    auto probe = std::make_unique<Probe>(name, args);
    if (!waitUntil([&] { return !probe->find([](auto& e) { return isEvent(e, "ready"); }).isEmpty(); }, 10000))
      return nullptr;
    return probe;
  }

 private Q_SLOTS:
  void aReducerFetchesItsShardAndTheFiguresAlone() {
    const model::ModelConfig config;  // the bundled run's shape
    const auto shards = sync::planShards(config, sync::shardElementsFor(config, 16));
    const sync::ContributionHeader header{std::string(64, 'a'), 7, "peer-1", "base-9", "int8"};
    const QString folder = dir_.filePath("sender/round-7-peer-1");
    auto written =
        sync::saveContributionShards(folder.toStdString(), header, test::senderDeltas(config, {0, 1}, 12), shards);
    QVERIFY2(written.ok(), written.ok() ? "" : written.error().c_str());
    qint64 folderBytes = 0;
    for (const auto& name : *written)
      folderBytes += qint64(std::filesystem::file_size((folder + "/").toStdString() + name));
    const sync::Shard& wanted = shards[3];  // a shared shard: every contributor sends it
    QVERIFY(wanted.expert < 0);
    const QString name = QString::fromStdString(sync::shardFileName(wanted));
    const qint64 fileBytes = QFileInfo(folder + "/" + name).size();

    auto sender = start("sender", {});
    QVERIFY(sender);
    const auto node = sender->find([](auto& e) { return isEvent(e, "ready"); }).value("endpoint").toString();
    auto reducer = start("reducer", node);
    QVERIFY(reducer);
    const QString hash = ask(*sender, "publish " + folder, "published", 60000).value("hash").toString();
    QCOMPARE(hash.size(), 64);
    QDir().mkpath(dir_.filePath("reducer"));
    const QString figures = QString::fromStdString(sync::kFiguresFileName);
    reducer->send(QString("fetch-files %1 %2 %3,%4").arg(hash, dir_.filePath("reducer"), name, figures));
    auto finished = [&] {
      return reducer->find([&](auto& e) { return isEvent(e, "finished") && e.value("hash").toString() == hash; });
    };
    QVERIFY2(waitUntil([&] { return !finished().isEmpty(); }, 60000), "the shard's file did not arrive in 60 s");

    // Only that file came, the sender's bytes, and it reads back as that shard of that contribution.
    // (libtorrent keeps what it fetched of pieces that are partly another file's — the v1 view's
    // pad after the file's last block — in a hidden ".parts" file, a piece-sized slot each.)
    QStringList files;
    qint64 partBytes = 0;
    for (QDirIterator it(dir_.filePath("reducer"), QDir::Files | QDir::Hidden, QDirIterator::Subdirectories);
         it.hasNext();) {
      const QFileInfo f(it.next());
      if (f.fileName().startsWith('.') && f.fileName().endsWith(".parts"))
        partBytes += f.size();
      else
        files << f.fileName();
    }
    files.sort();
    QCOMPARE(files, (QStringList{figures, name}));
    qInfo("libtorrent's part file: %lld bytes", partBytes);
    const QString got = dir_.filePath("reducer/round-7-peer-1/" + name);
    QCOMPARE(sha256(got), sha256(folder + "/" + name));
    auto shard = sync::loadContributionShard(got.toStdString(), header, wanted);
    QVERIFY2(shard.ok(), shard.ok() ? "" : shard.error().c_str());
    const auto stated = sync::loadShardFigures(dir_.filePath("reducer/round-7-peer-1/" + figures).toStdString(), header,
                                               shards, {0, 1});
    QVERIFY2(stated.ok(), stated.ok() ? "" : stated.error().c_str());
    QVERIFY(sync::figureMatches(stated->at(3), wanted, sync::piecesAsRows(wanted, shard->pieces)));
    const qint64 figuresBytes = QFileInfo(folder + "/" + figures).size();

    qint64 downloaded = -1;
    for (const auto& t : ask(*reducer, "status", "status").value("transfers").toArray())
      if (t.toObject().value("hash").toString() == hash) downloaded = t.toObject().value("downloaded").toInteger();
    qInfo(
        "the reducer downloaded %lld bytes: its shard's file is %lld and the figures %lld of the contribution's "
        "%lld (%zu files)",
        downloaded, fileBytes, figuresBytes, folderBytes, written->size());
    // v2 starts every file on a piece of its own (p2p/torrent_maker.h: 256 KiB), so the file costs
    // its pieces, the pad included; a block or two more is libtorrent's end game asking twice.
    const qint64 piece = 256 << 10, itsPieces = (fileBytes + piece - 1) / piece * piece + piece;
    QVERIFY(figuresBytes < piece);
    QVERIFY(downloaded >= fileBytes + figuresBytes);
    QVERIFY2(downloaded <= itsPieces + (32 << 10), "more than its files' pieces: other shards' pieces came too");
    QVERIFY(partBytes <= itsPieces + (64 << 10));  // the pads' pieces and the part file's slot map

    // A recomputation (Node::recomputeShards): the same folder asked again with one more shard's
    // file, its transfer removed first with its files kept. The new file comes, the sender's bytes;
    // the two already here are checked on disk, not downloaded again.
    const sync::Shard& more = shards[4];
    const QString moreName = QString::fromStdString(sync::shardFileName(more));
    const qint64 moreBytes = QFileInfo(folder + "/" + moreName).size();
    reducer->send(QString("more-files %1 %2 %3,%4,%5").arg(hash, dir_.filePath("reducer"), name, figures, moreName));
    const auto finishedTwice = [&] {
      int n = 0;
      for (const auto& e : reducer->events()) n += isEvent(e, "finished") && e.value("hash").toString() == hash ? 1 : 0;
      return n >= 2;
    };
    QVERIFY2(waitUntil(finishedTwice, 60000), "the folder asked again did not finish in 60 s");
    QCOMPARE(sha256(dir_.filePath("reducer/round-7-peer-1/" + moreName)), sha256(folder + "/" + moreName));
    QCOMPARE(sha256(got), sha256(folder + "/" + name));
    qint64 again = -1;
    for (const auto& t : ask(*reducer, "status", "status").value("transfers").toArray())
      if (t.toObject().value("hash").toString() == hash) again = t.toObject().value("downloaded").toInteger();
    const qint64 morePieces = (moreBytes + piece - 1) / piece * piece + piece;
    qInfo("asked again with one more file of %lld bytes: downloaded %lld", moreBytes, again);
    QVERIFY(again >= moreBytes);
    QVERIFY2(again <= morePieces + (32 << 10), "the files already here were downloaded again");
  }

  void twoReducersOfAShardSeedOneSwarm() {
    const model::ModelConfig config;
    const auto shards = sync::planShards(config, sync::shardElementsFor(config, 16));
    const sync::Shard& shard = shards[2];
    const sync::MergedShardKey key{std::string(64, 'a'), 7, "base-9", shard.id, "0123456789abcdef"};
    const sync::MergedShard merged{key,
                                   {},
                                   {"peer-1", "peer-2"},
                                   sync::ShardAgreement{1.0, shard.elements(), {0.5, 0.25}, {2.0, 3.0}},
                                   sync::shardRows(test::senderDeltas(config, {}, 13), shard)};
    const QString name = QString::fromStdString(sync::mergedShardFileName(7, shard.id));
    QStringList paths;
    for (const QString reducer : {"r1", "r2"}) {
      QVERIFY(QDir().mkpath(dir_.filePath(reducer)));
      paths << dir_.filePath(reducer + "/" + name);
      QVERIFY(sync::saveMergedShard(paths.back().toStdString(), shard, merged).ok());
    }
    const qint64 bytes = QFileInfo(paths[0]).size();
    auto r1 = start("r1", {});
    QVERIFY(r1);
    const auto node = r1->find([](auto& e) { return isEvent(e, "ready"); }).value("endpoint").toString();
    auto r2 = start("r2", node);
    auto peer = start("peer", node);
    QVERIFY(r2 && peer);
    const QString hash = ask(*r1, "publish " + paths[0], "published", 60000).value("hash").toString();
    QCOMPARE(ask(*r2, "publish " + paths[1], "published", 60000).value("hash").toString(), hash);
    for (auto* reducer : {r1.get(), r2.get()}) reducer->send(QString("limit %1 %2").arg(hash).arg(bytes / 4));
    peer->send(QString("fetch %1 %2").arg(hash, dir_.filePath("peer")));
    const auto finished = [&] {
      return peer->find([&](auto& e) { return isEvent(e, "finished") && e.value("hash").toString() == hash; });
    };
    QVERIFY2(waitUntil([&] { return !finished().isEmpty(); }, 60000), "the merged shard did not arrive in 60 s");
    const auto uploaded = [&](Probe& p) {
      for (const auto& t : ask(p, "status", "status").value("transfers").toArray())
        if (t.toObject().value("hash").toString() == hash) return t.toObject().value("uploaded").toInteger();
      return qint64(-1);
    };
    const qint64 from1 = uploaded(*r1), from2 = uploaded(*r2);
    qInfo("a %lld-byte merged shard: %lld bytes from one reducer, %lld from the other", bytes, from1, from2);
    QVERIFY2(from1 > 0 && from2 > 0, "one reducer served it alone: not one swarm");
    const QString got = finished().value("path").toString();
    QCOMPARE(sha256(got), sha256(paths[0]));
    auto back = sync::loadMergedShard(got.toStdString(), key, shard, {"peer-1", "peer-2"});
    QVERIFY2(back.ok(), back.ok() ? "" : back.error().c_str());
  }
};

QTEST_GUILESS_MAIN(SwarmShardFetch)
#include "tst_swarm_shard_fetch.moc"
