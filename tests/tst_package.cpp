// Issue 7: the Debian package. Builds it with CPack from this build, checks its metadata and
// contents, runs the distribution's own checkers (lintian, desktop-file-validate, appstreamcli,
// systemd-analyze), unpacks it into a throw-away root and runs the installed binary from there:
// it finds its resources in the installed tree, trains a round alone and stops cleanly on SIGTERM.
#include "support/swarm_clients.h"

#include <QDirIterator>
#include <QTemporaryDir>

#include <csignal>

using namespace es::test;

namespace {

struct Run {
  int code = -1;
  QString out;
};

Run run(const QString& program, const QStringList& args, const QString& workDir = {}, int timeoutMs = 600000,
        const QProcessEnvironment& env = QProcessEnvironment::systemEnvironment()) {
  QProcess p;
  p.setProcessEnvironment(env);
  p.setProcessChannelMode(QProcess::MergedChannels);
  if (!workDir.isEmpty()) p.setWorkingDirectory(workDir);
  p.start(program, args);
  if (!p.waitForFinished(timeoutMs)) {
    p.kill();
    p.waitForFinished();
    return {-1, "timed out: " + program};
  }
  return {p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1, QString::fromUtf8(p.readAll())};
}

}  // namespace

class Package : public QObject {
  Q_OBJECT

  QTemporaryDir dir_;
  QString deb_, root_;

 private Q_SLOTS:
  void initTestCase() {
    for (const char* tool : {"dpkg-deb", "lintian", "desktop-file-validate", "appstreamcli"})
      if (QStandardPaths::findExecutable(tool).isEmpty())
        QFAIL(qPrintable(QString("%1 is not installed (scripts/setup installs it)").arg(tool)));
  }

  void cpackMakesADebWithComputedDepends() {
    const auto made = run(ES_CPACK_COMMAND, {"-G", "DEB", "-B", dir_.filePath("out")}, ES_BUILD_DIR);
    QVERIFY2(made.code == 0, qPrintable(made.out));
    QDirIterator it(dir_.filePath("out"), {"*.deb"});
    QVERIFY2(it.hasNext(), qPrintable(made.out));
    deb_ = it.next();
    const auto info = run("dpkg-deb", {"--info", deb_});
    QCOMPARE(info.code, 0);
    qInfo().noquote() << info.out;
    QVERIFY(info.out.contains("Package: expertswarm"));
    // dpkg-shlibdeps read them off the binary: none of these is listed by hand.
    for (const char* dep : {"libtorrent-rasterbar2.0", "libsodium23", "libqt6widgets6", "libqt6charts6", "libsqlite3-0",
                            "qt6-qpa-plugins"})
      QVERIFY2(info.out.contains(dep), dep);
    QVERIFY2(info.out.contains("libtorch"), "LibTorch is not in Depends");
  }

  void debHoldsEveryInstalledFile() {
    QVERIFY(!deb_.isEmpty());
    const auto contents = run("dpkg-deb", {"--contents", deb_});
    QCOMPARE(contents.code, 0);
    for (const char* path :
         {"./usr/bin/expertswarm", "./usr/share/expertswarm/runs/default/run.json",
          "./usr/share/expertswarm/runs/default/data/train-000.bin",
          "./usr/share/expertswarm/runs/default/.run.torrent",
          "./usr/share/expertswarm/runs/sotu-text/corpus/sotu-train.txt", "./usr/share/expertswarm/sql/01-initial.sql",
          "./usr/share/applications/io.github.expertswarm.ExpertSwarm.desktop",
          "./usr/share/metainfo/io.github.expertswarm.ExpertSwarm.metainfo.xml",
          "./usr/share/icons/hicolor/scalable/apps/expertswarm.svg",
          "./usr/share/icons/hicolor/48x48/apps/expertswarm.png",
          "./usr/share/icons/hicolor/256x256/apps/expertswarm.png", "./usr/share/man/man1/expertswarm.1.gz",
          "./usr/lib/systemd/user/expertswarm.service", "./usr/share/doc/expertswarm/copyright",
          "./usr/share/doc/expertswarm/changelog.gz"})
      QVERIFY2(contents.out.contains(QString(" ") + path), path);
    QVERIFY2(!contents.out.contains(" ./home") && !contents.out.contains("/build/"),
             "build paths leaked into the package");
  }

  void lintianFindsNoErrors() {
    QVERIFY(!deb_.isEmpty());
    const auto lint = run("lintian", {"--tag-display-limit", "0", "--display-info", "--info", deb_});
    qInfo().noquote() << "lintian:" << (lint.out.isEmpty() ? "(clean)" : lint.out);
    QStringList errors;
    for (const auto& line : lint.out.split('\n'))
      if (line.startsWith("E: ")) errors << line;
    QVERIFY2(errors.isEmpty(), qPrintable(errors.join('\n')));
    QVERIFY2(lint.code == 0, qPrintable(lint.out));  // 1: errors, 2: lintian itself failed
  }

  void installedFilesPassTheirValidators() {
    QVERIFY(!deb_.isEmpty());
    root_ = dir_.filePath("root");
    QCOMPARE(run("dpkg-deb", {"-x", deb_, root_}).code, 0);
    const auto desktop =
        run("desktop-file-validate", {root_ + "/usr/share/applications/io.github.expertswarm.ExpertSwarm.desktop"});
    QVERIFY2(desktop.code == 0 && desktop.out.trimmed().isEmpty(), qPrintable(desktop.out));
    const auto appstream =
        run("appstreamcli", {"validate", "--no-net", "--pedantic",
                             root_ + "/usr/share/metainfo/io.github.expertswarm.ExpertSwarm.metainfo.xml"});
    QVERIFY2(appstream.code == 0, qPrintable(appstream.out));
    // The user unit: restart on failure, a polite SIGTERM; systemd finds `expertswarm` on its own
    // search path. systemd-analyze checks that the command exists, so the closest check here is
    // the unit with the throw-away root's binary put in.
    QFile unitFile(root_ + "/usr/lib/systemd/user/expertswarm.service");
    QVERIFY(unitFile.open(QIODevice::ReadOnly));
    QString unit = QString::fromUtf8(unitFile.readAll());
    // (Its opt-in flag is the unit's business, not something a test spells: only the headless start.)
    for (const char* line : {"\nExecStart=expertswarm --no-gui ", "\nRestart=on-failure\n", "\nKillSignal=SIGTERM\n",
                             "\nWantedBy=default.target\n"})
      QVERIFY2(unit.contains(line), line);
    if (QStandardPaths::findExecutable("systemd-analyze").isEmpty()) QSKIP("systemd-analyze is not installed");
    unit.replace("\nExecStart=expertswarm ", "\nExecStart=" + root_ + "/usr/bin/expertswarm ");
    QDir().mkpath(dir_.filePath("unit"));
    QFile checked(dir_.filePath("unit/expertswarm.service"));
    QVERIFY(checked.open(QIODevice::WriteOnly));
    checked.write(unit.toUtf8());
    checked.close();
    auto env = QProcessEnvironment::systemEnvironment();
    QDir().mkpath(dir_.filePath("runtime"));
    QFile::setPermissions(dir_.filePath("runtime"), QFile::ReadOwner | QFile::WriteOwner | QFile::ExeOwner);
    env.insert("XDG_RUNTIME_DIR", dir_.filePath("runtime"));  // --user needs one, even offline
    const auto verified = run("systemd-analyze", {"verify", "--user", "--man=no", checked.fileName()}, {}, 60000, env);
    QVERIFY2(verified.code == 0, qPrintable(verified.out));
  }

  void installedBinaryRunsFromItsOwnTree() {
    QVERIFY(!root_.isEmpty());
    const QString binary = root_ + "/usr/bin/expertswarm";
    const auto version = run(binary, {"--version"});
    QCOMPARE(version.code, 0);
    QVERIFY2(version.out.startsWith("expertswarm "), qPrintable(version.out));
    const auto help = run(binary, {"--no-gui", "--help"});
    QCOMPARE(help.code, 0);
    QVERIFY(help.out.contains("--no-gui"));
    const auto man = run("man", {"-l", "-Tutf8", root_ + "/usr/share/man/man1/expertswarm.1.gz"});
    if (man.code == 0) QVERIFY(man.out.contains("SIGTERM"));

    // It looks for the bundled run in its own tree (root/usr/share/expertswarm), not the source's:
    // with the installed run.json moved away it names the installed path.
    const QString runJson = root_ + "/usr/share/expertswarm/runs/default/run.json";
    QVERIFY(QFile::rename(runJson, runJson + ".away"));
    const auto missing =
        run(binary, {"--no-gui", "--data-dir", dir_.filePath("data-missing"), "--listen", "127.0.0.1:0"});
    QVERIFY(QFile::rename(runJson + ".away", runJson));
    QCOMPARE(missing.code, 2);
    QVERIFY2(missing.out.contains(root_ + "/usr/bin/../share/expertswarm/runs/default"), qPrintable(missing.out));

    // Alone on the default run with a fresh data dir.
    auto env = QProcessEnvironment::systemEnvironment();
    env.insert("HOME", dir_.filePath("home"));
    SwarmClient client("installed", binary,
                       {"--no-gui", "--data-dir", dir_.filePath("data"), "--listen", "127.0.0.1:0", "--sync-every", "5",
                        "--threads", "2"},
                       env);
    const bool trained = waitUntil([&] { return client.rounds().count(1) > 0 || !client.running(); }, 300000);
    qInfo().noquote() << client.log().join("\n  ");
    QVERIFY2(trained && client.running(), "the installed client did not train round 1");
    client.terminate();  // SIGTERM
    QVERIFY2(waitUntil([&] { return !client.running(); }, 120000), "no exit after SIGTERM");
    QVERIFY2(client.finishedWith(0), "SIGTERM must end with exit code 0");
    QVERIFY(client.logContains("Stopping: finishing the step"));
    QVERIFY(client.logContains("Summary: rounds="));
  }
};

QTEST_GUILESS_MAIN(Package)
#include "tst_package.moc"
