// The round's merge as one function (core/sync/round_merge.h; issue 13 item 2): the client and
// the simulator both run it. Order independence, stale entries skipped without a verdict against
// them, rejected senders owning nothing, duplicate senders refused, and the outer Nesterov rule (issue 18).
#ifndef Q_MOC_RUN  // moc need not parse LibTorch
#include "core/model/tensor_names.h"
#include "core/sync/contribution_file.h"
#include "core/sync/round_merge.h"
#include "core/sync/swarm_state.h"

#include <torch/torch.h>
#endif

#include <QtTest>

#include <algorithm>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

using namespace es::sync;
using es::model::expertTensorName;

namespace {

const std::string kRun = "run-1";
const std::string kShared = "norm.weight";
std::string expert(int e) { return expertTensorName(0, e, "w1"); }

at::Tensor vec(std::vector<float> values) { return torch::tensor(values, torch::kFloat); }

NamedTensors base() {
  return {{kShared, vec({1, 2})}, {expert(0), vec({10, 20})}, {expert(1), vec({30, 40})}, {expert(2), vec({50, 60})}};
}

RoundContext context() { return {kRun, 3, stateFingerprint(base())}; }

// A contribution of `sender` owning expert `e`: shared and expert deltas of size `d`.
RoundEntry entry(const std::string& sender, int e, float d) {
  ContributionHeader header{kRun, 3, sender, context().baseHash, "f32"};
  return {header, heldDeltas({{kShared, vec({d, d})}, {expert(e), vec({d, -d})}}), {e}};
}

bool sameBits(const NamedTensors& a, const NamedTensors& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const auto &x = a[i].second.contiguous(), &y = b[i].second.contiguous();
    if (a[i].first != b[i].first || x.sizes() != y.sizes() ||
        std::memcmp(x.data_ptr(), y.data_ptr(), x.numel() * x.element_size()) != 0)
      return false;
  }
  return true;
}

const at::Tensor& find(const NamedTensors& tensors, const std::string& name) {
  for (const auto& [n, t] : tensors)
    if (n == name) return t;
  throw std::runtime_error("no tensor " + name);
}

// Deltas read afresh at every call, into storage that counts how many reads are alive at once
// (a read lives while any of its tensors does).
struct LiveReads {
  int alive = 0;
  int most = 0;
  int reads = 0;
};
DeltaSource countedDeltas(NamedTensors deltas, std::shared_ptr<LiveReads> live) {
  return [deltas, live]() -> es::Expected<NamedTensors> {
    ++live->reads;
    live->most = std::max(live->most, ++live->alive);
    auto token = std::shared_ptr<void>(nullptr, [live](void*) { --live->alive; });
    NamedTensors fresh;
    for (const auto& [name, t] : deltas) {
      auto* copy = new float[t.numel()];
      std::memcpy(copy, t.contiguous().data_ptr<float>(), t.numel() * sizeof(float));
      fresh.emplace_back(name,
                         torch::from_blob(
                             copy, t.sizes(), [token](void* p) { delete[] static_cast<float*>(p); }, torch::kFloat));
    }
    return fresh;
  };
}

}  // namespace

class RoundMergeTest : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void initTestCase() { torch::set_num_threads(1); }

  void anyArrivalOrderGivesTheSameBitsAndVerdictsInSenderOrder() {
    std::vector<RoundEntry> entries{entry("peer-c", 2, 0.3f), entry("peer-a", 0, 0.1f), entry("peer-b", 1, 0.2f)};
    auto first = mergeRound(base(), context(), entries, {}, 30, {});
    std::reverse(entries.begin(), entries.end());
    auto second = mergeRound(base(), context(), entries, {}, 30, {});
    QVERIFY2(first.ok() && second.ok(), first.ok() ? "" : first.error().c_str());
    QVERIFY(sameBits(first->merged, second->merged));
    QCOMPARE(first->fingerprint, second->fingerprint);
    QCOMPARE(first->fingerprint, swarmFingerprint(first->merged, {}, first->ledger));
    QCOMPARE(int(first->verdicts.size()), 3);
    for (std::size_t i = 0; i < 3; ++i) {
      QCOMPARE(first->verdicts[i].sender, std::string(1, "abc"[i]).insert(0, "peer-"));
      QVERIFY2(first->verdicts[i].accepted, first->verdicts[i].reason.c_str());
    }
    // Shared: base + mean of the three deltas; expert 1 from its owner alone.
    QVERIFY(torch::allclose(find(first->merged, kShared), vec({1.2f, 2.2f})));
    QVERIFY(torch::allclose(find(first->merged, expert(1)), vec({30.2f, 39.8f})));
  }

  // A sparse run's scatter-mean (issue 39): each shared element averaged over the senders that
  // sent it (weighted by the ledger), experts untouched; the plain mean halves a value only one
  // of two senders sent. Either way, any arrival order gives the same bits.
  void theScatterMeanAveragesEachElementOverItsSenders() {
    auto sparseEntry = [](const std::string& sender, int e, std::vector<float> shared) {
      ContributionHeader header{kRun, 3, sender, context().baseHash, "f32"};
      return RoundEntry{header, heldDeltas({{kShared, vec(std::move(shared))}, {expert(e), vec({0.5f, 0.0f})}}), {e}};
    };
    std::vector<RoundEntry> entries{sparseEntry("peer-a", 0, {0.4f, 0.0f}), sparseEntry("peer-b", 1, {0.2f, 0.6f})};
    RoundPolicy policy;
    auto plain = mergeRound(base(), context(), entries, policy, 30, {});
    policy.aggregate.scatterMean = true;
    auto scattered = mergeRound(base(), context(), entries, policy, 30, {});
    std::reverse(entries.begin(), entries.end());
    auto reversed = mergeRound(base(), context(), entries, policy, 30, {});
    QVERIFY2(plain && scattered && reversed, plain ? "" : plain.error().c_str());
    QVERIFY(torch::allclose(find(plain->merged, kShared), vec({1.3f, 2.3f})));
    QVERIFY(torch::allclose(find(scattered->merged, kShared), vec({1.3f, 2.6f})));  // 0.6 sent by b alone
    QVERIFY(sameBits(scattered->merged, reversed->merged));
    QVERIFY(torch::equal(find(scattered->merged, expert(1)), find(plain->merged, expert(1))));
    QVERIFY(torch::equal(find(scattered->merged, expert(1)), vec({30.5f, 40.0f})));
    // Weighted: a holds 3 rounds of the ledger, b 1 — element 0 is (3·0.4 + 1·0.2) / 4, element 1 b's.
    WorkLedger ledger;
    for (std::int64_t r = 1; r <= 3; ++r)
      ledger =
          ledger.after(r, r == 1 ? std::vector<std::string>{"peer-a", "peer-b"} : std::vector<std::string>{"peer-a"});
    auto weighted = mergeRound(base(), context(), entries, policy, 30, {}, {}, ledger);
    QVERIFY(weighted.ok());
    QVERIFY(torch::allclose(find(weighted->merged, kShared), vec({1.0f + (3 * 0.4f + 0.2f) / 4, 2.6f})));
  }

  // Built on another base: skipped as stale (no verdict against the sender), merged as if absent.
  void aStaleEntryIsSkippedNotRejected() {
    auto stale = entry("peer-s", 2, 5.0f);
    stale.header.baseHash = "0123456789abcdef";
    auto with = mergeRound(base(), context(), {entry("peer-a", 0, 0.1f), stale}, {}, 30, {});
    auto without = mergeRound(base(), context(), {entry("peer-a", 0, 0.1f)}, {}, 30, {});
    QVERIFY(with.ok() && without.ok());
    QVERIFY(sameBits(with->merged, without->merged));
    const auto& v = with->verdicts.at(1);
    QCOMPARE(v.sender, std::string("peer-s"));
    QVERIFY(v.stale && !v.accepted);
    QCOMPARE(v.staleBase, std::string("0123456789abcdef"));
    QCOMPARE(int(with->accepted.size()), 1);
  }

  // A rejected sender owns nothing: the expert it claimed keeps its base value.
  void aRejectedSenderOwnsNothing() {
    auto poisoned = entry("peer-x", 2, 0.1f);
    poisoned.deltas =
        heldDeltas({{kShared, vec({0.1f, 0.1f})}, {expert(2), vec({std::numeric_limits<float>::quiet_NaN(), 0})}});
    auto merge = mergeRound(base(), context(), {entry("peer-a", 0, 0.1f), poisoned}, {}, 30, {});
    QVERIFY(merge.ok());
    QVERIFY(!merge->verdicts.at(1).accepted && !merge->verdicts.at(1).stale);
    QVERIFY(!merge->verdicts.at(1).reason.empty());
    QVERIFY(!merge->owners.count(2));
    QVERIFY(torch::equal(find(merge->merged, expert(2)), vec({50, 60})));
  }

  // Streaming (issue 14 item 3): every pass reads one contribution, drops it, then reads the next,
  // so no two are held at once — with the plain mean and with centered clipping (two passes per
  // iteration), and the work credit's pass after the merge — and the result is the bits of the
  // same merge over deltas held in memory.
  void theMergeHoldsOneContributionAtATime() {
    for (const auto rule : {SharedRule::Mean, SharedRule::CenteredClip}) {
      RoundPolicy policy;
      policy.aggregate.shared = rule;
      auto live = std::make_shared<LiveReads>();
      std::vector<RoundEntry> counted, held;
      for (int i = 0; i < 8; ++i) {
        const float d = 0.01f * static_cast<float>(i + 1);
        NamedTensors deltas{{kShared, vec({d, -d})}, {expert(i % 3), vec({d, 2 * d})}};
        ContributionHeader header{kRun, 3, "peer-" + std::to_string(i), context().baseHash, "f32"};
        counted.push_back({header, countedDeltas(deltas, live), {i % 3}});
        held.push_back({header, heldDeltas(deltas), {i % 3}});
      }
      auto streamed = mergeRound(base(), context(), counted, policy, 30, {});
      auto reference = mergeRound(base(), context(), held, policy, 30, {});
      QVERIFY(streamed.ok() && reference.ok());
      QCOMPARE(int(streamed->accepted.size()), 8);
      QCOMPARE(live->most, 1);
      QCOMPARE(live->alive, 0);
      // validation, the means, clipping's passes, and the work credit's (work_credit.h)
      const int passes = (rule == SharedRule::Mean ? 2 : 2 + 2 * policy.aggregate.clipIterations) + 1;
      QCOMPARE(live->reads, 8 * passes);
      QVERIFY(sameBits(streamed->merged, reference->merged));
    }
  }

  // A contribution whose file cannot be read is rejected with the reason; the others merge.
  void anUnreadableContributionIsRejected() {
    auto broken = entry("peer-b", 1, 0.2f);
    broken.deltas = []() -> es::Expected<NamedTensors> { return es::makeError("truncated"); };
    auto merge = mergeRound(base(), context(), {entry("peer-a", 0, 0.1f), broken}, {}, 30, {});
    QVERIFY(merge.ok());
    QVERIFY(merge->verdicts.at(0).accepted);
    QVERIFY(!merge->verdicts.at(1).accepted && !merge->verdicts.at(1).stale);
    QCOMPARE(merge->verdicts.at(1).reason, std::string("unreadable: truncated"));
    QCOMPARE(merge->accepted, std::vector<std::string>{"peer-a"});
  }

  // Issue 37 item 8: our disk failing (EMFILE, EIO: Error::local) is never the sender's fault. At
  // a3cdfca such a failure in the validation pass was "unreadable" — rejected, and the node banned
  // the honest sender for 7 days. Now lost: no verdict against it, no ban, nothing merged of it.
  void ourReadFailureIsLostNotRejected() {
    auto unlucky = entry("peer-b", 1, 0.2f);
    unlucky.deltas = []() -> es::Expected<NamedTensors> { return es::localError("cannot open: Too many open files"); };
    auto merge = mergeRound(base(), context(), {entry("peer-a", 0, 0.1f), unlucky}, {}, 30, {});
    QVERIFY(merge.ok());
    QVERIFY(merge->verdicts.at(0).accepted);
    const auto& v = merge->verdicts.at(1);
    QVERIFY(v.lost && !v.accepted && !v.stale && !v.noWork);
    QVERIFY2(QString::fromStdString(v.reason).contains("Too many open files"), v.reason.c_str());
    QCOMPARE(merge->accepted, std::vector<std::string>{"peer-a"});
    QVERIFY(!merge->owners.count(1));  // its expert has no owner this round
  }

  // The real file reader says which side failed: a file gone from our disk is local; bytes that
  // are there and wrong (not a contribution) are the content's.
  void theFileReaderTellsOurFailureFromTheContents() {
    QTemporaryDir dir;
    const std::string gone = dir.filePath("gone.safetensors").toStdString();
    auto missing = contributionDeltas(gone, {kRun, 3, "peer-b", context().baseHash, "f32"})();
    QVERIFY(!missing.ok() && missing.failure().local);
    const QString junk = dir.filePath("junk.safetensors");
    QFile file(junk);
    QVERIFY(file.open(QIODevice::WriteOnly));
    file.write(QByteArray(64, 'x'));
    file.close();
    auto wrong = contributionDeltas(junk.toStdString(), {kRun, 3, "peer-b", context().baseHash, "f32"})();
    QVERIFY(!wrong.ok());
    QVERIFY2(!wrong.failure().local, wrong.error().c_str());
  }

  // Read once, then failing (the file changed under the merge): the round fails, nothing merged.
  void aSourceFailingOnALaterPassFailsTheMerge() {
    auto flaky = entry("peer-b", 1, 0.2f);
    auto calls = std::make_shared<int>(0);
    flaky.deltas = [calls, good = flaky.deltas]() -> es::Expected<NamedTensors> {
      if ((*calls)++ == 0) return good();
      return es::makeError("changed on disk");
    };
    auto merge = mergeRound(base(), context(), {entry("peer-a", 0, 0.1f), flaky}, {}, 30, {});
    QVERIFY(!merge.ok());
    QVERIFY2(QString::fromStdString(merge.error()).contains("changed on disk"), merge.error().c_str());
  }

  void twoEntriesOfOneSenderAreRefused() {
    auto merge = mergeRound(base(), context(), {entry("peer-a", 0, 0.1f), entry("peer-a", 1, 0.2f)}, {}, 30, {});
    QVERIFY(!merge.ok());
    QVERIFY(QString::fromStdString(merge.error()).contains("peer-a"));
  }

  // DiLoCo's outer Nesterov step on the shared tensors (core/sync/outer_step.h): m = μm + Δ,
  // new = base + lr(Δ + μm); the experts merge plainly; the momentum comes back and is fingerprinted.
  void theOuterStepFollowsNesterovOnTheSharedTensors() {
    RoundPolicy policy;
    policy.outer = {0.7, 0.9, OuterRule::On::Shared};
    auto first = mergeRound(base(), context(), {entry("peer-a", 0, 0.1f)}, policy, 30, {});
    QVERIFY2(first.ok(), first.ok() ? "" : first.error().c_str());
    const double step = 0.7 * (0.1 + 0.9 * 0.1);  // m = Δ = 0.1 in the first round
    QVERIFY(torch::allclose(find(first->merged, kShared), vec({1 + float(step), 2 + float(step)}), 0, 1e-6));
    QVERIFY(torch::equal(find(first->merged, expert(0)), vec({10.1f, 19.9f})));  // plain
    QCOMPARE(int(first->momentum.size()), 1);
    QCOMPARE(first->momentum[0].first, std::string(kMomentumPrefix) + kShared);
    QVERIFY(torch::allclose(first->momentum[0].second, vec({0.1f, 0.1f})));
    QCOMPARE(first->fingerprint, swarmFingerprint(first->merged, first->momentum, first->ledger));
    QVERIFY(first->fingerprint != stateFingerprint(first->merged));  // the momentum is part of the state

    // The next round starts from that momentum: m' = 0.9·0.1 + 0.2.
    auto second = mergeRound(base(), context(), {entry("peer-a", 0, 0.2f)}, policy, 30, {}, first->momentum);
    QVERIFY(second.ok());
    QVERIFY(torch::allclose(second->momentum[0].second, vec({0.29f, 0.29f}), 0, 1e-6));
    const double step2 = 0.7 * (0.2 + 0.9 * 0.29);
    QVERIFY(torch::allclose(find(second->merged, kShared), vec({1 + float(step2), 2 + float(step2)}), 0, 1e-6));
  }

  void theOuterStepIsOrderIndependentAndPlainByDefault() {
    RoundPolicy policy;
    policy.outer = {0.7, 0.9, OuterRule::On::All};
    const NamedTensors momentum = zeroMomentum(base(), policy.outer);
    QCOMPARE(int(momentum.size()), 4);
    auto one =
        mergeRound(base(), context(), {entry("peer-a", 0, 0.1f), entry("peer-b", 1, 0.3f)}, policy, 30, {}, momentum);
    auto two =
        mergeRound(base(), context(), {entry("peer-b", 1, 0.3f), entry("peer-a", 0, 0.1f)}, policy, 30, {}, momentum);
    QVERIFY(one.ok() && two.ok());
    QVERIFY(sameBits(one->merged, two->merged));
    QVERIFY(sameBits(one->momentum, two->momentum));
    QCOMPARE(one->fingerprint, two->fingerprint);
    // Zeros given and none given are the same start.
    auto none = mergeRound(base(), context(), {entry("peer-a", 0, 0.1f), entry("peer-b", 1, 0.3f)}, policy, 30, {});
    QVERIFY(none.ok() && sameBits(none->merged, one->merged));
    // The default rule is SPES's plain merge: no momentum, the fingerprint of the weights alone.
    auto plain = mergeRound(base(), context(), {entry("peer-a", 0, 0.1f)}, {}, 30, {});
    QVERIFY(plain.ok() && plain->momentum.empty());
    QCOMPARE(plain->fingerprint, swarmFingerprint(plain->merged, {}, plain->ledger));
  }

  // A momentum that does not fit the base (another run's, a damaged file) is an error, not a merge.
  void aMomentumOfAnotherShapeIsRefused() {
    RoundPolicy policy;
    policy.outer = {0.7, 0.9, OuterRule::On::Shared};
    const NamedTensors wrong{{std::string(kMomentumPrefix) + kShared, vec({1, 2, 3})}};
    auto merge = mergeRound(base(), context(), {entry("peer-a", 0, 0.1f)}, policy, 30, {}, wrong);
    QVERIFY(!merge.ok());
    QVERIFY(QString::fromStdString(merge.error()).contains("momentum"));
  }
};

QTEST_APPLESS_MAIN(RoundMergeTest)
#include "tst_round_merge.moc"
