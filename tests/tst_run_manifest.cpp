// A run's manifest may be a stranger's (joined by magnet link): names that are paths, corpus
// files outside the run, FIFOs, huge corpora and out-of-range policy values are refused with the
// field named, before anything is created or read.
#ifndef Q_MOC_RUN  // moc need not parse LibTorch
#include "core/train/corpus_prep.h"
#include "core/train/prepared_run.h"
#include "core/train/run_manifest.h"
#endif

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QtTest>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <future>

using namespace es::train;

namespace {

// The bundled corpus as a text run (the settings' template), and the default run created from it.
const QString kBundledRun = QStringLiteral(ES_SHARE_DIR "/runs/sotu-text");
const QString kDefaultRun = QStringLiteral(ES_SHARE_DIR "/runs/default");

QJsonObject bundledManifest() {
  QFile file(kBundledRun + "/run.json");
  if (!file.open(QIODevice::ReadOnly)) return {};
  return QJsonDocument::fromJson(file.readAll()).object();
}

// The bundled manifest with the value at a dotted path ("swarm.deadline.factor") replaced.
QJsonObject withValue(QJsonObject object, const QStringList& path, const QJsonValue& value) {
  if (path.size() == 1) {
    object.insert(path.first(), value);
    return object;
  }
  object.insert(path.first(), withValue(object.value(path.first()).toObject(), path.mid(1), value));
  return object;
}

QJsonObject bundledWith(const QString& dottedPath, const QJsonValue& value) {
  return withValue(bundledManifest(), dottedPath.split('.'), value);
}

std::string text(const QJsonObject& manifest) { return QJsonDocument(manifest).toJson().toStdString(); }

bool writeFile(const QString& path, const QByteArray& bytes) {
  QFile file(path);
  return file.open(QIODevice::WriteOnly) && file.write(bytes) == bytes.size();
}

}  // namespace

class RunManifestTest : public QObject {
  Q_OBJECT

  QTemporaryDir dir_;
  QString source_, runDir_;

  // A run folder holding `manifest` and a small corpus (corpus/a.txt, corpus/b.txt).
  void makeSource(const QJsonObject& manifest) {
    QVERIFY(QDir().mkpath(source_ + "/corpus"));
    QVERIFY(writeFile(source_ + "/run.json", QByteArray::fromStdString(text(manifest))));
    QVERIFY(writeFile(source_ + "/corpus/a.txt", "some text\n"));
    QVERIFY(writeFile(source_ + "/corpus/b.txt", "more text\n"));
  }

  // prepareRunData on the source folder: must fail naming `field`, and leave no run folder.
  void expectRefusedWithNothingCreated(const QString& field) {
    const auto prepared = prepareRunData(source_.toStdString(), runDir_.toStdString(), [](const std::string&) {});
    QVERIFY(!prepared.ok());
    QVERIFY2(prepared.error().find(field.toStdString()) != std::string::npos, prepared.error().c_str());
    QVERIFY2(!QFileInfo::exists(runDir_), "the run folder was created for a refused manifest");
  }

  QJsonObject withCorpus(const QString& train) {
    return withValue(bundledManifest(), {"data", "train_corpus"}, QJsonArray{train});
  }

 private Q_SLOTS:
  void init() {
    QVERIFY(dir_.isValid());
    source_ = dir_.filePath(QString("source-%1").arg(QTest::currentDataTag() ? QTest::currentDataTag() : "x"));
    source_.replace(' ', '_');
    runDir_ = dir_.filePath("runs/the-run");
    QDir(source_).removeRecursively();
    QDir(dir_.filePath("runs")).removeRecursively();
  }

  // Issue 39: "sparse" with its settings; the header's codec name is sparse/<keep>/<chunk>, the
  // one es_sync parses (sync::parseSparseCodec, tst_sparse_codec).
  void aSparseRunNamesItsContributionCodec() {
    auto manifest = bundledWith("swarm.compression", "sparse");
    auto m = parseRunManifest(text(manifest));
    QVERIFY2(m.ok(), m.ok() ? "" : m.error().c_str());
    QCOMPARE(m->swarm.contributionCodec(), std::string("sparse/128/4096"));
    QCOMPARE(m->swarm.feedbackDecay, 0.9);
    manifest =
        withValue(manifest, {"swarm", "sparse"}, QJsonObject{{"keep", 64}, {"chunk", 2048}, {"feedback_decay", 0.8}});
    m = parseRunManifest(text(manifest));
    QVERIFY2(m.ok(), m.ok() ? "" : m.error().c_str());
    QCOMPARE(m->swarm.contributionCodec(), std::string("sparse/64/2048"));
    QCOMPARE(m->swarm.feedbackDecay, 0.8);
    m = parseRunManifest(text(bundledWith("swarm.compression", "int8")));
    QCOMPARE(m->swarm.contributionCodec(), std::string("int8"));
  }

  void bundledManifestParsesAndItsCorpusPasses() {
    auto m = loadRunManifest((kBundledRun + "/run.json").toStdString());
    QVERIFY2(m.ok(), m.ok() ? "" : m.error().c_str());
    QCOMPARE(m->name, std::string("sotu-default"));
    QCOMPARE(m->swarm.syncEvery, 50);
    QCOMPARE(m->swarm.expertsPerPeer, 2);
    QCOMPARE(m->swarm.deadlineMinSeconds, 30.0);
    QCOMPARE(m->swarm.warmupAlpha0, 0.5);                   // not the default 0: read from the file
    QCOMPARE(m->swarm.compression, std::string("sparse"));  // issue 39: the default run's codec
    QCOMPARE(m->swarm.contributionCodec(), std::string("sparse/128/4096"));
    const auto corpus = checkCorpusFiles(*m, kBundledRun.toStdString(), {});
    QVERIFY2(corpus.ok(), corpus.ok() ? "" : corpus.error().c_str());
  }

  // Issue 40 item 4: the default run is a created run of the same corpus, model and settings: its
  // tokenizer and shards are, byte for byte, what a text run of the bundled corpus tokenizes, so
  // the default path (no tokenizing at start, shards fetched by magnet) trains on the same data.
  void theDefaultRunIsTheBundledCorpusCreated() {
    auto text = loadRunManifest((kBundledRun + "/run.json").toStdString());
    auto created = loadRunManifest((kDefaultRun + "/run.json").toStdString());
    QVERIFY2(created.ok(), created.ok() ? "" : created.error().c_str());
    QVERIFY(created->data.prepared());
    QVERIFY(checkPreparedFiles(*created, kDefaultRun.toStdString()).ok());
    QCOMPARE(created->name, text->name);
    QCOMPARE(created->seed, text->seed);
    QVERIFY(created->model.toJson() == text->model.toJson());
    QCOMPARE(created->train.batchSize, text->train.batchSize);
    QCOMPARE(created->train.totalSteps, text->train.totalSteps);
    QCOMPARE(created->swarm.syncEvery, text->swarm.syncEvery);
    QCOMPARE(created->swarm.compression, text->swarm.compression);
    QVERIFY(prepareRunData(kBundledRun.toStdString(), runDir_.toStdString(), [](const std::string&) {}).ok());
    const auto bytes = [](const QString& path) {
      QFile f(path);
      return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray("(missing)");
    };
    QCOMPARE(bytes(kDefaultRun + "/tokenizer.json"), bytes(runDir_ + "/tokenizer.json"));
    QCOMPARE(bytes(kDefaultRun + "/data/val.bin"), bytes(runDir_ + "/data/val.bin"));
    const int shards = int(created->data.preparedTrainTokens.size());
    QCOMPARE(QDir(runDir_ + "/data").entryList({"train-*.bin"}, QDir::Files).size(), shards);
    for (int i = 0; i < shards; ++i) {
      const QString name = QString::fromStdString("/data/" + trainShardName(i));
      QVERIFY2(bytes(kDefaultRun + name) == bytes(runDir_ + name), qPrintable(name));
    }
  }

  void runNamesThatArePathsAreRefused_data() {
    QTest::addColumn<QString>("name");
    QTest::newRow("parent") << "../x";
    QTest::newRow("slash") << "a/b";
    QTest::newRow("65 chars") << QString(65, 'a');
    QTest::newRow("dot") << ".";
    QTest::newRow("dotdot") << "..";
    QTest::newRow("space") << "a b";
  }
  void runNamesThatArePathsAreRefused() {
    QFETCH(QString, name);
    const auto m = parseRunManifest(text(bundledWith("name", name)));
    QVERIFY(!m.ok());
    QVERIFY2(m.error().find("name") != std::string::npos, m.error().c_str());
    makeSource(bundledWith("name", name));
    expectRefusedWithNothingCreated("name");
  }

  void theLongestNameAndEveryAllowedCharacterPass() {
    QVERIFY(parseRunManifest(text(bundledWith("name", QString(64, 'z')))).ok());
    QVERIFY(parseRunManifest(text(bundledWith("name", "Run_1.2-b"))).ok());
  }

  void corpusPathsThatLeaveTheRunAreRefused_data() {
    QTest::addColumn<QString>("field");
    QTest::addColumn<QString>("path");
    QTest::newRow("absolute") << "data.train_corpus"
                              << "/etc/passwd";
    QTest::newRow("climbs out") << "data.train_corpus"
                                << "corpus/../../x";
    QTest::newRow("device") << "data.train_corpus"
                            << "/dev/zero";
    QTest::newRow("val absolute") << "data.val_corpus"
                                  << "/etc/passwd";
    QTest::newRow("val parent") << "data.val_corpus"
                                << "../run.json";
  }
  void corpusPathsThatLeaveTheRunAreRefused() {
    QFETCH(QString, field);
    QFETCH(QString, path);
    const auto manifest = field == "data.val_corpus" ? bundledWith(field, path) : withCorpus(path);
    const auto m = parseRunManifest(text(manifest));
    QVERIFY(!m.ok());
    QVERIFY2(m.error().find(field.toStdString()) != std::string::npos, m.error().c_str());
    makeSource(manifest);
    expectRefusedWithNothingCreated(field);
  }

  void aSymlinkOutOfTheRunFolderIsRefused() {
    QVERIFY(writeFile(dir_.filePath("secret"), "id_ed25519\n"));
    makeSource(withCorpus("corpus/link.txt"));
    QVERIFY(QFile::link(dir_.filePath("secret"), source_ + "/corpus/link.txt"));
    expectRefusedWithNothingCreated("data.train_corpus[0]");
  }

  void aSymlinkToADeviceIsRefused() {
    makeSource(withCorpus("corpus/zero"));
    QVERIFY(QFile::link("/dev/zero", source_ + "/corpus/zero"));
    expectRefusedWithNothingCreated("data.train_corpus[0]");
  }

  void aDirectoryIsRefused() {
    makeSource(withCorpus("corpus"));
    expectRefusedWithNothingCreated("data.train_corpus[0]");
  }

  void aFifoIsRefusedWithoutBeingOpened() {
    makeSource(withCorpus("corpus/fifo"));
    const QByteArray fifo = (source_ + "/corpus/fifo").toLocal8Bit();
    QCOMPARE(::mkfifo(fifo.constData(), 0600), 0);
    auto prepared = std::async(std::launch::async, [this] {
      return prepareRunData(source_.toStdString(), runDir_.toStdString(), [](const std::string&) {});
    });
    if (prepared.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
      // It blocked opening the FIFO: a writer releases it (then EOF) so the test can fail cleanly.
      const int writer = ::open(fifo.constData(), O_WRONLY | O_NONBLOCK);
      if (writer >= 0) ::close(writer);
      prepared.wait();
      QFAIL("prepareRunData opened the FIFO and blocked");
    }
    const auto result = prepared.get();
    QVERIFY(!result.ok());
    QVERIFY2(result.error().find("data.train_corpus[0]") != std::string::npos, result.error().c_str());
    QVERIFY(!QFileInfo::exists(runDir_));
  }

  void aCorpusOverTheCapIsRefused() {
    makeSource(withCorpus("corpus/huge.txt"));
    QFile huge(source_ + "/corpus/huge.txt");
    QVERIFY(huge.open(QIODevice::WriteOnly));
    QVERIFY(huge.resize(kMaxCorpusBytes + 1));  // sparse: nothing is written
    huge.close();
    expectRefusedWithNothingCreated("data.train_corpus[0]");
  }

  void aMissingCorpusFileIsRefused() {
    makeSource(withCorpus("corpus/absent.txt"));
    expectRefusedWithNothingCreated("data.train_corpus[0]");
  }

  // The layout of a run joined by magnet link: run.json beside a link to the bundled corpus.
  void aLinkToTheAllowedCorpusFolderIsPreparedAndOnlyThere() {
    QVERIFY(QDir().mkpath(source_));
    QVERIFY(QFile::copy(kBundledRun + "/run.json", source_ + "/run.json"));
    QVERIFY(QFile::link(kBundledRun + "/corpus", source_ + "/corpus"));
    expectRefusedWithNothingCreated("outside the run folder");  // without the allowance
    const auto prepared = prepareRunData(
        source_.toStdString(), runDir_.toStdString(), [](const std::string&) {},
        (kBundledRun + "/corpus").toStdString());
    QVERIFY2(prepared.ok(), prepared.ok() ? "" : prepared.error().c_str());
    QVERIFY(QFileInfo::exists(runDir_ + "/prepared.json"));
  }

  void policyValuesOutOfBoundsAreRefused_data() {
    QTest::addColumn<QString>("field");
    QTest::addColumn<QJsonValue>("value");
    QTest::newRow("sync_every zero") << "swarm.sync_every" << QJsonValue(0);
    QTest::newRow("sync_every negative") << "swarm.sync_every" << QJsonValue(-50);
    QTest::newRow("sync_every huge") << "swarm.sync_every" << QJsonValue(qint64(1) << 40);
    QTest::newRow("sync_every fraction") << "swarm.sync_every" << QJsonValue(2.5);
    QTest::newRow("sync_every string") << "swarm.sync_every" << QJsonValue("50");
    QTest::newRow("experts_per_peer zero") << "swarm.experts_per_peer" << QJsonValue(0);
    QTest::newRow("experts_per_peer > n_experts") << "swarm.experts_per_peer" << QJsonValue(9);
    QTest::newRow("lease_rounds zero") << "swarm.lease_rounds" << QJsonValue(0);
    QTest::newRow("lease_rounds huge") << "swarm.lease_rounds" << QJsonValue(1e9);
    QTest::newRow("snapshot_every negative") << "swarm.snapshot_every" << QJsonValue(-1);
    QTest::newRow("quorum zero") << "swarm.quorum" << QJsonValue(0);
    QTest::newRow("compression unknown") << "swarm.compression" << QJsonValue("zip");
    QTest::newRow("compression a header's sparse name") << "swarm.compression" << QJsonValue("sparse/128/4096");
    QTest::newRow("sparse not an object") << "swarm.sparse" << QJsonValue(128);
    QTest::newRow("sparse keep zero") << "swarm.sparse.keep" << QJsonValue(0);
    QTest::newRow("sparse keep over chunk") << "swarm.sparse.keep" << QJsonValue(8192);
    QTest::newRow("sparse chunk over int16") << "swarm.sparse.chunk" << QJsonValue(65536);
    QTest::newRow("sparse decay zero") << "swarm.sparse.feedback_decay" << QJsonValue(0);
    QTest::newRow("sparse decay above one") << "swarm.sparse.feedback_decay" << QJsonValue(1.5);
    QTest::newRow("sparse unknown key") << "swarm.sparse.bits" << QJsonValue(2);
    QTest::newRow("deadline not an object") << "swarm.deadline" << QJsonValue(5);
    QTest::newRow("deadline factor zero") << "swarm.deadline.factor" << QJsonValue(0);
    QTest::newRow("deadline factor huge") << "swarm.deadline.factor" << QJsonValue(1e300);
    QTest::newRow("deadline min negative") << "swarm.deadline.min_seconds" << QJsonValue(-5);
    QTest::newRow("deadline max huge") << "swarm.deadline.max_seconds" << QJsonValue(1e12);
    QTest::newRow("deadline max below min") << "swarm.deadline.max_seconds" << QJsonValue(10);
    QTest::newRow("warmup interval zero") << "swarm.merge_warmup.interval" << QJsonValue(0);
    QTest::newRow("warmup alpha0 above one") << "swarm.merge_warmup.alpha0" << QJsonValue(2);
    QTest::newRow("warmup decay negative") << "swarm.merge_warmup.decay_steps" << QJsonValue(-1000);
    QTest::newRow("warmup topk zero") << "swarm.merge_warmup.topk" << QJsonValue(0);
    QTest::newRow("aggregate rule unknown") << "swarm.aggregate.rule" << QJsonValue("median");
    QTest::newRow("aggregate rule not a string") << "swarm.aggregate.rule" << QJsonValue(1);
    QTest::newRow("clip iterations zero") << "swarm.aggregate.clip_iterations" << QJsonValue(0);
    QTest::newRow("clip iterations huge") << "swarm.aggregate.clip_iterations" << QJsonValue(1000000);
    // 31 bits would keep a newcomer hashing ~6 minutes, 60 for good: a stranger's run cannot do that.
    QTest::newRow("identity work over 30 bits") << "swarm.identity_work_bits" << QJsonValue(31);
    QTest::newRow("identity work negative") << "swarm.identity_work_bits" << QJsonValue(-1);
    QTest::newRow("identity work fractional") << "swarm.identity_work_bits" << QJsonValue(8.5);
    const QString id(40, 'a');
    QTest::newRow("anchors not a list") << "swarm.anchors" << QJsonValue(id);
    QTest::newRow("anchor not hex") << "swarm.anchors" << QJsonValue(QJsonArray{QString(40, 'g')});
    QTest::newRow("anchor upper case") << "swarm.anchors" << QJsonValue(QJsonArray{QString(40, 'A')});
    QTest::newRow("anchor too short") << "swarm.anchors" << QJsonValue(QJsonArray{QString(39, 'a')});
    QTest::newRow("anchor twice") << "swarm.anchors" << QJsonValue(QJsonArray{id, id});
    QJsonArray seventeen;
    for (int i = 0; i < 17; ++i) seventeen.append(QString(39, 'a') + QString::number(i % 10));
    QTest::newRow("17 anchors") << "swarm.anchors" << QJsonValue(seventeen);
    QTest::newRow("clip tau factor zero") << "swarm.aggregate.clip_tau_factor" << QJsonValue(0);
    QTest::newRow("clip tau factor huge") << "swarm.aggregate.clip_tau_factor" << QJsonValue(1e300);
    QTest::newRow("unknown aggregate key") << "swarm.aggregate.trim" << QJsonValue(0.1);
    QTest::newRow("outer lr zero") << "swarm.outer_step.lr" << QJsonValue(0);
    QTest::newRow("outer lr above 2") << "swarm.outer_step.lr" << QJsonValue(2.5);
    QTest::newRow("outer momentum 1") << "swarm.outer_step.momentum" << QJsonValue(1.0);
    QTest::newRow("outer momentum negative") << "swarm.outer_step.momentum" << QJsonValue(-0.1);
    QTest::newRow("outer on unknown") << "swarm.outer_step.on" << QJsonValue("router");
    QTest::newRow("outer step not an object") << "swarm.outer_step" << QJsonValue(0.7);
    QTest::newRow("reduction replicas zero") << "swarm.reduction.replicas" << QJsonValue(0);
    QTest::newRow("reduction replicas 17") << "swarm.reduction.replicas" << QJsonValue(17);
    QTest::newRow("reduction audits negative") << "swarm.reduction.audits" << QJsonValue(-1);
    QTest::newRow("reduction audits 65") << "swarm.reduction.audits" << QJsonValue(65);
    QTest::newRow("shard from every reducer") << "swarm.reduction.shard_from" << QJsonValue(3);
    QTest::newRow("shard from negative") << "swarm.reduction.shard_from" << QJsonValue(-4);
    QTest::newRow("unknown reduction key") << "swarm.reduction.mode" << QJsonValue("ring");
    QTest::newRow("reduction not an object") << "swarm.reduction" << QJsonValue(3);
    QTest::newRow("unknown swarm key") << "swarm.gossip_every" << QJsonValue(3);
    QTest::newRow("unknown deadline key") << "swarm.deadline.median" << QJsonValue(3);
    QTest::newRow("d_model huge") << "model.d_model" << QJsonValue(1 << 20);
    QTest::newRow("n_layers huge") << "model.n_layers" << QJsonValue(100000);
    QTest::newRow("n_experts huge") << "model.n_experts" << QJsonValue(1 << 20);
    QTest::newRow("seq_len huge") << "model.seq_len" << QJsonValue(1 << 20);
    QTest::newRow("expert_hidden huge") << "model.expert_hidden" << QJsonValue(1 << 24);
    QTest::newRow("vocab_size huge") << "model.vocab_size" << QJsonValue(1 << 20);
    QTest::newRow("batch_size zero") << "train.batch_size" << QJsonValue(0);
    QTest::newRow("batch_size huge") << "train.batch_size" << QJsonValue(1 << 20);
    QTest::newRow("tokens per step") << "train.batch_size" << QJsonValue(4096);  // × seq_len 256 > 2^17
    QTest::newRow("total_steps zero") << "train.total_steps" << QJsonValue(0);
    QTest::newRow("eval_batches huge") << "train.eval_batches" << QJsonValue(1 << 20);
    QTest::newRow("shard_tokens huge") << "data.shard_tokens" << QJsonValue(qint64(1) << 40);
  }
  void policyValuesOutOfBoundsAreRefused() {
    QFETCH(QString, field);
    QFETCH(QJsonValue, value);
    const auto manifest = bundledWith(field, value);
    const auto m = parseRunManifest(text(manifest));
    QVERIFY(!m.ok());
    // The error names the field: its dotted path (model errors name the key after "model: ").
    const QString named = field.startsWith("model.") ? field.mid(6) : field;
    QVERIFY2(m.error().find(named.toStdString()) != std::string::npos, m.error().c_str());
    makeSource(manifest);
    expectRefusedWithNothingCreated(named);
  }

  void theAggregateIsReadAndDefaultsToCenteredClipping() {
    const auto absent = parseRunManifest(text(bundledManifest()));
    QVERIFY(absent.ok());
    QCOMPARE(absent->swarm.aggregate, std::string("centered_clip"));
    const auto mean = parseRunManifest(text(bundledWith("swarm.aggregate.rule", "mean")));
    QVERIFY(mean.ok());
    QCOMPARE(mean->swarm.aggregate, std::string("mean"));
    auto manifest = bundledWith("swarm.aggregate.rule", "centered_clip");
    manifest = withValue(manifest, {"swarm", "aggregate", "clip_iterations"}, 5);
    const auto m = parseRunManifest(text(withValue(manifest, {"swarm", "aggregate", "clip_tau_factor"}, 2.5)));
    QVERIFY2(m.ok(), m.ok() ? "" : m.error().c_str());
    QCOMPARE(m->swarm.aggregate, std::string("centered_clip"));
    QCOMPARE(m->swarm.clipIterations, 5);
    QCOMPARE(m->swarm.clipTauFactor, 2.5);
  }

  // Issue 18: the outer Nesterov step is read; absent, the merge is SPES's plain one.
  void theOuterStepIsReadAndAbsentMeansPlain() {
    const auto absent = parseRunManifest(text(bundledManifest()));
    QVERIFY(absent.ok());
    QCOMPARE(absent->swarm.outerLr, 1.0);
    QCOMPARE(absent->swarm.outerMomentum, 0.0);
    auto manifest = bundledWith("swarm.outer_step.lr", 0.7);
    manifest = withValue(manifest, {"swarm", "outer_step", "momentum"}, 0.9);
    const auto m = parseRunManifest(text(withValue(manifest, {"swarm", "outer_step", "on"}, "all")));
    QVERIFY2(m.ok(), m.ok() ? "" : m.error().c_str());
    QCOMPARE(m->swarm.outerLr, 0.7);
    QCOMPARE(m->swarm.outerMomentum, 0.9);
    QCOMPARE(m->swarm.outerOn, std::string("all"));
  }

  // Issue 38: the sharded reduction's settings; absent, 3 reducers, 1 audit, by the byte model.
  void theReductionIsReadAndAbsentMeansByTheBytes() {
    const auto absent = parseRunManifest(text(bundledManifest()));
    QVERIFY(absent.ok());
    QCOMPARE(absent->swarm.reductionReplicas, 3);
    QCOMPARE(absent->swarm.reductionAudits, 1);
    QCOMPARE(absent->swarm.shardFrom, 0);
    auto manifest = bundledWith("swarm.compression", "int8");  // the bundled run is sparse: never sharded
    manifest = withValue(manifest, {"swarm", "reduction", "replicas"}, 2);
    manifest = withValue(manifest, {"swarm", "reduction", "audits"}, 5);
    const auto m = parseRunManifest(text(withValue(manifest, {"swarm", "reduction", "shard_from"}, 6)));
    QVERIFY2(m.ok(), m.ok() ? "" : m.error().c_str());
    QCOMPARE(m->swarm.reductionReplicas, 2);
    QCOMPARE(m->swarm.reductionAudits, 5);
    QCOMPARE(m->swarm.shardFrom, 6);
    QCOMPARE(absent->swarm.compression, std::string("sparse"));
    const auto refused = parseRunManifest(text(bundledWith("swarm.reduction.shard_from", 6)));
    QVERIFY(!refused.ok() && refused.error().find("sparse run is never sharded") != std::string::npos);
  }

  void anchorsAreRead() {
    const QString a(40, 'a'), b = QString(39, 'b') + "0";
    const auto m = parseRunManifest(text(bundledWith("swarm.anchors", QJsonArray{a, b})));
    QVERIFY2(m.ok(), m.ok() ? "" : m.error().c_str());
    QCOMPARE(m->swarm.anchors, (std::vector<std::string>{a.toStdString(), b.toStdString()}));
    QVERIFY(parseRunManifest(text(bundledManifest()))->swarm.anchors.empty());
  }

  void identityWorkBitsAreReadAndDefaultTo22() {
    const auto absent = parseRunManifest(text(bundledManifest()));
    QVERIFY(absent.ok());
    QCOMPARE(absent->swarm.identityWorkBits, 22);
    for (const int bits : {0, 16, 30}) {
      const auto m = parseRunManifest(text(bundledWith("swarm.identity_work_bits", bits)));
      QVERIFY2(m.ok(), m.ok() ? "" : m.error().c_str());
      QCOMPARE(m->swarm.identityWorkBits, bits);
    }
  }

  // Issue 37 item 6: a joined run's manifest is a stranger's file; it is read and parsed only up to
  // kMaxRunManifestBytes (a 1 GiB sparse file is refused from its first 64 KiB + 1 bytes).
  void aManifestOverItsSizeBoundIsRefused() {
    QByteArray bytes = QByteArray::fromStdString(text(bundledManifest()));
    bytes.append(QByteArray(int(kMaxRunManifestBytes) - bytes.size(), ' '));  // valid JSON, at the bound
    QVERIFY(QDir().mkpath(source_));
    QVERIFY(writeFile(source_ + "/run.json", bytes));
    QVERIFY2(loadRunManifest((source_ + "/run.json").toStdString()).ok(), "a manifest at the bound");
    QVERIFY(writeFile(source_ + "/run.json", bytes + " "));
    const auto over = loadRunManifest((source_ + "/run.json").toStdString());
    QVERIFY(!over.ok());
    QVERIFY2(over.error().find("65536 bytes a run.json may have") != std::string::npos, over.error().c_str());
    QVERIFY(!parseRunManifest((bytes + " ").toStdString()).ok());
    QVERIFY(QFile::resize(source_ + "/run.json", qint64(1) << 30));
    expectRefusedWithNothingCreated("65536 bytes a run.json may have");
  }

  void aModelOverTheParameterCapIsRefused() {
    auto manifest = bundledWith("model.d_model", 8192);
    manifest = withValue(manifest, {"model", "n_layers"}, 256);
    manifest = withValue(manifest, {"model", "n_heads"}, 64);
    const auto m = parseRunManifest(text(manifest));
    QVERIFY(!m.ok());
    QVERIFY2(m.error().find("parameters") != std::string::npos, m.error().c_str());
  }
};

QTEST_GUILESS_MAIN(RunManifestTest)
#include "tst_run_manifest.moc"
