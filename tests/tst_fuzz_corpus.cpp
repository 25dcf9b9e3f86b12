// Replays the fuzz corpora (tests/fuzz/corpus/<target>/) through the fuzz targets themselves,
// compiled here with the normal compiler (ES_FUZZ_REPLAY, see tests/fuzz/fuzz_target.h). No input
// may crash; every seed-* file must still be accepted (so a parser that starts refusing valid
// input fails here) and every crash-* file — an input that once crashed or hung a parser — must
// be refused.
#include <QDir>
#include <QFile>
#include <QtTest>

#include <cstddef>
#include <cstdint>

bool esFuzzAccepts_safetensors(const std::uint8_t* data, std::size_t size);
bool esFuzzAccepts_contribution(const std::uint8_t* data, std::size_t size);
bool esFuzzAccepts_peer_record(const std::uint8_t* data, std::size_t size);
bool esFuzzAccepts_gossip(const std::uint8_t* data, std::size_t size);
bool esFuzzAccepts_run_manifest(const std::uint8_t* data, std::size_t size);
bool esFuzzAccepts_work_ledger(const std::uint8_t* data, std::size_t size);

using Accepts = bool (*)(const std::uint8_t*, std::size_t);
Q_DECLARE_METATYPE(Accepts)

class TestFuzzCorpus : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void replay_data() {
    QTest::addColumn<QString>("target");
    QTest::addColumn<Accepts>("accepts");
    QTest::newRow("safetensors") << "safetensors" << Accepts(&esFuzzAccepts_safetensors);
    QTest::newRow("contribution") << "contribution" << Accepts(&esFuzzAccepts_contribution);
    QTest::newRow("peer_record") << "peer_record" << Accepts(&esFuzzAccepts_peer_record);
    QTest::newRow("gossip") << "gossip" << Accepts(&esFuzzAccepts_gossip);
    QTest::newRow("run_manifest") << "run_manifest" << Accepts(&esFuzzAccepts_run_manifest);
    QTest::newRow("work_ledger") << "work_ledger" << Accepts(&esFuzzAccepts_work_ledger);
  }

  void replay() {
    QFETCH(QString, target);
    QFETCH(Accepts, accepts);
    const QDir dir(QStringLiteral(ES_TEST_SOURCE_DIR "/fuzz/corpus/") + target);
    const QStringList files = dir.entryList(QDir::Files, QDir::Name);
    int seeds = 0;
    for (const QString& name : files) {
      QFile file(dir.filePath(name));
      QVERIFY2(file.open(QIODevice::ReadOnly), qPrintable(name));
      const QByteArray bytes = file.readAll();
      const bool accepted =
          accepts(reinterpret_cast<const std::uint8_t*>(bytes.constData()), std::size_t(bytes.size()));
      if (name.startsWith(QLatin1String("seed-"))) {
        ++seeds;
        QVERIFY2(accepted, qPrintable(name + " is a valid seed but was refused"));
      } else if (name.startsWith(QLatin1String("crash-"))) {
        QVERIFY2(!accepted, qPrintable(name + " once crashed the parser and must be refused"));
      }
    }
    QVERIFY2(seeds > 0, qPrintable("no seed-* files in " + dir.path()));
    qInfo("%s: %d files, %d seeds", qPrintable(target), int(files.size()), seeds);
  }
};

QTEST_GUILESS_MAIN(TestFuzzCorpus)
#include "tst_fuzz_corpus.moc"
