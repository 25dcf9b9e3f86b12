// Where a client keeps its state when --data-dir is not given: ~/.local/share/expertswarm (one
// level). Before, Qt's AppDataLocation with organisation and application both "expertswarm"
// made it ~/.local/share/expertswarm/expertswarm; a folder left there is moved up on first start.
#pragma once

#include <QString>
#include <QStringList>

#include <string>

namespace es::app {

// The data folder: `given` (--data-dir), or the default after moving an old nested one into it
// (once; later calls find nothing to move). What was moved or kept goes to `log`, line by line.
QString dataDirFor(const QString& given, void (*log)(const std::string&));
QString defaultDataDir(QStringList* notes = nullptr);

// `folder`/expertswarm (the old nested folder) moved into `folder`, entry by entry: an entry whose
// name already exists in `folder` stays where it was (nothing is overwritten or lost) and is
// named in the returned notes; the nested folder is removed once empty.
QStringList moveNestedDataDir(const QString& folder);

}  // namespace es::app
