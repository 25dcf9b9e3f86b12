// "Start ExpertSwarm when I log in" on Linux desktops: an XDG autostart entry,
// $XDG_CONFIG_HOME/autostart/expertswarm.desktop (~/.config by default), written or removed when
// the donor flips the setting. The freedesktop.org Autostart spec is honoured by GNOME, KDE, Xfce
// and the others, so one file covers them all.
#pragma once

#include <QString>

namespace es::ui {

// Where the entry lives (whether or not it exists).
QString autostartEntryPath();

// Writes (atomically) or removes the entry; "" on success, otherwise what went wrong.
QString setStartAtLogin(bool enabled, const QString& executable);

// Whether an entry exists and is not disabled (Hidden=true or X-GNOME-Autostart-enabled=false).
bool startsAtLogin();

}  // namespace es::ui
