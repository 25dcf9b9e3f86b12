// The colour of each expert, shared by every view that shows experts (peer map pies, expert map
// cells) so that one expert reads as the same colour everywhere in the GUI.
#pragma once

#include <QColor>

namespace es::ui {

// A stable colour for `expert` of a run with `nExperts` experts: hues spread evenly over the
// circle, visited with a stride so that neighbouring expert indices get far-apart hues (claims are
// often contiguous, and their pie slices sit side by side). Grey for -1 ("no claims") and for an
// index outside the run.
QColor expertColor(int expert, int nExperts);

// The grey used for "no expert".
QColor noExpertColor();

}  // namespace es::ui
