// ExpertSwarm ▸ Create a run… (issue 40, ui/create_run_dialog.h): the dialog runs the real
// `expertswarm create-run`, its bar follows the command's progress to 100 %, and it shows the
// magnet link the command printed — the run id a host of that folder serves. A corpus that is no
// corpus shows the command's reason and creates nothing.
#include "ui/create_run_dialog.h"

#include <QDir>
#include <QFile>
#include <QLabel>
#include <QProgressBar>
#include <QTemporaryDir>
#include <QtTest>

namespace {
// Before QTEST_MAIN's QApplication: these tests need no display, whoever runs them.
[[maybe_unused]] const bool kOffscreen = [] {
  if (!qEnvironmentVariableIsSet("QT_QPA_PLATFORM")) qputenv("QT_QPA_PLATFORM", "offscreen");
  return true;
}();
}  // namespace

using es::ui::CreateRunDialog;

class UiCreateRun : public QObject {
  Q_OBJECT

  QTemporaryDir dir_;

  static bool finish(CreateRunDialog& dialog) {
    return QTest::qWaitFor([&] { return !dialog.running(); }, 120000);
  }

 private Q_SLOTS:
  void aRunIsCreatedWithProgressAndItsLink() {
    const QString corpus = dir_.filePath("texts");
    QVERIFY(QDir().mkpath(corpus));
    QVERIFY(QFile::copy(ES_SHARE_DIR "/runs/sotu-text/corpus/sotu-train.txt", corpus + "/a.txt"));
    CreateRunDialog dialog(ES_CLIENT_BINARY);
    QSignalSpy created(&dialog, &CreateRunDialog::created);
    int highest = 0, updates = 0;
    connect(dialog.progress(), &QProgressBar::valueChanged, this, [&](int v) {
      highest = std::max(highest, v);
      ++updates;
    });
    dialog.setForm(corpus, dir_.filePath("gui-run"), "tiny");
    dialog.create();
    QVERIFY(dialog.running());
    QVERIFY(finish(dialog));
    QVERIFY2(created.count() == 1, qPrintable(dialog.status()->text()));
    QCOMPARE(highest, 100);
    QVERIFY(updates >= 4);  // the bar moved with the command's stages, not only at the end
    QVERIFY(dialog.magnetLink().startsWith("magnet:?xt=urn:btmh:1220"));
    QCOMPARE(created.at(0).at(1).toString(), dialog.magnetLink());
    QVERIFY(QFileInfo(dir_.filePath("gui-run/run.json")).isFile());
    QVERIFY(QFileInfo(dir_.filePath("gui-run/data/train-000.bin")).isFile());
  }

  void aCorpusThatIsNoCorpusIsToldAndNothingCreated() {
    const QString empty = dir_.filePath("nothing");
    QVERIFY(QDir().mkpath(empty));
    CreateRunDialog dialog(ES_CLIENT_BINARY);
    QSignalSpy created(&dialog, &CreateRunDialog::created);
    dialog.setForm(empty, dir_.filePath("no-run"), "tiny");
    dialog.create();
    QVERIFY(finish(dialog));
    QCOMPARE(created.count(), 0);
    QVERIFY2(dialog.status()->text().contains("the corpus has no .txt or .jsonl file"),
             qPrintable(dialog.status()->text()));
    QVERIFY(dialog.magnetLink().isEmpty());
    QVERIFY(!QFileInfo::exists(dir_.filePath("no-run")));
  }
};

QTEST_MAIN(UiCreateRun)
#include "tst_ui_create_run.moc"
