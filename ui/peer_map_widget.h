// A painted map of the run's peers as this peer sees them: one disc per peer on a circle (ourselves
// at the top), split into pie slices in the colours of the experts it claims, and arrows for the
// checkpoint transfers moving right now. It answers "who is out there, who trains what, and who am
// I exchanging weights with" at a glance; the PeersView table next to it carries the numbers.
#pragma once

#include "core/node/node_reports.h"

#include <QHash>
#include <QPointF>
#include <QString>
#include <QStringList>
#include <QWidget>

#include <cstdint>
#include <vector>

namespace es::ui {

class PeerMapWidget : public QWidget {
  Q_OBJECT

 public:
  explicit PeerMapWidget(QWidget* parent = nullptr);

  void showSwarm(const es::node::SwarmView& view);

  int peerCount() const;                           // peers drawn (self included)
  QStringList peerIds() const;                     // in drawing order, self first
  int edgeCount() const;                           // transfer edges drawn at the moment
  QString toolTipAt(const QPoint& pos) const;      // what the tooltip would say at pos ("" = none)
  QPoint peerCenter(const QString& peerId) const;  // centre of a peer's disc (invalid point if absent)

  QSize sizeHint() const override;
  QSize minimumSizeHint() const override;

 protected:
  bool event(QEvent* event) override;
  void paintEvent(QPaintEvent* event) override;

 private:
  struct Edge {
    int from = 0;  // index into peers_
    int to = 0;
    bool upload = false;  // we send (dashed) rather than receive (solid)
  };
  struct Disc {
    QPointF center;
    qreal radius = 0;
  };

  // Disc positions for the current widget size; recomputed on demand so resizes need no bookkeeping.
  std::vector<Disc> layoutDiscs() const;
  int peerAt(const QPoint& pos) const;

  std::vector<es::node::PeerView> peers_;  // self first
  std::vector<Edge> edges_;
  int nExperts_ = 0;
  QHash<QString, std::int64_t> lastUploaded_;  // contentId → uploadedBytes in the previous view
};

}  // namespace es::ui
