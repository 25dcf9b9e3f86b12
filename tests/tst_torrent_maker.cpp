// Deterministic hybrid torrents (p2p/torrent_maker.h): the same bytes give the same info-hash
// wherever they are, so the bundled run has one run id on every machine.
#include "p2p/torrent_maker.h"

#include <QTemporaryDir>
#include <QtTest>

using namespace es::p2p;

class TorrentMaker : public QObject {
  Q_OBJECT

  QTemporaryDir dir_;

  QString write(const QString& relative, const QByteArray& bytes) {
    const auto path = dir_.filePath(relative);
    QDir().mkpath(QFileInfo(path).absolutePath());
    QFile f(path);
    if (!f.open(QIODevice::WriteOnly)) return {};
    f.write(bytes);
    return path;
  }

 private Q_SLOTS:
  void sameBytesGiveTheSameInfoHashAnywhere() {
    QByteArray bytes(700 * 1024, 'a');
    for (int i = 0; i < bytes.size(); ++i) bytes[i] = char(i * 31 % 251);
    const auto a = makeTorrent(write("one/model.safetensors", bytes).toStdString());
    QFile::setPermissions(write("two/model.safetensors", bytes),
                          QFile::ReadOwner | QFile::WriteOwner | QFile::ExeOwner);
    const auto b = makeTorrent(dir_.filePath("two/model.safetensors").toStdString());
    QVERIFY(a.ok() && b.ok());
    QCOMPARE(a->infoHashV2, b->infoHashV2);  // other folder, other mode bits, other mtime
    QCOMPARE(a->infoHashV1, b->infoHashV1);
    QCOMPARE(a->bytes, b->bytes);
    QCOMPARE(a->infoHashV2.size(), std::size_t(64));
    QVERIFY(isInfoHashV2(a->infoHashV2));
    QCOMPARE(a->totalBytes, std::int64_t(bytes.size()));
    QCOMPARE(a->name, std::string("model.safetensors"));
    QVERIFY(a->bytes.find("creation date") == std::string::npos);
    QVERIFY(a->bytes.find("created by") == std::string::npos);
  }

  void aChangedByteChangesTheInfoHash() {
    QByteArray bytes(300 * 1024, 'x');
    const auto a = makeTorrent(write("c/f.bin", bytes).toStdString());
    bytes[1234] = 'y';
    const auto b = makeTorrent(write("d/f.bin", bytes).toStdString());
    QVERIFY(a.ok() && b.ok());
    QVERIFY(a->infoHashV2 != b->infoHashV2);
  }

  void aFolderSkipsHiddenAndPartialFiles() {
    write("run/run.json", "{}");
    write("run/data/train-000.bin", QByteArray(5000, 't'));
    const auto clean = makeTorrent(dir_.filePath("run").toStdString());
    write("run/.hidden", "x");
    write("run/data/train-001.bin.tmp-123", "partial");
    const auto withJunk = makeTorrent(dir_.filePath("run").toStdString());
    QVERIFY(clean.ok() && withJunk.ok());
    QCOMPARE(withJunk->infoHashV2, clean->infoHashV2);
  }

  void loadTorrentReadsBackWhatWasMade() {
    const auto made = makeTorrent(write("e/x.bin", QByteArray(1000, 'e')).toStdString());
    QVERIFY(made.ok());
    const auto path = write("e.torrent", QByteArray::fromStdString(made->bytes));
    const auto loaded = loadTorrent(path.toStdString());
    QVERIFY(loaded.ok());
    QCOMPARE(loaded->infoHashV2, made->infoHashV2);
  }

  void badInputIsAClearError() {
    QVERIFY(!makeTorrent(dir_.filePath("missing").toStdString()).ok());
    QVERIFY(!makeTorrent(write("empty.bin", {}).toStdString()).ok());
    const auto garbage = loadTorrent(write("bad.torrent", "d4:infoi1ee").toStdString());
    QVERIFY(!garbage.ok());
    QVERIFY(garbage.error().find("bad.torrent") != std::string::npos);
    QVERIFY(!isInfoHashV2("abc"));
    QVERIFY(!isInfoHashV2(std::string(64, 'g')));
  }
};

QTEST_GUILESS_MAIN(TorrentMaker)
#include "tst_torrent_maker.moc"
