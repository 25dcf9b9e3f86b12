// What a node decided, as it noted it (Node::noted: a kind and typed fields): tests assert on
// these decisions, not on the wording of the log lines beside them.
#pragma once

#include <QList>
#include <QString>
#include <QStringList>
#include <QVariantMap>

#include <functional>

namespace es::test {

struct NodeNote {
  QString kind;
  QVariantMap fields;
};

class NodeNotes {
 public:
  void add(const QString& kind, const QVariantMap& fields) { notes_.push_back({kind, fields}); }
  // The notes of `kind` whose fields hold every field of `match` (numbers compare by value).
  QList<NodeNote> of(const QString& kind, const QVariantMap& match = {}) const {
    QList<NodeNote> out;
    for (const auto& n : notes_)
      if (n.kind == kind && holds(n.fields, match)) out.push_back(n);
    return out;
  }
  bool has(const QString& kind, const QVariantMap& match = {}) const { return !of(kind, match).isEmpty(); }
  int count(const QString& kind, const QVariantMap& match = {}) const { return int(of(kind, match).size()); }
  const QList<NodeNote>& all() const { return notes_; }  // in the order noted
  // Every note as "kind(round N)", in order: what a failing check prints, so that a run that took
  // an unusual path says which one.
  QString trail() const {
    QStringList out;
    for (const auto& n : notes_)
      out << (n.fields.contains("round") ? QString("%1(round %2)").arg(n.kind, n.fields.value("round").toString())
                                         : n.kind);
    return out.join(", ");
  }
  // Some note of `kind` for which `test` holds.
  bool any(const QString& kind, const std::function<bool(const QVariantMap&)>& test) const {
    for (const auto& n : notes_)
      if (n.kind == kind && test(n.fields)) return true;
    return false;
  }

 private:
  static bool holds(const QVariantMap& fields, const QVariantMap& match) {
    for (auto it = match.begin(); it != match.end(); ++it)
      if (!fields.contains(it.key()) || fields.value(it.key()) != it.value()) return false;
    return true;
  }
  QList<NodeNote> notes_;
};

}  // namespace es::test
