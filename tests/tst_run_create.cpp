// create-run (issue 40, core/train/run_create.h) and the prepared run it makes: the folder is
// whole or absent, the same corpus gives the same bytes, bad input is refused with the reason and
// nothing created, and a prepared folder or torrent whose files disagree with run.json is refused
// (prepared_run.h). The corpus here is small generated text; no Torch.
#include "core/train/corpus_split.h"
#include "core/train/corpus_text.h"
#include "core/train/prepared_run.h"
#include "core/train/run_create.h"
#include "core/train/run_manifest.h"
#include "core/train/shard_assignment.h"

#include <QDir>
#include <QFile>
#include <QTemporaryDir>
#include <QtTest>

#include <zlib.h>
#include <zstd.h>

#include <limits>
#include <set>

using namespace es::train;
using TorrentFiles = std::vector<std::pair<std::string, std::int64_t>>;
Q_DECLARE_METATYPE(TorrentFiles)

class RunCreate : public QObject {
  Q_OBJECT

  QTemporaryDir dir_;
  std::string template_;

  // The first `bytes` of the bundled training text, cut at a line break: real English, so that
  // a tokenizer of the tiny preset's 1024 tokens finds its merges.
  static QByteArray someText(int bytes, int offset = 0) {
    QFile f(ES_SHARE_DIR "/runs/sotu-text/corpus/sotu-train.txt");
    if (!f.open(QIODevice::ReadOnly)) qFatal("no bundled corpus");
    QByteArray text = f.readAll().mid(offset, bytes);
    return text.left(text.lastIndexOf('\n') + 1);
  }
  QString write(const QString& name, const QByteArray& bytes) {
    const QString path = dir_.filePath(name);
    QDir().mkpath(QFileInfo(path).path());
    QFile f(path);
    if (!f.open(QIODevice::WriteOnly) || f.write(bytes) != bytes.size()) qFatal("cannot write %s", qPrintable(path));
    return path;
  }
  CreateRunRequest request(const QString& corpus, const QString& out) const {
    CreateRunRequest r;
    r.corpus = {corpus.toStdString()};
    r.out = dir_.filePath(out).toStdString();
    r.manifestTemplate = template_;
    r.preset = "tiny";
    r.shardTokens = 4096;
    return r;
  }
  // `text` as a gzip file of two members (zlib writes one; `cat a.gz b.gz` makes two, which gzip
  // reads as one text), and as a zstd file of one frame.
  QString writeGzip(const QString& name, const QByteArray& text) {
    const QString path = dir_.filePath(name);
    QDir().mkpath(QFileInfo(path).path());
    for (const char* mode : {"wb", "ab"}) {
      const QByteArray half = mode[0] == 'w' ? text.left(text.size() / 2) : text.mid(text.size() / 2);
      gzFile f = gzopen(path.toLocal8Bit().constData(), mode);
      if (!f || gzwrite(f, half.constData(), unsigned(half.size())) != half.size() || gzclose(f) != Z_OK)
        qFatal("cannot gzip %s", qPrintable(path));
    }
    return path;
  }
  QString writeZstd(const QString& name, const QByteArray& text) {
    QByteArray out(int(ZSTD_compressBound(std::size_t(text.size()))), '\0');
    const auto n = ZSTD_compress(out.data(), std::size_t(out.size()), text.constData(), std::size_t(text.size()), 3);
    if (ZSTD_isError(n)) qFatal("zstd: %s", ZSTD_getErrorName(n));
    return write(name, out.left(int(n)));
  }
  static QByteArray bytesOf(const QString& path) {
    QFile f(path);
    return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
  }

 private Q_SLOTS:
  void initTestCase() {
    QFile t(ES_SHARE_DIR "/runs/sotu-text/run.json");
    QVERIFY(t.open(QIODevice::ReadOnly));
    template_ = t.readAll().toStdString();
    write("corpus/a.txt", someText(600000));
    QByteArray jsonl;
    for (const auto& line : someText(100000, 700000).split('\n'))
      if (!line.trimmed().isEmpty())
        jsonl += "{\"text\": \"" + line.trimmed().replace('\\', ' ').replace('"', '\'') + "\", \"id\": 1}\n";
    write("corpus/sub/b.jsonl", jsonl);
    write("corpus/README.md", "not part of the corpus");
  }

  void aRunIsCreatedWholeAndItsFilesMatchItsManifest() {
    const auto created = createRun(request(dir_.filePath("corpus"), "run-one"), [](const std::string&, double) {});
    QVERIFY2(created.ok(), created.ok() ? "" : created.error().c_str());
    QVERIFY(created->shards > 1);
    auto manifest = loadRunManifest(created->dir + "/run.json");
    QVERIFY2(manifest.ok(), manifest.ok() ? "" : manifest.error().c_str());
    QVERIFY(manifest->data.prepared());
    QCOMPARE(int(manifest->data.preparedTrainTokens.size()), created->shards);
    QCOMPARE(manifest->data.preparedValTokens, created->valTokens);
    QCOMPARE(manifest->name, std::string("run-one"));
    QCOMPARE(manifest->model.vocabSize, 1024);  // the tiny preset
    QVERIFY(checkPreparedFiles(*manifest, created->dir).ok());
    QVERIFY(!QFileInfo::exists(dir_.filePath("run-one.partial")));
  }

  // The same corpus and settings give the same bytes (so the same run id) wherever made.
  void theSameCorpusGivesTheSameRun() {
    QVERIFY(createRun(request(dir_.filePath("corpus"), "same/run"), [](const std::string&, double) {}).ok());
    QVERIFY(createRun(request(dir_.filePath("corpus"), "again/run"), [](const std::string&, double) {}).ok());
    for (const char* f : {"run.json", "tokenizer.json", "data/val.bin", "data/train-000.bin", "data/train-001.bin"}) {
      const auto a = bytesOf(dir_.filePath(QString("same/run/") + f));
      QVERIFY2(!a.isEmpty() && a == bytesOf(dir_.filePath(QString("again/run/") + f)), f);
    }
  }

  // An interrupted create left its .partial folder: the next one starts clean. An existing run
  // folder is never touched.
  void aLeftoverIsClearedAndAnExistingRunKept() {
    write("left/run.partial/data/train-000.bin", "half a shard");
    QVERIFY(createRun(request(dir_.filePath("corpus"), "left/run"), [](const std::string&, double) {}).ok());
    QVERIFY(!QFileInfo::exists(dir_.filePath("left/run.partial")));
    const auto before = bytesOf(dir_.filePath("left/run/run.json"));
    const auto again = createRun(request(dir_.filePath("corpus/a.txt"), "left/run"), [](const std::string&, double) {});
    QVERIFY(!again.ok());
    QVERIFY2(again.error().find("exists already") != std::string::npos, again.error().c_str());
    QCOMPARE(bytesOf(dir_.filePath("left/run/run.json")), before);
  }

  void badInputIsRefusedAndNothingCreated_data() {
    QTest::addColumn<QString>("file");
    QTest::addColumn<QByteArray>("bytes");
    QTest::addColumn<QString>("why");
    QTest::newRow("empty") << "e.txt" << QByteArray() << "the corpus is empty";
    QTest::newRow("not utf-8") << "u.txt" << QByteArray("caf\xe9 au lait")
                               << "not UTF-8 text (an invalid byte at offset 3)";
    QTest::newRow("jsonl without text") << "j.jsonl" << QByteArray("{\"text\": \"ok\"}\n{\"body\": 1}\n")
                                        << "line 2: not a JSON object with a string \"text\"";
    QTest::newRow("xz") << "c.txt.xz"
                        << QByteArray(
                               "\xfd"
                               "7zXZ")
                        << "is compressed with xz or bzip2";
    QTest::newRow("gzip cut short") << "g.txt.gz" << QByteArray("\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03\x4b\x4c")
                                    << "not a valid gzip file";
    QTest::newRow("plain text named .gz") << "p.txt.gz" << QByteArray("plain words\n") << "not a gzip file";
    QTest::newRow("zstd garbage") << "z.jsonl.zst" << QByteArray("\x28\xb5\x2f\xfd garbage") << "not a valid zstd file";
    QTest::newRow("too small for the vocabulary")
        << "s.txt" << QByteArray("a b c d e f g\n") << "too small for a vocabulary";
    QTest::newRow("unknown kind") << "x.csv" << QByteArray("a,b") << "is neither .txt nor .jsonl";
    QTest::newRow("unknown kind compressed") << "x.csv.gz" << QByteArray("a,b") << "is neither .txt nor .jsonl";
  }
  void badInputIsRefusedAndNothingCreated() {
    QFETCH(QString, file);
    QFETCH(QByteArray, bytes);
    QFETCH(QString, why);
    const QString path = write("bad/" + file, bytes);
    const QString out = "bad-out-" + QString(QTest::currentDataTag()).replace(' ', '-');
    const auto created = createRun(request(path, out), [](const std::string&, double) {});
    QVERIFY(!created.ok());
    QVERIFY2(created.error().find(why.toStdString()) != std::string::npos, created.error().c_str());
    QVERIFY(!QFileInfo::exists(dir_.filePath(out)));
    QVERIFY(!QFileInfo::exists(dir_.filePath(out + ".partial")));
  }

  // A corpus of .gz and .zst files makes the run its plain files make, byte for byte (the
  // tokenizer, the validation text and every shard).
  void compressedCorporaGiveTheSameRun() {
    writeGzip("packed/a.txt.gz", bytesOf(dir_.filePath("corpus/a.txt")));
    writeZstd("packed/sub/b.jsonl.zst", bytesOf(dir_.filePath("corpus/sub/b.jsonl")));
    const auto plain = createRun(request(dir_.filePath("corpus"), "plain/run"), [](const std::string&, double) {});
    const auto packed = createRun(request(dir_.filePath("packed"), "packed/run"), [](const std::string&, double) {});
    QVERIFY2(packed.ok(), packed.ok() ? "" : packed.error().c_str());
    QVERIFY(plain.ok());
    QCOMPARE(packed->shards, plain->shards);
    for (const char* f : {"tokenizer.json", "data/val.bin", "data/train-000.bin", "data/train-001.bin"}) {
      const auto a = bytesOf(dir_.filePath(QString("plain/run/") + f));
      QVERIFY2(!a.isEmpty() && a == bytesOf(dir_.filePath(QString("packed/run/") + f)), f);
    }
  }

  // What comes out of a compressed file is bounded, not what goes in: 4 MiB of one letter gzip to
  // a few KiB and are refused at a 1 MiB bound; the text streams through, never held whole.
  void aDecompressionBombIsRefusedAtTheBound() {
    const QByteArray big(4 << 20, 'a');
    const auto gz = writeGzip("bomb/a.txt.gz", big), zst = writeZstd("bomb/b.txt.zst", big);
    QVERIFY(QFileInfo(gz).size() < 64 * 1024 && QFileInfo(zst).size() < 64 * 1024);
    const auto none = [](double) {};
    for (const auto& path : {gz, zst}) {
      const auto read = measureCorpus({path.toStdString()}, 1 << 20, none);
      QVERIFY(!read.ok());
      QVERIFY2(read.error().find("exceeds 1 MiB") != std::string::npos, read.error().c_str());
      QCOMPARE(*measureCorpus({path.toStdString()}, 8 << 20, none), std::int64_t(big.size()));
    }
  }

  // 150 kB reach the gpu-1b preset's 4096 tokens but hold out too few for one of its 1024-token
  // validation sequences. (Fewer training tokens than one batch is refused too, but no text that
  // reaches a preset's vocabulary is that short.)
  void tooFewTokensAreRefused() {
    auto r = request(write("few/f.txt", someText(150000)), "few-out");
    r.preset = "gpu-1b";
    const auto created = createRun(r, [](const std::string&, double) {});
    QVERIFY(!created.ok());
    QVERIFY2(created.error().find("fewer than one sequence: raise --val-fraction") != std::string::npos,
             created.error().c_str());
    QVERIFY(!QFileInfo::exists(dir_.filePath("few-out")));
  }

  // A prepared folder that is not what its run.json lists is refused, naming the file.
  void aFolderThatDisagreesWithItsManifestIsRefused() {
    QVERIFY(createRun(request(dir_.filePath("corpus"), "tamper/run"), [](const std::string&, double) {}).ok());
    const QString run = dir_.filePath("tamper/run");
    auto manifest = loadRunManifest((run + "/run.json").toStdString());
    QVERIFY(manifest.ok());
    write("tamper/run/notes.txt", "hello");
    auto s = checkPreparedFiles(*manifest, run.toStdString());
    QVERIFY(!s.ok() && s.error().find("\"notes.txt\" is not part of the run") != std::string::npos);
    QFile::remove(run + "/notes.txt");
    QFile shard(run + "/data/train-001.bin");
    QVERIFY(shard.open(QIODevice::Append) && shard.write("xx") == 2);
    shard.close();
    s = checkPreparedFiles(*manifest, run.toStdString());
    QVERIFY2(!s.ok() && s.error().find("\"data/train-001.bin\" has") != std::string::npos,
             s.ok() ? "" : s.error().c_str());
    QFile::remove(run + "/data/train-001.bin");
    s = checkPreparedFiles(*manifest, run.toStdString());
    QVERIFY(!s.ok() && s.error().find("\"data/train-001.bin\" is missing") != std::string::npos);
  }

  // Each peer's shards fit its budget (at least one), are the same on every call, differ between
  // peers, move on with the epoch, and one peer covers every shard in corpus / budget epochs.
  void shardsAreAssignedWithinTheBudgetAndMoveOn() {
    const std::vector<std::int64_t> tokens(40, 1 << 20);  // 40 shards of 2 MiB
    const std::int64_t budget = std::int64_t(9) << 20;    // 4 shards
    std::set<std::vector<int>> distinct;
    for (int p = 0; p < 40; ++p) {
      const std::string peer = "peer-" + std::to_string(p);
      const auto held = assignShards(peer, "run", 0, tokens, budget);
      QCOMPARE(int(held.size()), 4);
      QCOMPARE(held, assignShards(peer, "run", 0, tokens, budget));
      QVERIFY(std::is_sorted(held.begin(), held.end()));
      distinct.insert(held);
      std::set<int> covered;  // over 10 epochs: every shard once
      for (int e = 0; e < 10; ++e) {
        const auto window = assignShards(peer, "run", e, tokens, budget);
        QCOMPARE(int(window.size()), 4);
        covered.insert(window.begin(), window.end());
      }
      QCOMPARE(int(covered.size()), 40);
    }
    QVERIFY(distinct.size() >= 38);
    QCOMPARE(int(assignShards("p", "run", 0, tokens, 1).size()), 1);   // over budget: still one
    QCOMPARE(int(assignShards("p", "run", 0, tokens, 0).size()), 40);  // no budget: all
    QVERIFY(assignShards("p", "run", 0, tokens, budget) != assignShards("p", "run", 1, tokens, budget));
    // An epoch is one pass over its window: 4 shards of 2^20 tokens.
    QCOMPARE(epochAtTokens("p", "run", tokens, budget, 0), std::int64_t(0));
    QCOMPARE(epochAtTokens("p", "run", tokens, budget, (std::int64_t(4) << 20) - 1), std::int64_t(0));
    QCOMPARE(epochAtTokens("p", "run", tokens, budget, std::int64_t(4) << 20), std::int64_t(1));
    QCOMPARE(epochAtTokens("p", "run", tokens, budget, std::int64_t(9) << 21), std::int64_t(4));
    QCOMPARE(epochAtTokens("p", "run", tokens, 0, std::int64_t(1) << 40), std::int64_t(0));  // all held
    // Where each epoch ends, as the rotation checks it each step instead of walking the epochs.
    for (std::int64_t e = 0; e < 12; ++e) {
      const auto end = tokensAtEpochEnd("p", "run", tokens, budget, e);
      QCOMPARE(end, (e + 1) * (std::int64_t(4) << 20));
      QCOMPARE(epochAtTokens("p", "run", tokens, budget, end - 1), e);
      QCOMPARE(epochAtTokens("p", "run", tokens, budget, end), e + 1);
    }
    QCOMPARE(tokensAtEpochEnd("p", "run", tokens, 0, 3), std::numeric_limits<std::int64_t>::max());
  }

  // A copy that holds some shards passes only when asked to allow that, and never with none.
  void aCopyInPartHoldsSomeShards() {
    QVERIFY(createRun(request(dir_.filePath("corpus"), "part/run"), [](const std::string&, double) {}).ok());
    const QString run = dir_.filePath("part/run");
    auto manifest = loadRunManifest((run + "/run.json").toStdString());
    QVERIFY(manifest.ok() && manifest->data.preparedTrainTokens.size() > 2);
    QVERIFY(QFile::remove(run + "/data/train-001.bin"));
    QVERIFY(!checkPreparedFiles(*manifest, run.toStdString()).ok());
    QVERIFY(checkPreparedFiles(*manifest, run.toStdString(), true).ok());
    QCOMPARE(presentShards(*manifest, run.toStdString()).size(), manifest->data.preparedTrainTokens.size() - 1);
    for (std::size_t i = 0; i < manifest->data.preparedTrainTokens.size(); ++i)
      QFile::remove(run + "/data/" + QString::fromStdString(trainShardName(int(i))));
    const auto none = checkPreparedFiles(*manifest, run.toStdString(), true);
    QVERIFY(!none.ok() && none.error().find("no training shard") != std::string::npos);
  }

  void aTorrentListingIsJudgedBeforeAnyFetch_data() {
    using Files = TorrentFiles;
    QTest::addColumn<TorrentFiles>("files");
    QTest::addColumn<QString>("why");
    const Files good{{"run.json", 900}, {"tokenizer.json", 5000}, {"data/val.bin", 1016}, {"data/train-000.bin", 2016}};
    QTest::newRow("a prepared run") << good << "";
    auto gap = good;
    gap.push_back({"data/train-002.bin", 2016});
    QTest::newRow("a gap") << gap << "\"data/train-002.bin\", which is not a file of a prepared run";
    auto odd = good;
    odd[3].second = 2017;
    QTest::newRow("an odd size") << odd << "not a token shard's size";
    auto huge = good;
    huge[1].second = kMaxTokenizerBytes + 1;
    QTest::newRow("a huge tokenizer") << huge << "tokenizer.json of";
    Files many{{"run.json", 900}, {"tokenizer.json", 5000}, {"data/val.bin", 1016}};
    for (int i = 0; i <= kMaxPreparedShards; ++i) many.push_back({"data/" + trainShardName(i), 18});
    QTest::newRow("too many shards") << many << "which is not a file of a prepared run";
    Files heavy{{"run.json", 900}, {"tokenizer.json", 5000}, {"data/val.bin", 1016}};
    for (int i = 0; i < 3; ++i) heavy.push_back({"data/" + trainShardName(i), tokenShardBytes(kMaxShardTokens)});
    QTest::newRow("too many tokens") << heavy << "training tokens";
    QTest::newRow("no run.json") << Files{good.begin() + 1, good.end()} << "no run.json";
  }
  void aTorrentListingIsJudgedBeforeAnyFetch() {
    QFETCH(TorrentFiles, files);
    QFETCH(QString, why);
    const auto problem = QString::fromStdString(preparedTorrentProblem(files));
    if (why.isEmpty())
      QVERIFY2(problem.isEmpty(), qPrintable(problem));
    else
      QVERIFY2(problem.contains(why), qPrintable(problem));
  }

  void aManifestNamesEitherACorpusOrShards() {
    const std::string base = R"({"format": 1, "name": "x", "data": )";
    auto both = parseRunManifest(base + R"({"train_corpus": ["a.txt"], "val_corpus": "v.txt",
        "prepared": {"train_shards": [100], "val_tokens": 100}}})");
    QVERIFY(!both.ok() && both.error().find("not both") != std::string::npos);
    auto noVal = parseRunManifest(base + R"({"prepared": {"train_shards": [100]}}})");
    QVERIFY(!noVal.ok() && noVal.error().find("data.prepared.val_tokens: missing") != std::string::npos);
    auto zero = parseRunManifest(base + R"({"prepared": {"train_shards": [100, 0], "val_tokens": 9}}})");
    QVERIFY2(!zero.ok() && zero.error().find("data.prepared.train_shards[1]") != std::string::npos,
             zero.ok() ? "" : zero.error().c_str());
    auto ok = parseRunManifest(base + R"({"prepared": {"train_shards": [100, 7], "val_tokens": 9}}})");
    QVERIFY2(ok.ok(), ok.ok() ? "" : ok.error().c_str());
    QCOMPARE(ok->data.preparedTrainTokens, (std::vector<std::int64_t>{100, 7}));
  }
};

QTEST_GUILESS_MAIN(RunCreate)
#include "tst_run_create.moc"
