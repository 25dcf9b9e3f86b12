// Issue 39's sparse codec (core/sync/sparse_codec.h): per-chunk top-k with int8 values, and the
// error feedback that sends what was left out later. The selection and rounding are checked
// against the documented rule on hand-made chunks; decoding is strict; with error feedback the
// sum of what was sent plus the residual is the sum of the deltas (nothing lost, only late).
#include "core/sync/contribution_file.h"
#include "core/sync/delta_codec.h"
#include "core/sync/sparse_codec.h"
#include "core/train/run_manifest.h"

#include <torch/torch.h>

#include <QTemporaryDir>
#include <QtTest>

using es::ckpt::NamedTensors;
using es::sync::SparseSpec;

namespace {

std::map<std::string, std::vector<std::int64_t>> shapesOf(const NamedTensors& tensors) {
  std::map<std::string, std::vector<std::int64_t>> out;
  for (const auto& [name, t] : tensors) out[name] = t.sizes().vec();
  return out;
}

const at::Tensor& find(const NamedTensors& tensors, const std::string& name) {
  for (const auto& [n, t] : tensors)
    if (n == name) return t;
  throw std::runtime_error("no tensor " + name);
}

}  // namespace

class SparseCodec : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  // Chunks of 4, keep 2: the two largest |x| of each chunk (ties: the lower index), the last
  // chunk shorter; values round(x / s) with s = the chunk's largest kept |x| / 127.
  void keepsTheLargestEntriesOfEachChunk() {
    const auto x = torch::tensor({0.1f, -0.8f, 0.3f, 0.8f, /**/ 0.0f, 0.0f, 0.0f, 0.0f, /**/ 2.0f, -0.5f, 0.25f});
    const NamedTensors deltas{{"w", x}};
    const SparseSpec spec{4, 2};
    const auto encoded = es::sync::encodeSparse(deltas, spec);
    QCOMPARE(int(encoded.size()), 3);
    const auto& index = find(encoded, "w.__index");
    QCOMPARE(index.numel(), 6);
    const std::vector<std::int16_t> wantIndex{1, 3, 0, 1, 0, 1};  // the zero chunk: ties to the lower index
    for (int i = 0; i < 6; ++i) QCOMPARE(index[i].item<std::int16_t>(), wantIndex[std::size_t(i)]);
    const auto decoded = es::sync::decodeSparse(encoded, spec, shapesOf(deltas));
    QVERIFY2(decoded.ok(), decoded.ok() ? "" : decoded.error().c_str());
    const auto y = decoded->front().second;
    const std::vector<float> want{0.0f, -0.8f, 0.0f, 0.8f, 0, 0, 0, 0, 2.0f, -0.5f, 0.0f};
    for (int i = 0; i < 11; ++i)
      QVERIFY2(std::fabs(y[i].item<float>() - want[std::size_t(i)]) <= 2.0f / 127 / 2 + 1e-6f,
               qPrintable(QString("entry %1: %2").arg(i).arg(y[i].item<float>())));
    QCOMPARE(y[1].item<float>(), -0.8f / 127.0f * 127.0f);  // the chunk's largest value is exact up to float
  }

  // Bytes: keep 64 of 4096 in a 1 Mi-element tensor is ~1.2 % of f32.
  void isAboutKeepOverChunkTimesThreeBytes() {
    const NamedTensors deltas{{"w", torch::randn({1024, 1024})}};
    const auto bytes = es::sync::encodedBytes(es::sync::encodeSparse(deltas, SparseSpec{4096, 64}));
    const double f32 = 1024.0 * 1024 * 4;
    QCOMPARE(bytes, std::int64_t(256 * 64 * 3 + 256 * 4));
    QVERIFY(bytes / f32 < 0.012);
  }

  void decodingIsStrict() {
    const NamedTensors deltas{{"w", torch::randn({10})}};
    const SparseSpec spec{4, 2};
    const auto good = es::sync::encodeSparse(deltas, spec);
    auto mutate = [&](const std::string& name, const std::function<void(at::Tensor&)>& change) {
      NamedTensors bad;
      for (const auto& [n, t] : good) bad.emplace_back(n, n == name ? t.clone() : t);
      for (auto& [n, t] : bad)
        if (n == name) change(t);
      return es::sync::decodeSparse(bad, spec, shapesOf(deltas));
    };
    QVERIFY(es::sync::decodeSparse(good, spec, shapesOf(deltas)).ok());
    QVERIFY(!mutate("w.__index", [](at::Tensor& t) { t[1] = t[0]; }).ok());             // an entry twice
    QVERIFY(!mutate("w.__index", [](at::Tensor& t) { t[5] = std::int16_t(2); }).ok());  // past the last chunk's end
    QVERIFY(!mutate("w.__scale", [](at::Tensor& t) { t[0] = -1.0f; }).ok());
    QVERIFY(!mutate("w.__scale", [](at::Tensor& t) { t[0] = std::nanf(""); }).ok());
    QVERIFY(!mutate("w", [](at::Tensor& t) { t = t.to(at::kFloat); }).ok());  // a wrong dtype
    NamedTensors missing(good.begin(), good.end() - 1);
    QVERIFY(!es::sync::decodeSparse(missing, spec, shapesOf(deltas)).ok());
    auto shapes = shapesOf(deltas);
    shapes["w"] = {14};  // another size: another count of chunks
    QVERIFY(!es::sync::decodeSparse(good, spec, shapes).ok());
  }

  // Over rounds, sent + residual == the deltas' sum (float rounding aside), and every entry gets
  // sent eventually: the residual stays bounded instead of growing with the rounds.
  void errorFeedbackLosesNothing() {
    torch::manual_seed(7);
    es::sync::ErrorFeedback feedback;
    const SparseSpec spec{64, 4};
    at::Tensor sumDeltas = torch::zeros({256}), sumSent = torch::zeros({256});
    double firstResidual = 0;
    for (int round = 0; round < 40; ++round) {
      const NamedTensors deltas{{"w", torch::randn({256}) * 0.01}};
      const auto corrected = feedback.corrected(deltas);
      const auto decoded = es::sync::decodeSparse(es::sync::encodeSparse(corrected, spec), spec, shapesOf(deltas));
      QVERIFY(decoded.ok());
      feedback.keepUnsent(corrected, *decoded);
      sumDeltas += deltas.front().second;
      sumSent += decoded->front().second;
      if (round == 0) firstResidual = feedback.residual().at("w").norm().item<double>();
    }
    const auto residual = feedback.residual().at("w");
    QVERIFY(torch::allclose(sumSent + residual, sumDeltas, 1e-5, 1e-6));
    qInfo("residual norm after 1 round %.4f, after 40 %.4f", firstResidual, residual.norm().item<double>());
    QVERIFY2(
        residual.norm().item<double>() < 10 * firstResidual,
        qPrintable(
            QString("residual %1 after 40 rounds, %2 after 1").arg(residual.norm().item<double>()).arg(firstResidual)));
    QVERIFY(sumSent.norm().item<double>() > 0.5 * sumDeltas.norm().item<double>());
  }

  // 2-bit values: q in {-2, -1, 1, 2} with s = mean|kept| / 1.5; decoding refuses any other q.
  void twoBitValuesAreTwoLevelsAroundTheMean() {
    const NamedTensors deltas{{"w", torch::tensor({0.1f, -0.6f, 0.2f, 1.2f})}};
    SparseSpec spec{4, 3};
    spec.valueBits = 2;
    const auto encoded = es::sync::encodeSparse(deltas, spec);
    const float s = (0.6f + 0.2f + 1.2f) / 3.0f / 1.5f;  // 0.444
    QCOMPARE(find(encoded, "w.__scale")[0].item<float>(), s);
    const auto& q = find(encoded, "w");
    QCOMPARE(q[0].item<std::int8_t>(), std::int8_t(-1));  // -0.6 / s = -1.35
    QCOMPARE(q[1].item<std::int8_t>(), std::int8_t(1));   //  0.2 / s = 0.45: no zero level
    QCOMPARE(q[2].item<std::int8_t>(), std::int8_t(2));   //  1.2 / s = 2.7, held to 2
    QVERIFY(es::sync::decodeSparse(encoded, spec, shapesOf(deltas)).ok());
    for (const std::int8_t bad : {std::int8_t(0), std::int8_t(3)}) {
      NamedTensors changed;
      for (const auto& [n, t] : encoded) changed.emplace_back(n, n == "w" ? t.clone() : t);
      for (auto& [n, t] : changed)
        if (n == "w") t[0] = bad;
      QVERIFY(!es::sync::decodeSparse(changed, spec, shapesOf(deltas)).ok());
    }
  }

  // The wire size counts each chunk's index gaps Rice-coded with its best parameter: indices
  // {0, 1, 2, 3} of a chunk of 8 are gaps of 1 (b = 0: one bit each), 4 bits of parameter.
  void wireBytesCountRiceCodedGaps() {
    const NamedTensors deltas{{"w", torch::tensor({4.0f, 3.0f, 2.0f, 1.0f, 0.0f, 0.0f, 0.0f, 0.0f})}};
    SparseSpec spec{8, 4};
    spec.valueBits = 2;
    const auto encoded = es::sync::encodeSparse(deltas, spec);
    QCOMPARE(es::sync::sparseWireBytes(encoded, spec), std::int64_t(4 + (4 * 2 + 4 + 4 + 7) / 8));
    // Spread indices cost more: {0, 2, 4, 6} has gaps of 2, two bits each (b = 0 or 1).
    const NamedTensors spread{{"w", torch::tensor({4.0f, 0.0f, 3.0f, 0.0f, 2.0f, 0.0f, 1.0f, 0.0f})}};
    QCOMPARE(es::sync::sparseWireBytes(es::sync::encodeSparse(spread, spec), spec),
             std::int64_t(4 + (4 * 2 + 4 + 4 * 2 + 7) / 8));
  }

  // SparseLoCo's decay: the residual carried into the next round is decay × what was not sent.
  void decayShrinksTheCarriedResidual() {
    es::sync::ErrorFeedback feedback(0.5);
    const SparseSpec spec{4, 1};
    const NamedTensors deltas{{"w", torch::tensor({1.0f, 0.5f, 0.0f, 0.0f})}};
    auto corrected = feedback.corrected(deltas);
    feedback.keepUnsent(corrected,
                        *es::sync::decodeSparse(es::sync::encodeSparse(corrected, spec), spec, shapesOf(deltas)));
    QCOMPARE(feedback.residual().at("w")[1].item<float>(), 0.5f);  // not sent
    corrected = feedback.corrected(deltas);
    QCOMPARE(corrected.front().second[1].item<float>(), 0.5f + 0.25f);
  }

  // The codec's name: strict both ways; W = floor(sqrt(chunk / keep)).
  void codecNamesAreStrict() {
    const auto spec = es::sync::parseSparseCodec("sparse/128/4096");
    QVERIFY(spec && spec->keep == 128 && spec->chunk == 4096 && spec->valueBits == 8);
    QCOMPARE(es::sync::sparseCodecName(*spec), std::string("sparse/128/4096"));
    for (const char* bad : {"sparse/0/4096", "sparse/128/64", "sparse/128/40960", "sparse/0128/4096", "sparse/+1/4",
                            "sparse/1/4/", "sparse/1", "sparse//4", "Sparse/1/4", "sparse/1/99999999999"})
      QVERIFY2(!es::sync::parseSparseCodec(bad), bad);
    QVERIFY(!es::sync::parseContributionCodec("sparse/0/4").ok());
    QVERIFY(es::sync::parseContributionCodec("int8").ok());
    QCOMPARE(es::sync::sparseWaitRounds({4096, 128}), 5);  // 128 · 25 <= 4096 < 128 · 36
    QCOMPARE(es::sync::sparseWaitRounds({4096, 4096}), 1);
    es::train::SwarmPolicy run;  // the manifest's name for a sparse run's header codec is this one
    run.compression = "sparse";
    const auto named = es::sync::parseSparseCodec(run.contributionCodec());
    QVERIFY(named && named->keep == run.sparseKeep && named->chunk == run.sparseChunk);
  }

  // A sparse contribution file: saved and loaded through the header's codec, shapes included; held
  // to the model's shapes when the reader knows them, to a size bound when it does not.
  void aSparseContributionFileRoundTrips() {
    QTemporaryDir dir;
    const auto path = dir.filePath("c.safetensors").toStdString();
    torch::manual_seed(3);
    const NamedTensors deltas{{"a", torch::randn({6, 5})}, {"b", torch::randn({7})}};
    const es::sync::ContributionHeader header{"run", 2, "peer", "0123456789abcdef", "sparse/3/8"};
    QVERIFY(es::sync::saveContribution(path, header, deltas).ok());
    const auto loaded = es::sync::loadContribution(path);
    QVERIFY2(loaded.ok(), loaded.ok() ? "" : loaded.error().c_str());
    QCOMPARE(loaded->header.codec, std::string("sparse/3/8"));
    const auto spec = *es::sync::parseSparseCodec("sparse/3/8");
    const auto want = es::sync::decodeSparse(es::sync::encodeSparse(deltas, spec), spec, shapesOf(deltas));
    QVERIFY(want.ok());
    QCOMPARE(int(loaded->deltas.size()), 2);
    for (std::size_t i = 0; i < 2; ++i) {
      QCOMPARE(loaded->deltas[i].first, (*want)[i].first);
      QVERIFY(torch::equal(loaded->deltas[i].second, (*want)[i].second));
      QCOMPARE(loaded->deltas[i].second.sizes(), deltas[i].second.sizes());
    }
    es::sync::TensorShapes model{{"a", {6, 5}}, {"b", {7}}};
    QVERIFY(es::sync::loadContribution(path, &model).ok());
    model["a"] = {5, 6};  // the same count of elements, another shape
    QVERIFY(!es::sync::loadContribution(path, &model).ok());
    model.erase("a");
    QVERIFY(!es::sync::loadContribution(path, &model).ok());  // not a tensor of the model
  }

  // A shape the file declares is checked before anything is allocated: too many dimensions, a
  // negative size, or more elements than the bound (a file of a few bytes per chunk must not
  // decode to gigabytes).
  void declaredShapesAreBoundedBeforeDecoding() {
    const auto codec = *es::sync::parseContributionCodec("sparse/1/32768");
    const NamedTensors deltas{{"w", torch::randn({40})}};
    const auto good = es::sync::encodeContribution(deltas, codec);
    QVERIFY(es::sync::decodeContribution(good, codec).ok());
    auto withShape = [&](const at::Tensor& shape) {
      NamedTensors bad;
      for (const auto& [n, t] : good) bad.emplace_back(n, n == "w.__shape" ? shape : t);
      return es::sync::decodeContribution(bad, codec);
    };
    QVERIFY(!withShape(torch::tensor({std::int64_t(1) << 30}, torch::kLong)).ok());
    QVERIFY(!withShape(torch::tensor({std::int64_t(1) << 20, std::int64_t(1) << 20}, torch::kLong)).ok());
    QVERIFY(!withShape(torch::tensor({-40}, torch::kLong)).ok());
    QVERIFY(!withShape(torch::ones({9}, torch::kLong)).ok());  // nine dimensions
    QVERIFY(!withShape(torch::tensor({40}, torch::kInt)).ok());
    QVERIFY(!withShape(torch::tensor({32769}, torch::kLong)).ok());  // two chunks: another count of values
  }

  // A tensor no longer sent (its expert left the peer's claims) drops its residual.
  void aTensorNoLongerSentDropsItsResidual() {
    es::sync::ErrorFeedback feedback;
    const SparseSpec spec{4, 1};
    NamedTensors deltas{{"a", torch::ones({4})}, {"b", torch::ones({4})}};
    auto corrected = feedback.corrected(deltas);
    feedback.keepUnsent(corrected,
                        *es::sync::decodeSparse(es::sync::encodeSparse(corrected, spec), spec, shapesOf(deltas)));
    QCOMPARE(int(feedback.residual().size()), 2);
    deltas = {{"a", torch::ones({4})}};
    corrected = feedback.corrected(deltas);
    QCOMPARE(corrected.front().second[1].item<float>(), 2.0f);  // its residual added
    feedback.keepUnsent(corrected,
                        *es::sync::decodeSparse(es::sync::encodeSparse(corrected, spec), spec, shapesOf(deltas)));
    QCOMPARE(int(feedback.residual().size()), 1);
    QVERIFY(feedback.residual().count("a"));
  }
};

QTEST_GUILESS_MAIN(SparseCodec)
#include "tst_sparse_codec.moc"
