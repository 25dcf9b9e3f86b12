// Test fixture: the bundled default run, prepared (tokenizer + shards) once per test process in
// a temporary folder, from the build tree's share/expertswarm/runs/sotu-text.
#pragma once

#include "core/train/corpus_prep.h"

#include <QTemporaryDir>
#include <QtTest>

#include <memory>

namespace es::test {

inline const train::RunData& defaultRunData() {
  static std::unique_ptr<QTemporaryDir> dir;
  static std::unique_ptr<train::RunData> data;
  if (!data) {
    dir = std::make_unique<QTemporaryDir>();
    const std::string runDir = dir->path().toStdString() + "/run";
    auto prepared = train::prepareRunData(ES_SHARE_DIR "/runs/sotu-text", runDir, [](const std::string&) {});
    if (!prepared) qFatal("preparing the default run failed: %s", prepared.error().c_str());
    auto loaded = train::loadRunData(runDir);
    if (!loaded) qFatal("loading the default run failed: %s", loaded.error().c_str());
    data = std::make_unique<train::RunData>(std::move(*loaded));
  }
  return *data;
}

}  // namespace es::test
