// An in-memory Swarm (core/node/swarm.h) for unit tests: several nodes in one process share a
// MemorySwarmHub; announcements are visible to all at once, "publishing" registers a file and
// "fetching" copies it into the fetch's folder (as a transfer would; the publisher's path when no
// folder is given) on the next event-loop turn — a folder's wanted files alone
// (support/memory_swarm_folders.h), and retiring with its file deletes this member's
// copy, as removing a torrent with its files does. No network, no signatures.
#pragma once

#include "core/node/swarm.h"

#include <QObject>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace es::node {

class MemorySwarm;

class MemorySwarmHub {
 public:
  explicit MemorySwarmHub(std::string runId) : runId_(std::move(runId)) {}
  const std::string& runId() const { return runId_; }

 private:
  friend class MemorySwarm;
  std::string runId_;
  std::map<PeerId, SwarmPeer> records_;                       // peer → what it announced
  std::map<ContentId, std::map<PeerId, std::string>> files_;  // content → publisher → its path
  std::vector<MemorySwarm*> members_;
};

class MemorySwarm : public Swarm {
 public:
  MemorySwarm(MemorySwarmHub& hub, std::string selfId);
  ~MemorySwarm() override;

  void setEvents(SwarmEvents events) override { events_ = std::move(events); }
  PeerId selfId() const override { return selfId_; }
  std::string runId() const override { return hub_.runId(); }
  Status announce(const Announcement& announcement) override;
  std::vector<SwarmPeer> peers() const override;
  // As the p2p layer does: the content id comes back later (after `setPublishDelay`'s ms, 0 by
  // default: the next pass of the event loop), never from inside the call.
  void publish(const std::string& path, Published done) override;
  // Tests: publishes at once, for content the test itself announces.
  Expected<ContentId> publish(const std::string& path);
  // Tests: how long "hashing" takes (the window in which the node's state may move on).
  void setPublishDelay(int ms) { publishDelayMs_ = ms; }
  Status fetch(const ContentId& content, const std::string& dir, const FetchLimits& limits) override;
  void retire(const ContentId& content, bool deleteFile) override;
  std::vector<int> chooseClaims(const ClaimRequest& request) const override;
  int connections() const override { return static_cast<int>(hub_.members_.size()) - 1; }
  SwarmTraffic traffic() const override { return traffic_ ? traffic_() : SwarmTraffic{}; }
  // Tests: what traffic() reports (the transfers' progress the deadline looks at).
  void reportTraffic(std::function<SwarmTraffic()> traffic) { traffic_ = std::move(traffic); }
  // Tests: fetches of content for which `never` says true never complete (a contribution that
  // cannot reach this peer in time, as after a partition).
  void withhold(std::function<bool(const ContentId& content)> never) { withheld_ = std::move(never); }
  // Tests: fetches of content for which `lose` says true are reported fetched, but their copy is
  // not on disk (removed under the transfer: the disk's fault, not the content's).
  void loseCopies(std::function<bool(const ContentId& content)> lose) { lost_ = std::move(lose); }
  // Tests: fetches for which `fail` says true fail (not refused: a transfer's error, as libtorrent
  // 2.0.8's hybrid "v1 and v2 hashes do not describe the same data"). As with the p2p session, the
  // failed transfer stays until retired: asked again before that, it never reports anything.
  void failFetches(std::function<bool(const ContentId& content, const std::string& dir)> fail) {
    failing_ = std::move(fail);
  }
  // As the p2p session does, a fetch of content this member publishes itself is already "there"
  // and reports nothing (SwarmSession::fetch). On by default, so that the node's tests meet what
  // the real session does; off for a test of the fetch itself.
  void silentOnOwnFetches(bool silent) { silentOnOwn_ = silent; }
  // Tests: `tamper` may change a fetched folder's copy before the node hears of it (bytes that do
  // not match what their sender signed, as a lying sender's would).
  void tamperWithFolders(std::function<void(const ContentId& content, const std::string& copy)> tamper) {
    tampered_ = std::move(tamper);
  }
  // Tests: `tamper` may change a file the node publishes before it is hashed (a lying publisher).
  void tamperWithPublished(std::function<void(const std::string& path)> tamper) {
    publishTampered_ = std::move(tamper);
  }
  // Tests: the withheld fetches `withhold` now lets through are delivered (a partition healed).
  void deliverWithheld();
  // Tests: a cut link. While cut, this member sees the records it saw when cut, nobody sees its
  // new ones, and no content moves to or from it; restoring delivers what waited.
  void setCut(bool cut);
  const std::set<ContentId>& retired() const { return retired_; }
  // The limits each fetch came with (content → limits), as the p2p layer would check them.
  const std::map<ContentId, FetchLimits>& fetchLimits() const { return limits_; }

 private:
  MemorySwarmHub& hub_;
  PeerId selfId_;
  SwarmEvents events_;
  std::function<bool(const ContentId&)> withheld_, lost_;
  std::function<void(const ContentId&, const std::string&)> tampered_;
  std::function<void(const std::string&)> publishTampered_;
  std::function<SwarmTraffic()> traffic_;
  std::function<bool(const ContentId&, const std::string&)> failing_;
  std::set<ContentId> failedHeld_;  // failed transfers not retired yet
  bool silentOnOwn_ = true;
  std::set<ContentId> retired_;
  std::map<ContentId, std::string> copies_;  // content → the fetched copy
  std::map<ContentId, FetchLimits> limits_;
  std::map<ContentId, std::string> withheldFetches_;  // content → the fetch's folder
  bool cut_ = false;
  int publishDelayMs_ = 0;
  std::vector<SwarmPeer> seenWhenCut_;
  std::optional<SwarmPeer> unsentRecord_;          // our newest record, announced while cut
  bool reachable(const ContentId& content) const;  // some publisher of it is not cut, nor are we
  Status fetchFolder(const ContentId& content, const std::string& folder, const std::string& dir,
                     const FetchLimits& limits);
  QObject context_;  // queued callbacks die with this swarm
};

}  // namespace es::node
