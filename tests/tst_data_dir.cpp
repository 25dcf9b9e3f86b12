// The default data folder is one level (~/.local/share/expertswarm), and a folder left at the old
// nested place (…/expertswarm/expertswarm) is moved up on first start with nothing lost: entries
// that exist at both places stay apart, and a second start finds nothing to move.
#include "app/data_dir.h"

#include <QDir>
#include <QFile>
#include <QTemporaryDir>
#include <QtTest>

class DataDir : public QObject {
  Q_OBJECT

  static bool write(const QString& path, const QByteArray& bytes) {
    QDir().mkpath(QFileInfo(path).path());
    QFile f(path);
    return f.open(QIODevice::WriteOnly) && f.write(bytes) == bytes.size();
  }
  static QByteArray read(const QString& path) {
    QFile f(path);
    return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray("(missing)");
  }

 private Q_SLOTS:
  void theDefaultIsOneLevelAndTheOldFolderMovesUp() {
    QTemporaryDir home;
    qputenv("XDG_DATA_HOME", home.path().toUtf8());
    const QString old = home.filePath("expertswarm/expertswarm");
    QVERIFY(write(old + "/identity.key", "key"));
    QVERIFY(write(old + "/expertswarm.db", "ledger"));
    QVERIFY(write(old + "/runs/abc/state/round-3/x", "state"));
    QStringList notes;
    const QString dir = es::app::defaultDataDir(&notes);
    QCOMPARE(dir, home.filePath("expertswarm"));
    QCOMPARE(read(dir + "/identity.key"), QByteArray("key"));
    QCOMPARE(read(dir + "/expertswarm.db"), QByteArray("ledger"));
    QCOMPARE(read(dir + "/runs/abc/state/round-3/x"), QByteArray("state"));
    QVERIFY2(!QFileInfo::exists(old), "the old nested folder is still there");
    QVERIFY2(notes.join('\n').contains("moved 3 entries"), qPrintable(notes.join('\n')));
    notes.clear();
    QCOMPARE(es::app::defaultDataDir(&notes), dir);  // second start: nothing to do
    QVERIFY2(notes.isEmpty(), qPrintable(notes.join('\n')));
  }

  void anEntryAtBothPlacesIsKeptApartNotOverwritten() {
    QTemporaryDir home;
    const QString folder = home.filePath("expertswarm");
    QVERIFY(write(folder + "/identity.key", "new key"));
    QVERIFY(write(folder + "/expertswarm/identity.key", "old key"));
    QVERIFY(write(folder + "/expertswarm/runs/r/run.json", "{}"));
    const QStringList notes = es::app::moveNestedDataDir(folder);
    QCOMPARE(read(folder + "/identity.key"), QByteArray("new key"));
    QCOMPARE(read(folder + "/expertswarm/identity.key"), QByteArray("old key"));  // kept, and said
    QCOMPARE(read(folder + "/runs/r/run.json"), QByteArray("{}"));
    QVERIFY2(notes.join('\n').contains("kept \"" + folder + "/expertswarm/identity.key\""),
             qPrintable(notes.join('\n')));
  }

  void noNestedFolderMeansNothingHappens() {
    QTemporaryDir home;
    const QString folder = home.filePath("expertswarm");
    QVERIFY(write(folder + "/identity.key", "key"));
    QVERIFY(es::app::moveNestedDataDir(folder).isEmpty());
    QCOMPARE(read(folder + "/identity.key"), QByteArray("key"));
  }
};

QTEST_GUILESS_MAIN(DataDir)
#include "tst_data_dir.moc"
