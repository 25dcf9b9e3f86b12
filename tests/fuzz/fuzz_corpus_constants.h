// Shared by the fuzz targets and the seed generator (make_seeds.cpp): the seeds are real records
// of this run, so the targets must expect the same one.
#pragma once

namespace es::fuzz {
constexpr const char* kRunId = "5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed";
}
