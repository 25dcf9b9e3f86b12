#include "core/common/openmp_policy.h"

#include <unistd.h>
#include <cstdlib>

namespace es {

void ensurePassiveOpenMpWaits(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr) return;
  ::setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
  ::execv("/proc/self/exe", argv);
}

}  // namespace es
