// libgomp reads OMP_WAIT_POLICY once, when it is loaded (before main). Spin-waiting OpenMP threads
// made 2 threads slower than 1 on a shared 2-core machine (docs/PERFORMANCE.md), so training
// processes re-execute themselves once with the passive policy unless the user chose one.
#pragma once

namespace es {

// Call first thing in main(). Returns only if no re-exec was needed (or it failed: then the
// process runs with the default policy).
void ensurePassiveOpenMpWaits(char** argv);

}  // namespace es
