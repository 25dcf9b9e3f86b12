// Which contributions a merged state was made of (docs/ARCHITECTURE.md, "Agreement": repair).
// Every record names, beside the fingerprint of each state its peer merged, a digest of the set
// of contributions that state was merged from (the `sets` field). A peer that merged a round into
// another state (a deadline closed it with another set) finds the majority's set among the
// contributions it knows by this digest, and merges that set again instead of downloading a
// snapshot: the round's merge is a pure function of base and set, so it lands on the same bytes.
#pragma once

#include "core/common/ids.h"

#include <optional>
#include <set>
#include <string>

namespace es::node {

// 64-bit FNV-1a over the sorted content ids, one per line, as 16 hex digits. Not cryptographic
// (core/ has no libsodium) and it need not be: a set found by a forged digest is merged only if
// the result has the fingerprint the majority reports (SpesPeer::remerge checks it).
std::string mergedSetDigest(const std::set<ContentId>& contents);

// The subset of `candidates` whose digest is `digest`: all of them, or all but up to `maxMissing`
// (the majority merged what reached it before its deadline; we may know of a few more). Tries
// the larger sets first. Nothing when none matches, or when there are more than 64 candidates
// (the search is C(n, ≤ maxMissing) digests: 2,081 for 64 and 2).
std::optional<std::set<ContentId>> findMergedSet(const std::set<ContentId>& candidates, const std::string& digest,
                                                 int maxMissing = 2);

}  // namespace es::node
