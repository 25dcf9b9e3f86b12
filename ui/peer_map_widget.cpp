#include "ui/peer_map_widget.h"

#include "ui/expert_colors.h"

#include <QHelpEvent>
#include <QPainter>
#include <QPainterPath>
#include <QToolTip>

#include <algorithm>
#include <cmath>

namespace es::ui {

namespace {

constexpr qreal kPi = 3.14159265358979323846;
const QColor kDownloadColor(33, 113, 201);
const QColor kUploadColor(46, 150, 84);
const QColor kBannedColor(205, 40, 40);

QString shortId(const std::string& id) { return QString::fromStdString(id).left(8); }

QString joinExperts(const std::vector<int>& experts) {
  QStringList parts;
  for (int e : experts) parts << QString::number(e);
  return parts.join(QStringLiteral(", "));
}

// A line from disc a to disc b, clipped to their rims, with an arrow head at b (the receiver). It is
// shifted a few pixels to its own left, so a download and an upload between the same two peers
// (opposite directions) run side by side instead of on top of each other.
void drawArrow(QPainter& p, QPointF a, qreal ra, QPointF b, qreal rb) {
  const QPointF d = b - a;
  const qreal len = std::hypot(d.x(), d.y());
  if (len <= ra + rb + 4) return;
  const QPointF u = d / len;
  const QPointF n(-u.y(), u.x());
  const qreal shift = std::min<qreal>(4, std::min(ra, rb) * 0.5);
  const QPointF start = a + u * (ra + 2) + n * shift;
  const QPointF tip = b - u * (rb + 3) + n * shift;
  const qreal head = 9;
  p.drawLine(start, tip - u * head * 0.8);
  QPainterPath arrow;
  arrow.moveTo(tip);
  arrow.lineTo(tip - u * head + n * head * 0.5);
  arrow.lineTo(tip - u * head - n * head * 0.5);
  arrow.closeSubpath();
  p.save();
  p.setBrush(p.pen().color());
  p.setPen(Qt::NoPen);
  p.drawPath(arrow);
  p.restore();
}

}  // namespace

PeerMapWidget::PeerMapWidget(QWidget* parent) : QWidget(parent) {
  setMouseTracking(true);
  setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Expanding);
}

QSize PeerMapWidget::sizeHint() const { return {420, 360}; }
QSize PeerMapWidget::minimumSizeHint() const { return {200, 180}; }

void PeerMapWidget::showSwarm(const es::node::SwarmView& view) {
  peers_.clear();
  // Self first whatever order the view uses: the layout puts index 0 at the top.
  for (const auto& p : view.peers)
    if (p.self || (!view.selfId.empty() && p.id == view.selfId))
      peers_.insert(peers_.begin(), p);
    else
      peers_.push_back(p);
  if (!peers_.empty() && !view.selfId.empty() && peers_.front().id == view.selfId) peers_.front().self = true;
  nExperts_ = view.nExperts;

  auto indexOf = [this](const std::string& id) {
    for (std::size_t i = 0; i < peers_.size(); ++i)
      if (peers_[i].id == id) return static_cast<int>(i);
    return -1;
  };
  const bool haveSelf = !peers_.empty() && peers_.front().self;

  edges_.clear();
  QHash<QString, std::int64_t> uploaded;
  for (const auto& t : view.transfers) {
    const QString cid = QString::fromStdString(t.contentId);
    uploaded.insert(cid, t.uploadedBytes);
    if (!haveSelf) continue;
    if (!t.ours) {
      // Someone else's checkpoint still arriving: their disc → ours.
      const int owner = indexOf(t.peer);
      if (!t.finished && owner > 0) edges_.push_back({owner, 0, false});
      continue;
    }
    // Ours: the view does not say to whom we send, only that peers are connected and bytes leave.
    // So while uploadedBytes grows (or the content is still incomplete) we draw a dashed edge to
    // every other live peer; a seed that sits idle draws nothing.
    const bool growing = t.uploadedBytes > lastUploaded_.value(cid, 0);
    if (t.connections > 0 && (!t.finished || growing))
      for (std::size_t i = 1; i < peers_.size(); ++i)
        if (!peers_[i].banned) edges_.push_back({0, static_cast<int>(i), true});
  }
  lastUploaded_ = uploaded;
  update();
}

int PeerMapWidget::peerCount() const { return static_cast<int>(peers_.size()); }

QStringList PeerMapWidget::peerIds() const {
  QStringList ids;
  for (const auto& p : peers_) ids << QString::fromStdString(p.id);
  return ids;
}

int PeerMapWidget::edgeCount() const { return static_cast<int>(edges_.size()); }

std::vector<PeerMapWidget::Disc> PeerMapWidget::layoutDiscs() const {
  std::vector<Disc> discs(peers_.size());
  const int n = static_cast<int>(peers_.size());
  if (n == 0) return discs;
  const qreal labelH = fontMetrics().height() + 4;
  const qreal w = width(), h = height() - labelH;
  const QPointF c(w / 2, h / 2 + 2);
  qreal r = std::clamp(std::min(w, h) * 0.075, 8.0, 26.0);
  const qreal selfScale = 1.35;
  qreal ring = std::max(10.0, std::min(w, h) / 2 - r * selfScale - 6);
  // Many peers: shrink the discs so neighbours on the circle do not overlap.
  if (n > 1) r = std::max(5.0, std::min(r, ring * std::sin(kPi / n) * 0.8));
  ring = std::max(10.0, std::min(w, h) / 2 - r * selfScale - 6);
  for (int i = 0; i < n; ++i) {
    const qreal angle = -kPi / 2 + 2 * kPi * i / n;
    discs[i].center = n == 1 ? c : c + QPointF(std::cos(angle), std::sin(angle)) * ring;
    discs[i].radius = peers_[i].self ? r * selfScale : r;
  }
  return discs;
}

int PeerMapWidget::peerAt(const QPoint& pos) const {
  const auto discs = layoutDiscs();
  for (std::size_t i = 0; i < discs.size(); ++i) {
    const QPointF d = QPointF(pos) - discs[i].center;
    if (std::hypot(d.x(), d.y()) <= discs[i].radius + 2) return static_cast<int>(i);
  }
  return -1;
}

QPoint PeerMapWidget::peerCenter(const QString& peerId) const {
  const auto discs = layoutDiscs();
  for (std::size_t i = 0; i < peers_.size(); ++i)
    if (QString::fromStdString(peers_[i].id) == peerId) return discs[i].center.toPoint();
  return {};
}

QString PeerMapWidget::toolTipAt(const QPoint& pos) const {
  const int i = peerAt(pos);
  if (i < 0) return {};
  const auto& p = peers_[i];
  QStringList lines;
  lines << tr("Peer %1%2").arg(QString::fromStdString(p.id), p.self ? tr(" (you)") : QString());
  lines << tr("Round %1").arg(p.round);
  lines << (p.claims.empty() ? tr("Claims: none") : tr("Claims: experts %1").arg(joinExperts(p.claims)));
  lines << (p.leaseUntil > 0 ? tr("Lease until round %1").arg(p.leaseUntil) : tr("No lease"));
  lines << tr("Steps %1").arg(p.steps);
  lines << tr("Loss %1").arg(p.steps > 0 ? QString::number(p.loss, 'f', 3) : QStringLiteral("—"));
  lines << tr("Tokens/s %1").arg(QString::number(p.tokensPerSecond, 'f', 0));
  lines << (p.banned ? tr("Banned: yes") : tr("Banned: no"));
  return lines.join(QLatin1Char('\n'));
}

bool PeerMapWidget::event(QEvent* event) {
  if (event->type() == QEvent::ToolTip) {
    auto* help = static_cast<QHelpEvent*>(event);
    const QString text = toolTipAt(help->pos());
    if (text.isEmpty()) {
      QToolTip::hideText();
      event->ignore();
    } else {
      QToolTip::showText(help->globalPos(), text, this);
    }
    return true;
  }
  return QWidget::event(event);
}

void PeerMapWidget::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.setRenderHint(QPainter::Antialiasing);
  p.fillRect(rect(), palette().base());
  if (peers_.empty()) {
    p.setPen(palette().color(QPalette::PlaceholderText));
    p.drawText(rect(), Qt::AlignCenter, tr("No peers yet"));
    return;
  }
  const auto discs = layoutDiscs();

  // Edges under the discs, so arrow heads stop at the rims.
  for (const auto& e : edges_) {
    QPen pen(e.upload ? kUploadColor : kDownloadColor, 2);
    if (e.upload) pen.setStyle(Qt::DashLine);
    p.setPen(pen);
    drawArrow(p, discs[e.from].center, discs[e.from].radius, discs[e.to].center, discs[e.to].radius);
  }

  const QColor text = palette().color(QPalette::Text);
  for (std::size_t i = 0; i < peers_.size(); ++i) {
    const auto& peer = peers_[i];
    const QPointF c = discs[i].center;
    const qreal r = discs[i].radius;
    const QRectF box(c.x() - r, c.y() - r, 2 * r, 2 * r);
    if (peer.self) {  // a soft halo so "you" is found first
      QColor halo = palette().color(QPalette::Highlight);
      halo.setAlpha(60);
      p.setPen(Qt::NoPen);
      p.setBrush(halo);
      p.drawEllipse(box.adjusted(-6, -6, 6, 6));
    }
    p.setPen(Qt::NoPen);
    if (peer.claims.empty()) {
      p.setBrush(noExpertColor());
      p.drawEllipse(box);
    } else {
      const int k = static_cast<int>(peer.claims.size());
      for (int s = 0; s < k; ++s) {  // 16ths of a degree, starting at twelve o'clock
        const int start = 90 * 16 - s * 5760 / k;
        const int span = -(5760 / k + (s == k - 1 ? 5760 % k : 0));
        p.setBrush(expertColor(peer.claims[s], nExperts_));
        p.drawPie(box, start, span);
      }
    }
    p.setBrush(Qt::NoBrush);
    if (peer.banned) {
      p.setPen(QPen(kBannedColor, 2.5));
      p.drawEllipse(box);
      const qreal d = r * 0.7071;
      p.drawLine(c + QPointF(-d, -d), c + QPointF(d, d));
      p.drawLine(c + QPointF(-d, d), c + QPointF(d, -d));
    } else {
      p.setPen(peer.self ? QPen(palette().color(QPalette::Highlight), 3) : QPen(text.lighter(160), 1));
      p.drawEllipse(box);
    }
    const QString label = peer.self ? tr("you") : shortId(peer.id);
    QFont f = font();
    f.setBold(peer.self);
    p.setFont(f);
    p.setPen(peer.banned ? kBannedColor : text);
    p.drawText(QRectF(c.x() - 60, c.y() + r + 2, 120, fontMetrics().height() + 2), Qt::AlignHCenter | Qt::AlignTop,
               label);
  }
}

}  // namespace es::ui
