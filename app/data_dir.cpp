#include "app/data_dir.h"

#include <QDir>
#include <QFileInfo>
#include <QStandardPaths>

namespace es::app {

namespace {
const QString kName = QStringLiteral("expertswarm");
}

QStringList moveNestedDataDir(const QString& folder) {
  QStringList notes;
  QDir nested(folder + QLatin1Char('/') + kName);
  if (!QFileInfo(nested.path()).isDir() || QFileInfo(nested.path()).isSymLink()) return notes;
  const auto entries = nested.entryList(QDir::AllEntries | QDir::Hidden | QDir::System | QDir::NoDotAndDotDot);
  int moved = 0;
  for (const QString& entry : entries) {
    const QString to = folder + QLatin1Char('/') + entry;
    // An entry named like the nested folder itself cannot move up onto it; one that exists above
    // is the newer state's: both stay, and the user is told.
    if (entry == kName || QFileInfo::exists(to) || !QDir().rename(nested.filePath(entry), to)) {
      notes << QStringLiteral("data folder: kept \"%1\" where it was (\"%2\" exists or cannot be written)")
                   .arg(nested.filePath(entry), to);
      continue;
    }
    ++moved;
  }
  if (moved > 0)
    notes
        << QStringLiteral("data folder: moved %1 entries from \"%2\" to \"%3\"").arg(moved).arg(nested.path(), folder);
  nested.rmdir(nested.path());  // only if empty
  return notes;
}

QString defaultDataDir(QStringList* notes) {
  const QString folder =
      QStandardPaths::writableLocation(QStandardPaths::GenericDataLocation) + QLatin1Char('/') + kName;
  const QStringList said = moveNestedDataDir(folder);
  if (notes) *notes << said;
  return folder;
}

QString dataDirFor(const QString& given, void (*log)(const std::string&)) {
  if (!given.isEmpty()) return given;
  QStringList notes;
  const QString dir = defaultDataDir(&notes);
  for (const QString& line : notes) log(line.toStdString());
  return dir;
}

}  // namespace es::app
