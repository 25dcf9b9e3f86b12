// Delta codec (f32, bf16, int8 per-row absmax) and contribution files on disk: round-trip error
// bounds, sizes, and strict decoding of damaged input.
#ifndef Q_MOC_RUN  // moc need not parse LibTorch
#include "core/checkpoint/safetensors.h"
#include "core/sync/contribution_file.h"
#include "core/sync/delta_codec.h"

#include <torch/torch.h>
#endif

#include <QTemporaryDir>
#include <QtTest>

#include <algorithm>
#include <cmath>

using namespace es::sync;
using es::ckpt::NamedTensors;

namespace {

at::Tensor vec(std::vector<float> values) { return torch::tensor(values, torch::kFloat); }

at::Tensor find(const NamedTensors& tensors, const std::string& name) {
  for (const auto& [n, t] : tensors) {
    if (n == name) return t;
  }
  return {};
}

NamedTensors without(NamedTensors tensors, const std::string& name) {
  tensors.erase(std::remove_if(tensors.begin(), tensors.end(), [&](const auto& e) { return e.first == name; }),
                tensors.end());
  return tensors;
}

NamedTensors sampleDeltas() {
  torch::manual_seed(11);
  return {{"b.matrix", torch::randn({5, 7})}, {"a.vector", torch::randn({9})}, {"c.scalar", torch::randn({})}};
}

NamedTensors roundTrip(const NamedTensors& deltas, Codec codec) {
  auto decoded = decodeDeltas(encodeDeltas(deltas, codec), codec);
  if (!decoded) qFatal("decode failed: %s", decoded.error().c_str());
  return *decoded;
}

// Every element of decode(encode(x)) for int8 lies within half its row's scale of x.
void verifyInt8WithinHalfAScale(const at::Tensor& x) {
  const auto encoded = encodeDeltas({{"t", x}}, Codec::Int8);
  const at::Tensor scale = find(encoded, "t.__scale");
  const std::int64_t rows = x.dim() >= 2 ? x.numel() / x.size(-1) : 1;
  QCOMPARE(scale.sizes().vec(), std::vector<std::int64_t>{rows});
  const at::Tensor decoded = roundTrip({{"t", x}}, Codec::Int8)[0].second;
  const at::Tensor xr = x.reshape({rows, -1}), dr = decoded.reshape({rows, -1});
  for (std::int64_t r = 0; r < rows; ++r) {
    const float absmax = xr[r].abs().max().item<float>();
    QCOMPARE(scale[r].item<float>(), absmax / 127.0f);
    const double bound = 0.5 * absmax / 127.0 * (1 + 1e-5);  // half a step, plus float rounding of x/s and q·s
    QVERIFY((dr[r] - xr[r]).abs().max().item<double>() <= bound);
  }
}

}  // namespace

class DeltaCodecTest : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void initTestCase() { torch::set_num_threads(1); }

  void codecNamesRoundTrip() {
    for (const Codec c : {Codec::F32, Codec::BF16, Codec::Int8}) QVERIFY(parseCodec(codecName(c)).value() == c);
    QCOMPARE(codecName(Codec::BF16), std::string("bf16"));
    QVERIFY(!parseCodec("fp8").ok());
  }

  void f32RoundTripIsExact() {
    const auto deltas = sampleDeltas();
    const auto decoded = roundTrip(deltas, Codec::F32);
    for (const auto& [name, t] : deltas) QVERIFY(torch::equal(find(decoded, name), t));
    for (const auto& [name, error] : codecError(deltas, Codec::F32)) QCOMPARE(error, 0.0);
  }

  void encodedTensorsAreSortedByName() {
    const auto encoded = encodeDeltas(sampleDeltas(), Codec::Int8);
    std::vector<std::string> names;
    for (const auto& [name, t] : encoded) names.push_back(name);
    QCOMPARE(names, (std::vector<std::string>{"a.vector", "a.vector.__scale", "b.matrix", "b.matrix.__scale",
                                              "c.scalar", "c.scalar.__scale"}));
  }

  void bf16RoundsToNearestEven() {
    // bf16 keeps 8 significant bits: the step just above 1 is 2^-7.
    const float half = std::ldexp(1.0f, -8);
    const auto decoded =
        roundTrip({{"t", vec({1 + half, 1 + 3 * half, 1 + half + std::ldexp(1.0f, -20)})}}, Codec::BF16);
    QVERIFY(torch::equal(decoded[0].second, vec({1.0f, 1 + std::ldexp(1.0f, -6), 1 + std::ldexp(1.0f, -7)})));
  }

  void bf16ErrorIsAtMostTwoToTheMinusEightRelative() {
    const auto deltas = sampleDeltas();
    const auto decoded = roundTrip(deltas, Codec::BF16);
    for (const auto& [name, x] : deltas) {
      const at::Tensor d = find(decoded, name);
      QCOMPARE(d.scalar_type(), torch::kFloat);
      QVERIFY2(((d - x).abs() <= x.abs() * std::ldexp(1.0, -8)).all().item<bool>(), name.c_str());
    }
  }

  void int8ErrorIsWithinHalfTheRowScale() {
    verifyInt8WithinHalfAScale(vec({1, -2, 0.5f, 0, 0, 0, 100, 3, -50}).reshape({3, 3}));
    torch::manual_seed(5);
    verifyInt8WithinHalfAScale(torch::randn({6, 10}) * torch::logspace(-3, 3, 6).unsqueeze(1));
    verifyInt8WithinHalfAScale(torch::randn({2, 3, 4}));  // 6 rows of 4
  }

  void int8MapsEachRowsAbsmaxTo127() {
    const auto encoded = encodeDeltas({{"t", vec({1, -2, 0.5f, 100, 3, -51}).reshape({2, 3})}}, Codec::Int8);
    const at::Tensor q = find(encoded, "t");
    QCOMPARE(q.scalar_type(), torch::kChar);
    QCOMPARE(q[0][1].item<int>(), -127);
    QCOMPARE(q[1][0].item<int>(), 127);
    QCOMPARE(q[1][2].item<int>(), -65);  // -51 / (100/127) = -64.77
  }

  void zeroRowsDecodeToExactZeros() {
    const at::Tensor x = vec({0, 0, 0, 1, 2, 3}).reshape({2, 3});
    const auto encoded = encodeDeltas({{"t", x}}, Codec::Int8);
    QCOMPARE(find(encoded, "t.__scale")[0].item<float>(), 0.0f);
    QVERIFY(torch::equal(roundTrip({{"t", x}}, Codec::Int8)[0].second[0], torch::zeros({3})));
    QVERIFY(torch::equal(roundTrip({{"z", torch::zeros({4})}}, Codec::Int8)[0].second, torch::zeros({4})));
  }

  void oneAndZeroDimensionalTensorsAreOneRow() {
    verifyInt8WithinHalfAScale(vec({0.25f, -4, 1.5f}));
    verifyInt8WithinHalfAScale(torch::tensor(-3.5f));
    const auto decoded = roundTrip({{"s", torch::tensor(-3.5f)}}, Codec::Int8);
    QCOMPARE(decoded[0].second.dim(), std::int64_t(0));
    QCOMPARE(decoded[0].second.item<float>(), -3.5f);  // its own absmax: -127 · s, up to float rounding
  }

  void encodedBytesFollowTheCodec() {
    const NamedTensors deltas = {{"t", torch::randn({8, 16})}};
    QCOMPARE(encodedBytes(encodeDeltas(deltas, Codec::F32)), std::int64_t(8 * 16 * 4));
    QCOMPARE(encodedBytes(encodeDeltas(deltas, Codec::BF16)), std::int64_t(8 * 16 * 2));      // 1/2
    QCOMPARE(encodedBytes(encodeDeltas(deltas, Codec::Int8)), std::int64_t(8 * 16 + 8 * 4));  // 1/4 + 8 scales
  }

  void codecErrorReportsTheWorstElementPerTensor() {
    const NamedTensors deltas = {{"t", vec({1, -2, 0.5f})}};
    const double step = 2.0 / 127.0;
    const auto errors = codecError(deltas, Codec::Int8);
    QCOMPARE(errors.size(), std::size_t(1));
    QVERIFY(errors.at("t") > 0.0 && errors.at("t") <= step / 2 * (1 + 1e-5));
  }

  void decodeRejectsAMissingScale() {
    const auto encoded = without(encodeDeltas(sampleDeltas(), Codec::Int8), "b.matrix.__scale");
    const auto decoded = decodeDeltas(encoded, Codec::Int8);
    QVERIFY(!decoded.ok());
    QVERIFY2(decoded.error().find("\"b.matrix.__scale\"") != std::string::npos, decoded.error().c_str());
  }

  void decodeRejectsAMisshapenScale() {
    auto encoded = encodeDeltas(sampleDeltas(), Codec::Int8);
    for (auto& [name, t] : encoded)
      if (name == "b.matrix.__scale") t = torch::ones({4});
    const auto decoded = decodeDeltas(encoded, Codec::Int8);
    QVERIFY(!decoded.ok());
    QVERIFY2(decoded.error().find("expected [5]") != std::string::npos, decoded.error().c_str());
  }

  void decodeRejectsAWrongDtype() {
    const auto asInt8 = decodeDeltas(encodeDeltas(sampleDeltas(), Codec::F32), Codec::Int8);
    QVERIFY(!asInt8.ok());
    QVERIFY2(asInt8.error().find("dtype Float") != std::string::npos, asInt8.error().c_str());
    QVERIFY(!decodeDeltas(encodeDeltas(sampleDeltas(), Codec::BF16), Codec::F32).ok());
    QVERIFY(!decodeDeltas(encodeDeltas(sampleDeltas(), Codec::F32), Codec::BF16).ok());
    auto scaleAsDouble = encodeDeltas(sampleDeltas(), Codec::Int8);
    scaleAsDouble[1].second = scaleAsDouble[1].second.to(torch::kDouble);
    QVERIFY(!decodeDeltas(scaleAsDouble, Codec::Int8).ok());
  }

  void decodeRejectsAStrayTensor() {
    auto orphanScale = encodeDeltas(sampleDeltas(), Codec::Int8);
    orphanScale.emplace_back("d.extra.__scale", torch::ones({1}));
    const auto decoded = decodeDeltas(orphanScale, Codec::Int8);
    QVERIFY(!decoded.ok());
    QVERIFY2(decoded.error().find("stray tensor \"d.extra.__scale\"") != std::string::npos, decoded.error().c_str());
    auto scaleInF32 = encodeDeltas(sampleDeltas(), Codec::F32);
    scaleInF32.emplace_back("a.vector.__scale", torch::ones({1}));
    QVERIFY(!decodeDeltas(scaleInF32, Codec::F32).ok());
  }

  void contributionFileRoundTripsHeaderAndDeltas() {
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    for (const Codec codec : {Codec::F32, Codec::BF16, Codec::Int8}) {
      const std::string path = dir.filePath("c.safetensors").toStdString();
      const ContributionHeader header{"run-a", 12, "peer-x", "0123456789abcdef", codecName(codec)};
      const auto deltas = sampleDeltas();
      const auto saved = saveContribution(path, header, deltas);
      QVERIFY2(saved.ok(), saved ? "" : saved.error().c_str());
      const auto loaded = loadContribution(path);
      QVERIFY2(loaded.ok(), loaded ? "" : loaded.error().c_str());
      QCOMPARE(loaded->header.run, header.run);
      QCOMPARE(loaded->header.round, header.round);
      QCOMPARE(loaded->header.sender, header.sender);
      QCOMPARE(loaded->header.baseHash, header.baseHash);
      QCOMPARE(loaded->header.codec, header.codec);
      const auto expected = roundTrip(deltas, codec);
      QCOMPARE(loaded->deltas.size(), expected.size());
      for (std::size_t i = 0; i < expected.size(); ++i) {
        QCOMPARE(loaded->deltas[i].first, expected[i].first);
        QVERIFY(torch::equal(loaded->deltas[i].second, expected[i].second));
      }
      const auto file = es::ckpt::loadSafetensors(path);
      QCOMPARE(file->metadata.at("format"), std::string("expertswarm-contribution"));
      QCOMPARE(file->metadata.at("version"), std::string("1"));
      QCOMPARE(file->metadata.at("round"), std::string("12"));
    }
  }

  void contributionFileWithMalformedMetadataIsAnError_data() {
    QTest::addColumn<QString>("key");
    QTest::addColumn<QString>("value");  // "<drop>": the field is missing
    QTest::addColumn<QString>("reason");
    QTest::newRow("round not a number") << "round"
                                        << "12x"
                                        << "malformed round \"12x\"";
    QTest::newRow("negative round") << "round"
                                    << "-1"
                                    << "malformed round";
    QTest::newRow("round with leading zero") << "round"
                                             << "012"
                                             << "malformed round";
    QTest::newRow("missing sender") << "sender"
                                    << "<drop>"
                                    << "missing metadata field \"sender\"";
    QTest::newRow("empty run") << "run"
                               << ""
                               << "empty metadata field \"run\"";
    QTest::newRow("other format") << "format"
                                  << "model"
                                  << "format \"model\"";
    QTest::newRow("future version") << "version"
                                    << "2"
                                    << "unsupported version \"2\"";
    QTest::newRow("unknown codec") << "codec"
                                   << "fp8"
                                   << "unknown codec \"fp8\"";
    QTest::newRow("unknown field") << "comment"
                                   << "hi"
                                   << "unknown metadata field \"comment\"";
    // Issue 14 item 3: a stranger's strings reach logs and ledger rows bounded and escaped — a
    // newline cannot forge a log line, 10^5 bytes do not reach the log.
    QTest::newRow("sender forging a log line") << "sender"
                                               << "peer\nreachability: reachable"
                                               << "must be at most 128 characters of A-Z a-z 0-9 . _ -, not "
                                                  "\"peer\\x0areachability: reachable\"";
    QTest::newRow("base hash of 100000 bytes") << "base_hash" << QString(100000, 'a') << "...(+99920 bytes)";
    QTest::newRow("escape in the format") << "format"
                                          << "\x1b[2Jmodel"
                                          << "format \"\\x1b[2Jmodel\"";
  }

  void contributionFileWithMalformedMetadataIsAnError() {
    QFETCH(QString, key);
    QFETCH(QString, value);
    QFETCH(QString, reason);
    QTemporaryDir dir;
    const std::string path = dir.filePath("bad.safetensors").toStdString();
    es::ckpt::Metadata meta = {{"format", "expertswarm-contribution"},
                               {"version", "1"},
                               {"run", "run-a"},
                               {"round", "3"},
                               {"sender", "peer-x"},
                               {"base_hash", "ab"},
                               {"codec", "f32"}};
    if (value == "<drop>")
      meta.erase(key.toStdString());
    else
      meta[key.toStdString()] = value.toStdString();
    QVERIFY(es::ckpt::saveSafetensors(path, encodeDeltas(sampleDeltas(), Codec::F32), meta).ok());
    const auto loaded = loadContribution(path);
    QVERIFY(!loaded.ok());
    QVERIFY2(loaded.error().find(reason.toStdString()) != std::string::npos, loaded.error().c_str());
    const auto header = readContributionHeader(path);  // the streaming merge's first read: as strict
    QVERIFY(!header.ok());
    QCOMPARE(header.error(), loaded.error());
    QVERIFY2(loaded.error().size() < 600, "an error message longer than its bounded parts");
    QVERIFY(loaded.error().find('\n') == std::string::npos && loaded.error().find('\x1b') == std::string::npos);
  }

  void contributionFileWithDamagedTensorsIsAnError() {
    QTemporaryDir dir;
    const std::string path = dir.filePath("bad.safetensors").toStdString();
    const es::ckpt::Metadata meta = {{"format", "expertswarm-contribution"},
                                     {"version", "1"},
                                     {"run", "run-a"},
                                     {"round", "3"},
                                     {"sender", "peer-x"},
                                     {"base_hash", "ab"},
                                     {"codec", "int8"}};
    const auto encoded = without(encodeDeltas(sampleDeltas(), Codec::Int8), "a.vector.__scale");
    QVERIFY(es::ckpt::saveSafetensors(path, encoded, meta).ok());
    QVERIFY(!loadContribution(path).ok());
    QVERIFY(!loadContribution(dir.filePath("absent.safetensors").toStdString()).ok());
    // The header alone is fine; the deltas are not, and the merge's read says so.
    const auto header = readContributionHeader(path);
    QVERIFY2(header.ok(), header ? "" : header.error().c_str());
    const auto deltas = contributionDeltas(path, *header)();
    QVERIFY(!deltas.ok());
    QVERIFY2(deltas.error().find("__scale") != std::string::npos, deltas.error().c_str());
  }

  // The streaming merge reads a contribution once per pass: every read gives the file's deltas,
  // and a file that no longer holds the contribution first read is an error, never other deltas.
  void contributionDeltasReadTheFileAgainAndNoticeAChange() {
    QTemporaryDir dir;
    const std::string path = dir.filePath("c.safetensors").toStdString();
    const ContributionHeader header{"run-a", 4, "peer-x", "0123456789abcdef", "int8"};
    QVERIFY(saveContribution(path, header, sampleDeltas()).ok());
    const auto read = readContributionHeader(path);
    QVERIFY2(read.ok(), read ? "" : read.error().c_str());
    QCOMPARE(read->sender, header.sender);
    QCOMPARE(read->round, header.round);
    QCOMPARE(read->codec, header.codec);
    const auto source = contributionDeltas(path, *read);
    const auto expected = roundTrip(sampleDeltas(), Codec::Int8);
    for (int pass = 0; pass < 2; ++pass) {
      const auto deltas = source();
      QVERIFY2(deltas.ok(), deltas ? "" : deltas.error().c_str());
      QCOMPARE(deltas->size(), expected.size());
      for (std::size_t i = 0; i < expected.size(); ++i) QVERIFY(torch::equal((*deltas)[i].second, expected[i].second));
    }
    ContributionHeader other = header;
    other.sender = "peer-y";
    QVERIFY(saveContribution(path, other, sampleDeltas()).ok());
    const auto changed = source();
    QVERIFY(!changed.ok());
    QVERIFY2(changed.error().find("changed on disk") != std::string::npos, changed.error().c_str());
  }
};

QTEST_APPLESS_MAIN(DeltaCodecTest)
#include "tst_delta_codec.moc"
