// Small helpers shared by the node's source files (private to core/node).
#pragma once

#include "core/common/ids.h"

#include <QString>
#include <QStringList>
#include <QVariantList>

#include <algorithm>
#include <string>
#include <vector>

namespace es::node::detail {

inline QString q(const std::string& s) { return QString::fromStdString(s); }
template <class Tag>
QString q(const HexName<Tag>& name) {
  return q(name.str());
}

// A content id becomes a folder name: only what an info-hash (or the sha256 of the tests' MemorySwarm,
// tests/support/memory_swarm.h) can be.
inline bool isSafeId(const std::string& id) {
  return !id.empty() && id.size() <= 64 &&
         std::all_of(id.begin(), id.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

template <class Tag>
bool isSafeId(const HexName<Tag>& name) {
  return isSafeId(name.str());
}

inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

inline QString joinInts(const std::vector<int>& values) {
  QStringList parts;
  for (int v : values) parts << QString::number(v);
  return parts.join(',');
}

// Expert numbers as a QVariantList: a field of Node::noted.
// Ids for a log line: the first 16 characters of each.
inline QString joinedIds(const std::vector<std::string>& ids) {
  QStringList out;
  for (const auto& id : ids) out << q(id).left(16);
  return out.join(", ");
}

inline QVariantList expertList(const std::vector<int>& values) {
  QVariantList out;
  for (int v : values) out << v;
  return out;
}

}  // namespace es::node::detail
