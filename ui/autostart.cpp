#include "ui/autostart.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QSaveFile>
#include <QStandardPaths>
#include <QTextStream>

namespace es::ui {

namespace {

// One Exec argument under the Desktop Entry spec: arguments with reserved characters are quoted
// (escaping " ` $ \ inside), then the whole value is string-escaped (\ → \\), and % is doubled
// because %f, %u… are field codes.
QString execArgument(const QString& arg) {
  static const QString reserved = QStringLiteral(" \t\n\"'\\><~|&;$*?#()`");
  QString out = arg;
  bool quote = out.isEmpty();
  for (const QChar c : out) quote = quote || reserved.contains(c);
  if (quote) {
    QString escaped;
    for (const QChar c : out) {
      if (c == QLatin1Char('"') || c == QLatin1Char('`') || c == QLatin1Char('$') || c == QLatin1Char('\\'))
        escaped += QLatin1Char('\\');
      escaped += c;
    }
    out = QLatin1Char('"') + escaped + QLatin1Char('"');
  }
  out.replace(QLatin1Char('\\'), QLatin1String("\\\\"));
  out.replace(QLatin1Char('%'), QLatin1String("%%"));
  return out;
}

}  // namespace

QString autostartEntryPath() {
  return QStandardPaths::writableLocation(QStandardPaths::GenericConfigLocation) +
         QLatin1String("/autostart/expertswarm.desktop");
}

QString setStartAtLogin(bool enabled, const QString& executable) {
  const QString path = autostartEntryPath();
  if (!enabled) {
    if (!QFile::exists(path) || QFile::remove(path)) return {};
    return QStringLiteral("Could not remove %1.").arg(QDir::toNativeSeparators(path));
  }
  if (executable.trimmed().isEmpty()) return QStringLiteral("Cannot start at login: the program's path is unknown.");

  const QString dir = QFileInfo(path).absolutePath();
  if (!QDir().mkpath(dir)) return QStringLiteral("Could not create %1.").arg(QDir::toNativeSeparators(dir));
  // QSaveFile: a crash mid-write leaves the previous entry, never half a file the desktop chokes on.
  QSaveFile file(path);
  if (!file.open(QIODevice::WriteOnly | QIODevice::Text))
    return QStringLiteral("Could not write %1: %2").arg(QDir::toNativeSeparators(path), file.errorString());
  QTextStream out(&file);
  out << "[Desktop Entry]\n"
      << "Type=Application\n"
      << "Name=ExpertSwarm\n"
      << "Comment=Donate this computer's spare time to train a language model with other volunteers\n"
      << "Exec=" << execArgument(executable) << "\n"
      << "Icon=expertswarm\n"
      << "Terminal=false\n"
      << "X-GNOME-Autostart-enabled=true\n";
  out.flush();
  if (out.status() != QTextStream::Ok || !file.commit())
    return QStringLiteral("Could not write %1: %2").arg(QDir::toNativeSeparators(path), file.errorString());
  return {};
}

bool startsAtLogin() {
  QFile file(autostartEntryPath());
  if (!file.open(QIODevice::ReadOnly | QIODevice::Text)) return false;
  // Desktops disable an entry rather than delete it (their own settings panels do so); honour that.
  while (!file.atEnd()) {
    const QString line = QString::fromUtf8(file.readLine()).trimmed();
    if (line.compare(QLatin1String("Hidden=true"), Qt::CaseInsensitive) == 0) return false;
    if (line.compare(QLatin1String("X-GNOME-Autostart-enabled=false"), Qt::CaseInsensitive) == 0) return false;
  }
  return true;
}

}  // namespace es::ui
