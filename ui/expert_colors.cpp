#include "ui/expert_colors.h"

#include <cmath>
#include <numeric>

namespace es::ui {

namespace {

// A stride coprime to n near n·0.382 (golden section): multiplying by it permutes the hue slots,
// so every hue is used once and consecutive experts land far apart on the colour circle.
int hueStride(int n) {
  int k = std::max(1, static_cast<int>(std::lround(n * 0.382)));
  while (std::gcd(k, n) != 1) ++k;
  return k;
}

}  // namespace

QColor noExpertColor() { return QColor(158, 158, 158); }

QColor expertColor(int expert, int nExperts) {
  if (expert < 0 || nExperts <= 0 || expert >= nExperts) return noExpertColor();
  const int slot = static_cast<int>((static_cast<long long>(expert) * hueStride(nExperts)) % nExperts);
  const int hue = static_cast<int>(std::lround(360.0 * slot / nExperts)) % 360;
  // Past a dozen experts neighbouring hues get hard to tell apart: alternate the value by slot so
  // that hue neighbours still differ in brightness.
  const int value = (nExperts > 12 && slot % 2 == 1) ? 185 : 230;
  return QColor::fromHsv(hue, 170, value);
}

}  // namespace es::ui
