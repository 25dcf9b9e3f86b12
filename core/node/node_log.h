// How the node's parts speak: a line for people (Node::message) and a typed fact for programs
// and tests (Node::noted: kind + fields). The node wires both to its signals; its parts hold a
// const reference and never emit signals of their own.
#pragma once

#include <QString>
#include <QVariantMap>

#include <functional>

namespace es::node {

struct NodeLog {
  std::function<void(const QString& line)> say;
  std::function<void(const QString& kind, const QVariantMap& fields)> note;
};

}  // namespace es::node
