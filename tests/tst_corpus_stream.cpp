// create-run's corpus as a stream (issue 40; core/train/corpus_text.h, corpus_split.h): the text
// that comes out is the documents joined by a blank line whatever the chunks it is read in, bad
// bytes are named at their offset, the tokenizer's sample spreads over a large text in whole
// characters, and the shards of a corpus decode back to exactly its training text (nothing lost
// or repeated where slices, chunks or shards meet). No Torch.
#include "core/train/corpus_split.h"
#include "core/train/corpus_text.h"
#include "core/train/prepared_run.h"
#include "core/train/run_create.h"
#include "core/train/run_manifest.h"
#include "core/train/token_shard.h"

#include <QDir>
#include <QFile>
#include <QTemporaryDir>
#include <QtTest>

#include <zlib.h>

#include <regex>

using namespace es::train;

class CorpusStreamTest : public QObject {
  Q_OBJECT

  QTemporaryDir dir_;

  std::string write(const QString& name, const QByteArray& bytes) {
    const QString path = dir_.filePath(name);
    QDir().mkpath(QFileInfo(path).path());
    QFile f(path);
    if (!f.open(QIODevice::WriteOnly) || f.write(bytes) != bytes.size()) qFatal("cannot write %s", qPrintable(path));
    return path.toStdString();
  }
  std::string writeGzip(const QString& name, const QByteArray& text) {
    const std::string path = dir_.filePath(name).toStdString();
    gzFile f = gzopen(path.c_str(), "wb");
    if (!f || gzwrite(f, text.constData(), unsigned(text.size())) != text.size() || gzclose(f) != Z_OK)
      qFatal("cannot gzip %s", path.c_str());
    return path;
  }
  static std::string readAll(const QString& path) {
    QFile f(path);
    if (!f.open(QIODevice::ReadOnly)) qFatal("cannot read %s", qPrintable(path));
    return f.readAll().toStdString();
  }
  // Three-byte characters every few bytes, so that reads of 4 KiB end inside one.
  static QByteArray multibyteText(int lines) {
    QByteArray text;
    for (int i = 0; i < lines; ++i) text += "línea " + QByteArray::number(i) + ": 日本語 — naïve 🙂 text\n";
    return text;
  }
  static es::Expected<std::string> streamed(const std::vector<std::string>& files, std::size_t want) {
    CorpusStream stream(files);
    std::string out;
    for (;;) {
      auto more = stream.next(out, want);
      if (!more) return es::makeError(more.error());
      if (!*more) return out;
    }
  }

 private Q_SLOTS:
  void theTextIsTheSameInAnyChunks() {
    const QByteArray a = multibyteText(900), c = multibyteText(300);
    QByteArray jsonl;
    QList<QByteArray> docs;
    for (int i = 0; i < 400; ++i) {
      docs << (i % 50 == 7 ? QByteArray() : "doc " + QByteArray::number(i) + " — 日本語 " + QByteArray(i % 97, 'x'));
      jsonl += "{\"text\": \"" + docs.back() + "\", \"id\": " + QByteArray::number(i) + "}\n";
      if (i % 60 == 3) jsonl += "   \n";  // a blank line: no document
    }
    const std::vector<std::string> files{write("s/a.txt", a), write("s/b.jsonl", jsonl), write("s/empty.txt", {}),
                                         writeGzip("s/c.txt.gz", c)};
    std::string want = a.toStdString();
    for (const auto& d : docs)
      if (!d.isEmpty()) want += "\n\n" + d.toStdString();
    want += "\n\n" + c.toStdString();
    for (const std::size_t chunk : {std::size_t(1), std::size_t(7), std::size_t(4096), std::size_t(1) << 20}) {
      const auto got = streamed(files, chunk);
      QVERIFY2(got.ok(), got.ok() ? "" : got.error().c_str());
      QVERIFY2(*got == want, qPrintable(QStringLiteral("read in chunks of %1").arg(chunk)));
    }
  }

  void aBadByteIsNamedAtItsOffset_data() {
    QTest::addColumn<QByteArray>("bytes");
    QTest::addColumn<QString>("name");
    QTest::addColumn<QString>("error");
    const QByteArray text = multibyteText(400);  // ~20 KB: the bad byte lies past several reads
    QTest::newRow("an invalid byte") << text + "\xff tail" << QStringLiteral("bad.txt")
                                     << QStringLiteral("invalid byte at offset %1").arg(text.size());
    QTest::newRow("a character cut at the end") << text + "\xe6\x97" << QStringLiteral("cut.txt")
                                                << QStringLiteral("invalid byte at offset %1").arg(text.size());
    QTest::newRow("an invalid byte in a line")
        << QByteArray(
               "{\"text\": \"ok\"}\n{\"text\": \"b\xc0\xaf"
               "d\"}\n")
        << QStringLiteral("bad.jsonl") << QStringLiteral("invalid byte at offset 26");
    QTest::newRow("a line that is not a document")
        << QByteArray("{\"text\": \"ok\"}\n\n[1, 2]\n") << QStringLiteral("arr.jsonl") << QStringLiteral("line 3:");
  }
  void aBadByteIsNamedAtItsOffset() {
    QFETCH(QByteArray, bytes);
    QFETCH(QString, name);
    QFETCH(QString, error);
    const auto got = streamed({write("bad/" + name, bytes)}, 1000);
    QVERIFY(!got.ok());
    QVERIFY2(QString::fromStdString(got.error()).contains(error), got.error().c_str());
    QVERIFY2(QString::fromStdString(got.error()).contains(name), got.error().c_str());
  }

  // Above its bound the tokenizer's sample is pieces from all over the training text, in whole
  // characters; at or below it the training text itself.
  void theSampleSpreadsOverALargeText() {
    const QByteArray text = multibyteText(60000);  // ~3 MB
    const auto file = write("big/a.txt", text);
    const auto none = [](double) {};
    const auto whole = splitCorpus({file}, text.size(), 0.01, false, none);
    QVERIFY(whole.ok());
    QCOMPARE(text.at(int(whole->trainEnd) - 1), '\n');
    QVERIFY(whole->trainEnd <= text.size() - text.size() / 100 && whole->trainEnd > text.size() * 0.98);
    QVERIFY(whole->sample == text.left(int(whole->trainEnd)).toStdString());
    const auto spread = splitCorpus({file}, text.size(), 0.01, false, none, 64 << 10);
    QVERIFY(spread.ok());
    QCOMPARE(spread->trainEnd, whole->trainEnd);
    QVERIFY(spread->sample.size() <= std::size_t(64 << 10) + 2 * 1024);
    QVERIFY(spread->sample.size() > std::size_t(60 << 10));
    QCOMPARE(firstInvalidUtf8(spread->sample), std::int64_t(-1));
    QVERIFY(spread->sample.find("línea 0:") != std::string::npos);
    // The last piece begins 1023/1024 of the way into the training text (its last ~60 lines).
    QVERIFY(std::regex_search(spread->sample, std::regex("línea 59[0-9]{3}:")));
  }

  // The bundled corpus (10.7 MB: several 4 MiB slices, hundreds of 4 KiB reads) with its
  // validation text given apart: the shards decode to the training text byte for byte, the
  // validation shard to the validation text.
  void theShardsDecodeToTheCorpus() {
    const QString corpus = QStringLiteral(ES_SHARE_DIR "/runs/sotu-text/corpus/");
    QFile t(ES_SHARE_DIR "/runs/sotu-text/run.json");
    QVERIFY(t.open(QIODevice::ReadOnly));
    CreateRunRequest r;
    r.corpus = {(corpus + "sotu-train.txt").toStdString()};
    r.valCorpus = {(corpus + "sotu-val.txt").toStdString()};
    r.out = dir_.filePath("decoded").toStdString();
    r.manifestTemplate = t.readAll().toStdString();
    r.preset = "tiny";
    r.shardTokens = 100000;
    const auto created = createRun(r, [](const std::string&, double) {});
    QVERIFY2(created.ok(), created.ok() ? "" : created.error().c_str());
    auto tokenizer = BpeTokenizer::load(created->dir + "/tokenizer.json");
    QVERIFY(tokenizer.ok());
    std::vector<TokenId> train;
    for (int i = 0; i < created->shards; ++i) {
      auto shard = readTokenShard(created->dir + "/data/" + trainShardName(i));
      QVERIFY(shard.ok());
      if (i + 1 < created->shards) QCOMPARE(shard->size(), std::size_t(100000));
      train.insert(train.end(), shard->begin(), shard->end());
    }
    QVERIFY(tokenizer->decode(train) == readAll(corpus + "sotu-train.txt"));
    auto val = readTokenShard(created->dir + "/data/val.bin");
    QVERIFY(val.ok());
    QVERIFY(tokenizer->decode({val->begin(), val->end()}) == readAll(corpus + "sotu-val.txt"));
    r.out = dir_.filePath("twice").toStdString();
    r.valCorpus = r.corpus;
    const auto twice = createRun(r, [](const std::string&, double) {});
    QVERIFY(!twice.ok());
    QVERIFY2(twice.error().find("part of the training corpus") != std::string::npos, twice.error().c_str());
  }
};

QTEST_GUILESS_MAIN(CorpusStreamTest)
#include "tst_corpus_stream.moc"
