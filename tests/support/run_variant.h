// Benches' runs: the bundled run's text form (share/expertswarm/runs/sotu-text) written into a
// folder of its own with a narrower model (`tiny`: a quarter as wide, half as deep) and/or another
// swarm.compression (issue 39: "sparse"). A run of its own id, so it never meets the bundled one.
#pragma once

#include <QDir>
#include <QFile>
#include <QJsonDocument>
#include <QJsonObject>
#include <QString>

namespace es::test {

// The folder to pass as --run: "default" (the bundled run) when nothing changes (an empty
// `compression` is the bundled run's), else `dir`
// with its run.json and a link to the bundled corpus; empty when it cannot be written.
inline QString runVariant(const QString& dir, bool tiny, const QString& compression) {
  QFile source(QStringLiteral(ES_SHARE_DIR "/runs/sotu-text/run.json"));
  if (!source.open(QIODevice::ReadOnly)) return {};
  auto manifest = QJsonDocument::fromJson(source.readAll()).object();
  auto swarm = manifest.value("swarm").toObject();
  const bool sameCompression = compression.isEmpty() || swarm.value("compression").toString() == compression;
  if (!tiny && sameCompression) return QStringLiteral("default");
  if (!QDir().mkpath(dir)) return {};
  if (tiny) {
    auto model = manifest.value("model").toObject();
    model.insert("d_model", 64);
    model.insert("n_layers", 2);
    model.insert("n_heads", 2);
    model.insert("expert_hidden", 128);
    manifest.insert("model", model);
  }
  if (!sameCompression) swarm.insert("compression", compression);
  manifest.insert("swarm", swarm);
  manifest.insert("name", QString("sotu-%1-%2").arg(tiny ? "tiny" : "default", swarm.value("compression").toString()));
  QFile out(dir + "/run.json");
  if (!out.open(QIODevice::WriteOnly)) return {};
  out.write(QJsonDocument(manifest).toJson());
  QFile::link(QStringLiteral(ES_SHARE_DIR "/runs/sotu-text/corpus"), dir + "/corpus");
  return dir;
}

}  // namespace es::test
