#include "support/memory_swarm_folders.h"

#include <QCryptographicHash>
#include <QDir>
#include <QDirIterator>
#include <QFile>
#include <QFileInfo>

#include <algorithm>

namespace es::node::memory_folders {

FetchLimits::FolderFiles listFiles(const QString& folder) {
  FetchLimits::FolderFiles files;
  const QDir root(folder);
  for (QDirIterator it(folder, QDir::Files | QDir::Hidden, QDirIterator::Subdirectories); it.hasNext();) {
    const QFileInfo f(it.next());
    files.emplace_back(root.relativeFilePath(f.filePath()).toStdString(), f.size());
  }
  std::sort(files.begin(), files.end());
  return files;
}

Expected<ContentId> folderId(const QString& folder) {
  QCryptographicHash hash(QCryptographicHash::Sha256);
  for (const auto& [path, size] : listFiles(folder)) {
    hash.addData(QByteArray::fromStdString(path + '\0' + std::to_string(size) + '\0'));
    QFile file(QDir(folder).filePath(QString::fromStdString(path)));
    if (!file.open(QIODevice::ReadOnly) || !hash.addData(&file))
      return makeError("cannot read \"" + file.fileName().toStdString() + "\"");
  }
  return ContentId(hash.result().toHex().toStdString());
}

FolderFetch plan(const QString& folder, const FetchLimits& limits) {
  FolderFetch out;
  const auto files = listFiles(folder);
  if (limits.any() && !limits.folder) {  // limits of one file: a folder is not what was predicted
    out.refused = "a folder of " + std::to_string(files.size()) + " files, not one file";
    return out;
  }
  if (limits.folder) out.refused = limits.folder(QFileInfo(folder).fileName().toStdString(), files);
  if (!out.refused.empty()) return out;
  if (limits.folderWanted) {
    out.wanted = limits.folderWanted(files);
  } else {
    for (const auto& [path, size] : files) out.wanted.insert(path);
  }
  return out;
}

Expected<std::string> copyInto(const QString& folder, const std::string& dir, const std::set<std::string>& wanted) {
  const QDir to(QDir(QString::fromStdString(dir)).filePath(QFileInfo(folder).fileName()));
  for (const auto& path : wanted) {
    const QString target = to.filePath(QString::fromStdString(path));
    QDir().mkpath(QFileInfo(target).path());
    QFile::remove(target);
    if (!QFile::copy(QDir(folder).filePath(QString::fromStdString(path)), target))
      return makeError("cannot copy " + path + " to " + target.toStdString());
  }
  return to.path().toStdString();
}

}  // namespace es::node::memory_folders
