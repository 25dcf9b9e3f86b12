// The GUI's swarm views (peer map, peers table, expert map, transfers table, log) fed with a
// hand-built SwarmView: what they list, what they mark, and that they paint something at all.
// Runs on the offscreen platform (CTest sets QT_QPA_PLATFORM=offscreen).
#include "ui/expert_colors.h"
#include "ui/expert_map_widget.h"
#include "ui/log_view.h"
#include "ui/peer_map_widget.h"
#include "ui/peers_view.h"
#include "ui/transfers_view.h"
#include "ui/view_helpers.h"

#include <QSet>
#include <QTableWidget>
#include <QToolTip>
#include <QtTest>

using es::node::PeerView;
using es::node::SwarmView;
using es::node::TransferView;

namespace {

const std::string kSelf = "aaaa1111bbbb2222cccc3333dddd4444";
const std::string kAlice = "a11ce000ffff0000eeee0000dddd0000";
const std::string kBob = "b0b00000cccc1111dddd2222eeee3333";

// Every peer is at round 7 with a lease until round 12, 340 steps, loss 2.5, 1500 tokens/s.
PeerView peer(const std::string& id, bool self, std::vector<int> claims) {
  return PeerView{id, self, /*banned=*/false, 7, std::move(claims), 12, 340, 2.5, 1500};
}

// A 4 MiB contribution of round 7; finished once all of it is done.
TransferView transfer(const std::string& cid, const std::string& owner, bool ours, std::int64_t done,
                      std::int64_t uploaded, int connections) {
  const std::int64_t total = 4 * 1024 * 1024;
  return TransferView{cid,  owner,    "contribution",  7,           ours,         total,
                      done, uploaded, ours ? 0 : done, connections, done == total};
}

// Self claims expert 0, Alice 1 and 5, Bob 1; experts 2, 3, 4 are orphaned. A quarter of one of
// Alice's contributions has arrived; one of ours is being fetched by two peers.
SwarmView sampleView() {
  SwarmView v;
  v.runId = "run-1";
  v.selfId = kSelf;
  v.round = 7;
  v.nExperts = 6;
  v.nLayers = 4;
  v.peers = {peer(kSelf, true, {0}), peer(kAlice, false, {1, 5}), peer(kBob, false, {1})};
  v.transfers = {transfer("c0ffee01", kAlice, false, 1024 * 1024, 0, 1),
                 transfer("c0ffee02", kSelf, true, 4 * 1024 * 1024, 2 * 1024 * 1024, 2)};
  return v;
}

int distinctColours(QWidget& w) {
  w.resize(640, 420);
  w.show();
  if (!QTest::qWaitForWindowExposed(&w)) return -1;
  const QImage image = w.grab().toImage();
  QSet<QRgb> colours;
  for (int y = 0; y < image.height(); ++y)
    for (int x = 0; x < image.width(); ++x) colours.insert(image.pixel(x, y));
  return colours.size();
}

QStringList column(QTableWidget* t, int col) {
  QStringList out;
  for (int r = 0; r < t->rowCount(); ++r) out << (t->item(r, col) ? t->item(r, col)->text() : QString());
  return out;
}

}  // namespace

class TestUiViews : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void expertColoursAreDistinctAndGreyForNone() {
    QSet<QRgb> seen;
    for (int e = 0; e < 16; ++e) seen.insert(es::ui::expertColor(e, 16).rgb());
    QCOMPARE(seen.size(), 16);
    QCOMPARE(es::ui::expertColor(-1, 16), es::ui::noExpertColor());
    QVERIFY(es::ui::expertColor(0, 16).hsvSaturation() > 100);
  }

  void peerMapDrawsEveryPeerSelfFirst() {
    SwarmView v = sampleView();
    std::swap(v.peers[0], v.peers[2]);  // self last in the view: the map still puts it first
    es::ui::PeerMapWidget map;
    map.showSwarm(v);
    QCOMPARE(map.peerCount(), 3);
    QCOMPARE(map.peerIds(), QStringList({QString::fromStdString(kSelf), QString::fromStdString(kBob),
                                         QString::fromStdString(kAlice)}));
    map.resize(420, 360);
    const QPoint self = map.peerCenter(QString::fromStdString(kSelf));
    const QPoint alice = map.peerCenter(QString::fromStdString(kAlice));
    QVERIFY(self.y() < alice.y());  // self at the top
    QVERIFY(map.peerCenter(QStringLiteral("nobody")).isNull());
  }

  void peerMapDrawsAnEdgePerIncomingTransfer() {
    SwarmView v = sampleView();
    v.transfers.pop_back();  // only Alice's contribution, still arriving
    es::ui::PeerMapWidget map;
    map.showSwarm(v);
    QCOMPARE(map.edgeCount(), 1);
    v.transfers.push_back(transfer("c0ffee03", kBob, false, 0, 0, 1));
    map.showSwarm(v);
    QCOMPARE(map.edgeCount(), 2);
    for (auto& t : v.transfers) t.finished = true;  // fetched: no longer an edge
    map.showSwarm(v);
    QCOMPARE(map.edgeCount(), 0);
  }

  void peerMapDrawsUploadEdgesOnlyWhileBytesLeave() {
    SwarmView v = sampleView();
    v.transfers.erase(v.transfers.begin());  // only ours
    es::ui::PeerMapWidget map;
    map.showSwarm(v);
    QCOMPARE(map.edgeCount(), 2);  // self → Alice, self → Bob
    map.showSwarm(v);              // uploadedBytes did not grow since
    QCOMPARE(map.edgeCount(), 0);
    v.transfers.front().uploadedBytes += 1024;
    map.showSwarm(v);
    QCOMPARE(map.edgeCount(), 2);
    v.transfers.front().uploadedBytes += 1024;
    v.transfers.front().connections = 0;
    map.showSwarm(v);
    QCOMPARE(map.edgeCount(), 0);
  }

  void peerMapTooltipNamesThePeer() {
    es::ui::PeerMapWidget map;
    map.resize(420, 360);
    map.showSwarm(sampleView());
    const QPoint alice = map.peerCenter(QString::fromStdString(kAlice));
    const QString tip = map.toolTipAt(alice);
    QVERIFY2(tip.contains(QString::fromStdString(kAlice)), qPrintable(tip));
    QVERIFY2(tip.contains(QStringLiteral("experts 1, 5")), qPrintable(tip));
    QVERIFY2(tip.contains(QStringLiteral("Lease until round 12")), qPrintable(tip));
    QVERIFY(map.toolTipAt(map.peerCenter(QString::fromStdString(kSelf))).contains(QStringLiteral("(you)")));
    QCOMPARE(map.toolTipAt(QPoint(1, 1)), QString());

    map.show();
    QVERIFY(QTest::qWaitForWindowExposed(&map));
    QHelpEvent help(QEvent::ToolTip, alice, map.mapToGlobal(alice));
    QApplication::sendEvent(&map, &help);
    QTRY_VERIFY(QToolTip::isVisible());
    QCOMPARE(QToolTip::text(), tip);
    QToolTip::hideText();
  }

  void peersTableListsEveryPeer() {
    es::ui::PeersView view;
    SwarmView v = sampleView();
    v.peers[2].banned = true;
    v.peers.push_back(peer("dead0000beef", false, {}));
    view.showSwarm(v);
    QTableWidget* t = view.table();
    QCOMPARE(t->rowCount(), 4);
    QCOMPARE(column(t, es::ui::PeersView::Peer), QStringList({"aaaa1111 (you)", "a11ce000", "b0b00000", "dead0000"}));
    QCOMPARE(column(t, es::ui::PeersView::Experts), QStringList({"0", "1, 5", "1", "—"}));
    QCOMPARE(column(t, es::ui::PeersView::Status), QStringList({"active", "active", "banned", "no claims"}));
    QCOMPARE(t->item(0, es::ui::PeersView::LeaseUntil)->text(), QStringLiteral("12"));
    QCOMPARE(t->item(1, es::ui::PeersView::Loss)->text(), QStringLiteral("2.500"));
    QCOMPARE(view.map()->peerCount(), 4);
  }

  void expertMapShowsOwnersAndReplicas() {
    es::ui::ExpertMapWidget map;
    map.showSwarm(sampleView());
    QCOMPARE(map.ownersOf(1), QStringList({QString::fromStdString(kAlice), QString::fromStdString(kBob)}));
    QCOMPARE(map.replicaCount(1), 2);
    QCOMPARE(map.replicaCount(5), 1);
    const QString cell = map.table()->item(3, 1)->text();
    QVERIFY2(cell.contains(QStringLiteral("a11ce000, b0b00000")) && cell.contains(QStringLiteral("×2")),
             qPrintable(cell));
    QVERIFY(map.table()->item(0, 1)->toolTip().contains(QString::fromStdString(kBob)));

    SwarmView v = sampleView();  // a banned peer's claims are ignored by the merge: it owns nothing
    v.peers[2].banned = true;
    map.showSwarm(v);
    QCOMPARE(map.ownersOf(1), QStringList({QString::fromStdString(kAlice)}));
    QCOMPARE(map.replicaCount(1), 1);
  }

  void expertMapMarksOwnClaims() {
    es::ui::ExpertMapWidget map;
    map.showSwarm(sampleView());
    QVERIFY(map.claimedBySelf(0));
    QVERIFY(!map.claimedBySelf(1));
    QVERIFY(map.table()->item(2, 0)->text().startsWith(QStringLiteral("★")));
    QVERIFY(map.table()->item(2, 0)->font().bold());
    QVERIFY(!map.table()->item(2, 1)->text().startsWith(QStringLiteral("★")));
    QVERIFY(!map.table()->item(2, 1)->font().bold());
  }

  void expertMapRecordsLastUpdateRound() {
    es::ui::ExpertMapWidget map;
    map.showSwarm(sampleView());
    QCOMPARE(map.lastUpdateRound(1), std::int64_t(0));
    QVERIFY(map.table()->item(0, 1)->text().contains(QStringLiteral("r–")));
    es::node::RoundSummary s;
    s.round = 9;
    s.updatedExperts = {1, 5};
    map.noteRound(s);
    QCOMPARE(map.lastUpdateRound(1), std::int64_t(9));
    QCOMPARE(map.lastUpdateRound(5), std::int64_t(9));
    QCOMPARE(map.lastUpdateRound(0), std::int64_t(0));
    QVERIFY(map.table()->item(3, 1)->text().contains(QStringLiteral("r9")));
    map.showSwarm(sampleView());  // a refresh of the same run keeps the history
    QCOMPARE(map.lastUpdateRound(1), std::int64_t(9));
  }

  void expertMapResizesToTheRun() {
    es::ui::ExpertMapWidget map;
    map.showSwarm(sampleView());
    QCOMPARE(map.table()->rowCount(), 4);
    QCOMPARE(map.table()->columnCount(), 6);
    QCOMPARE(map.table()->horizontalHeaderItem(5)->text(), QStringLiteral("E5"));
    QCOMPARE(map.table()->verticalHeaderItem(3)->text(), QStringLiteral("Layer 3"));
    SwarmView v = sampleView();
    v.nExperts = 3;
    v.nLayers = 2;
    map.showSwarm(v);
    QCOMPARE(map.table()->rowCount(), 2);
    QCOMPARE(map.table()->columnCount(), 3);
    QCOMPARE(map.replicaCount(5), 0);  // out of the run now
  }

  void orphanedExpertIsShownUnowned() {
    es::ui::ExpertMapWidget map;
    map.showSwarm(sampleView());
    QVERIFY(map.ownersOf(3).isEmpty());
    QCOMPARE(map.replicaCount(3), 0);
    const QTableWidgetItem* orphan = map.table()->item(0, 3);
    QVERIFY2(orphan->text().startsWith(QStringLiteral("—")), qPrintable(orphan->text()));
    QVERIFY(orphan->toolTip().contains(QStringLiteral("orphaned")));
    QVERIFY(orphan->background().color() != map.table()->item(0, 1)->background().color());
    QVERIFY(orphan->foreground().color() != map.table()->item(0, 1)->foreground().color());
  }

  void transfersTableListsEveryTransfer() {
    es::ui::TransfersView view;
    view.showSwarm(sampleView());
    QCOMPARE(view.rowCount(), 2);
    QTableWidget* t = view.table();
    using TV = es::ui::TransfersView;
    QCOMPARE(column(t, TV::Peer), QStringList({"a11ce000", "you"}));
    QCOMPARE(column(t, TV::Direction), QStringList({"download", "upload"}));
    QCOMPARE(column(t, TV::Progress), QStringList({"25%", "100%"}));
    QCOMPARE(column(t, TV::Size), QStringList({"4.00 MiB", "4.00 MiB"}));
    QCOMPARE(column(t, TV::Uploaded), QStringList({"0 B", "2.00 MiB"}));
    QCOMPARE(column(t, TV::State), QStringList({"downloading", "seeding"}));
    QCOMPARE(es::ui::humanBytes(1536), QStringLiteral("1.50 KiB"));
    SwarmView v = sampleView();
    v.transfers.clear();
    view.showSwarm(v);
    QCOMPARE(view.rowCount(), 0);
  }

  void logViewKeepsLines() {
    es::ui::LogView log;
    log.append(QStringLiteral("joined run"));
    log.append(QStringLiteral("round 3 merged"));
    const QStringList lines = log.text().split(QLatin1Char('\n'));
    QCOMPARE(lines.size(), 2);
    QVERIFY(QRegularExpression(QStringLiteral("^\\d\\d:\\d\\d:\\d\\d joined run$")).match(lines[0]).hasMatch());
    QVERIFY(lines[1].endsWith(QStringLiteral(" round 3 merged")));
    for (int i = 0; i < 5100; ++i) log.append(QStringLiteral("line %1").arg(i));
    const QStringList capped = log.text().split(QLatin1Char('\n'));
    QCOMPARE(capped.size(), 5000);  // oldest dropped
    QVERIFY(capped.last().endsWith(QStringLiteral("line 5099")));
  }

  // A paintEvent that draws nothing (or a layout that hides the content) leaves a near-uniform image.
  void everyViewPaintsSomething() {
    const SwarmView v = sampleView();
    es::ui::PeerMapWidget map;
    map.showSwarm(v);
    es::ui::PeersView peers;
    peers.showSwarm(v);
    es::ui::ExpertMapWidget experts;
    experts.showSwarm(v);
    es::ui::TransfersView transfers;
    transfers.showSwarm(v);
    es::ui::LogView log;
    log.append(QStringLiteral("joined run"));
    const std::pair<const char*, QWidget*> widgets[] = {
        {"peer map", &map}, {"peers", &peers}, {"experts", &experts}, {"transfers", &transfers}, {"log", &log}};
    for (const auto& [name, widget] : widgets) {
      const int colours = distinctColours(*widget);
      QVERIFY2(colours > 20, qPrintable(QStringLiteral("%1: %2 colours").arg(QLatin1String(name)).arg(colours)));
    }
  }
};

QTEST_MAIN(TestUiViews)
#include "tst_ui_views.moc"
