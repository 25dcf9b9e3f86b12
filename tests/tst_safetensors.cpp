// Specification of the safetensors reader/writer (core/checkpoint): bit-exact round trips, agreement
// with an independent reader, strict rejection of malformed files, deterministic aligned output.
#include "core/checkpoint/safetensors.h"

#include <ATen/ATen.h>

#include <QByteArray>
#include <QCryptographicHash>
#include <QDir>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QTest>
#include <QtEndian>

#include <cstring>
#include <random>

using namespace es::ckpt;

namespace {

const std::vector<at::ScalarType> kAllTypes = {at::kFloat, at::kBFloat16, at::kHalf, at::kChar,
                                               at::kByte,  at::kShort,    at::kInt,  at::kLong};

QByteArray bytesOf(const at::Tensor& t) {
  const at::Tensor c = t.contiguous();
  return QByteArray(static_cast<const char*>(c.data_ptr()), static_cast<int>(c.numel() * c.element_size()));
}

// A tensor filled with random bits: for float types this hits NaNs with payloads, infinities,
// subnormals and -0, which a value-based (not byte-based) copy would alter or compare wrongly.
at::Tensor randomBits(at::ScalarType type, std::vector<std::int64_t> shape, std::mt19937& rng) {
  at::Tensor t = at::empty(shape, at::TensorOptions().dtype(type));
  auto* p = static_cast<unsigned char*>(t.data_ptr());
  for (std::int64_t i = 0; i < t.numel() * t.element_size(); ++i) p[i] = static_cast<unsigned char>(rng());
  return t;
}

// Float tensor holding explicit special bit patterns (quiet/signalling NaN payloads, ±inf, -0).
at::Tensor specialFloats(at::ScalarType type) {
  const std::vector<std::uint32_t> f32 = {0x7fc00001, 0xffa00abc, 0x7f800001, 0x7f800000,
                                          0xff800000, 0x80000000, 0x00000001};
  const std::vector<std::uint16_t> f16 = {0x7e01, 0xfd55, 0x7c01, 0x7c00, 0xfc00, 0x8000, 0x0001};
  const std::vector<std::uint16_t> bf16 = {0x7fc1, 0xffa1, 0x7f81, 0x7f80, 0xff80, 0x8000, 0x0001};
  at::Tensor t = at::empty({7}, at::TensorOptions().dtype(type));
  const void* src = type == at::kFloat  ? static_cast<const void*>(f32.data())
                    : type == at::kHalf ? static_cast<const void*>(f16.data())
                                        : bf16.data();
  std::memcpy(t.data_ptr(), src, 7 * t.element_size());
  return t;
}

QByteArray withLength(quint64 n, const QByteArray& rest) {
  QByteArray out(8, '\0');
  qToLittleEndian(n, out.data());
  return out + rest;
}

// A hand-made file: correct length prefix, the given header text, `dataBytes` bytes of data.
QByteArray craft(const QByteArray& header, int dataBytes) {
  return withLength(header.size(), header + QByteArray(dataBytes, 'x'));
}

void writeBytes(const QString& path, const QByteArray& bytes) {
  QFile f(path);
  QVERIFY(f.open(QIODevice::WriteOnly));
  QCOMPARE(f.write(bytes), bytes.size());
}

QByteArray readBytes(const QString& path) {
  QFile f(path);
  return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
}

}  // namespace

class TstSafetensors : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void roundTripsEveryDtypeBitExactly();
  void roundTripsNonContiguousAndGradTensors();
  void findsTensorsByName();
  void independentPythonReaderAgreesWithWrittenFile();
  void acceptsHandCraftedValidFile();
  void rejectsMalformedFileWithClearError_data();
  void rejectsMalformedFileWithClearError();
  void refusesToSaveInvalidTensors();
  void writesDeterministicBytesWithAlignedData();

 private:
  NamedTensors everyDtypeTensors();
  QTemporaryDir dir_;
};

NamedTensors TstSafetensors::everyDtypeTensors() {
  std::mt19937 rng(1234);
  NamedTensors tensors;
  const std::vector<std::vector<std::int64_t>> shapes = {{}, {0}, {3, 0, 2}, {5}, {2, 3, 4}};
  for (const auto type : kAllTypes) {
    const std::string base = std::string(c10::toString(type));
    for (std::size_t i = 0; i < shapes.size(); ++i)
      tensors.emplace_back(base + ".s" + std::to_string(i), randomBits(type, shapes[i], rng));
    if (at::isFloatingType(type)) tensors.emplace_back(base + ".special", specialFloats(type));
  }
  return tensors;
}

void TstSafetensors::roundTripsEveryDtypeBitExactly() {
  const NamedTensors tensors = everyDtypeTensors();
  const Metadata metadata = {{"config", R"({"d":8,"name":"x\"y"})"}, {"empty", ""}, {"unicode", "größe ✓"}};
  const std::string path = dir_.filePath("all.safetensors").toStdString();
  const auto saved = saveSafetensors(path, tensors, metadata);
  QVERIFY2(saved.ok(), saved.ok() ? "" : saved.error().c_str());

  const auto loaded = loadSafetensors(path);
  QVERIFY2(loaded.ok(), loaded.ok() ? "" : loaded.error().c_str());
  QCOMPARE(loaded->tensors.size(), tensors.size());
  QVERIFY(loaded->metadata == metadata);
  QVERIFY(std::is_sorted(loaded->tensors.begin(), loaded->tensors.end(),
                         [](const auto& a, const auto& b) { return a.first < b.first; }));
  for (const auto& [name, original] : tensors) {
    const at::Tensor back = loaded->find(name);
    QVERIFY2(back.defined(), name.c_str());
    QCOMPARE(back.scalar_type(), original.scalar_type());
    QCOMPARE(back.sizes().vec(), original.sizes().vec());
    QCOMPARE(back.device().type(), at::kCPU);
    QVERIFY2(bytesOf(back) == bytesOf(original), name.c_str());
  }
  const at::Tensor scalar = loaded->find("Float.s0");
  QVERIFY(scalar.defined());
  QCOMPARE(scalar.dim(), 0);  // a scalar stays 0-dim, not [1]
}

void TstSafetensors::roundTripsNonContiguousAndGradTensors() {
  const at::Tensor base = at::arange(24, at::kFloat).reshape({4, 6});
  const NamedTensors tensors = {
      {"transposed", base.t()}, {"strided", base.slice(1, 0, 6, 2)}, {"grad", at::ones({3}).set_requires_grad(true)}};
  const std::string path = dir_.filePath("views.safetensors").toStdString();
  QVERIFY(saveSafetensors(path, tensors).ok());
  const auto loaded = loadSafetensors(path);
  QVERIFY(loaded.ok());
  for (const auto& [name, original] : tensors) {
    QVERIFY2(at::equal(loaded->find(name), original.detach()), name.c_str());
    QVERIFY(loaded->find(name).is_contiguous());
  }
}

void TstSafetensors::findsTensorsByName() {
  const std::string path = dir_.filePath("find.safetensors").toStdString();
  QVERIFY(saveSafetensors(path, {{"b", at::full({2}, 2)}, {"a", at::full({1}, 1)}, {"c", at::full({3}, 3)}}).ok());
  const auto loaded = loadSafetensors(path);
  QVERIFY(loaded.ok());
  QCOMPARE(loaded->find("c").numel(), 3);
  QCOMPARE(loaded->find("a").item<float>(), 1.0f);
  QVERIFY(!loaded->find("d").defined());
  QVERIFY(!loaded->find("").defined());
}

void TstSafetensors::independentPythonReaderAgreesWithWrittenFile() {
  const QString python = QStandardPaths::findExecutable("python3");
  if (python.isEmpty()) QFAIL("python3 is not on PATH; it is part of the test setup");

  const NamedTensors tensors = everyDtypeTensors();
  const Metadata metadata = {{"format", "test"}, {"quote", "a\"b\\c"}, {"unicode", "π"}};
  const QString path = dir_.filePath("python.safetensors");
  QVERIFY(saveSafetensors(path.toStdString(), tensors, metadata).ok());

  QProcess process;
  process.start(python, {QStringLiteral(ES_TEST_SOURCE_DIR "/read_safetensors.py"), path});
  QVERIFY(process.waitForFinished(60000));
  QVERIFY2(process.exitStatus() == QProcess::NormalExit && process.exitCode() == 0,
           process.readAllStandardError().constData());
  const QJsonObject result = QJsonDocument::fromJson(process.readAllStandardOutput()).object();

  const QJsonObject pyMetadata = result.value("metadata").toObject();
  QCOMPARE(pyMetadata.size(), static_cast<qsizetype>(metadata.size()));
  for (const auto& [key, value] : metadata)
    QCOMPARE(pyMetadata.value(QString::fromStdString(key)).toString(), QString::fromStdString(value));

  NamedTensors sorted = tensors;
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  const QJsonArray pyTensors = result.value("tensors").toArray();
  QCOMPARE(pyTensors.size(), static_cast<qsizetype>(sorted.size()));
  const QMap<at::ScalarType, QString> names = {{at::kFloat, "F32"}, {at::kBFloat16, "BF16"}, {at::kHalf, "F16"},
                                               {at::kChar, "I8"},   {at::kByte, "U8"},       {at::kShort, "I16"},
                                               {at::kInt, "I32"},   {at::kLong, "I64"}};
  for (qsizetype i = 0; i < pyTensors.size(); ++i) {
    const QJsonObject py = pyTensors[i].toObject();
    const auto& [name, tensor] = sorted[static_cast<std::size_t>(i)];
    QCOMPARE(py.value("name").toString(), QString::fromStdString(name));
    QCOMPARE(py.value("dtype").toString(), names.value(tensor.scalar_type()));
    QJsonArray shape;
    for (const auto d : tensor.sizes()) shape.append(static_cast<qint64>(d));
    QCOMPARE(py.value("shape").toArray(), shape);
    const QByteArray sha = QCryptographicHash::hash(bytesOf(tensor), QCryptographicHash::Sha256).toHex();
    QCOMPARE(py.value("sha256").toString().toLatin1(), sha);
  }
}

void TstSafetensors::acceptsHandCraftedValidFile() {
  // Unsorted keys, data not in key order, whitespace padding: all legal per the spec.
  const QByteArray header = R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[4,12]},)"
                            R"( "b":{"shape":[4],"data_offsets":[0,4],"dtype":"U8"},"__metadata__":{"k":"v"}}   )";
  QByteArray data("\x01\x02\x03\x04", 4);
  const float w[2] = {1.5f, -2.0f};
  data.append(reinterpret_cast<const char*>(w), sizeof w);
  const QString path = dir_.filePath("handmade.safetensors");
  writeBytes(path, withLength(header.size(), header + data));

  const auto parsed = readHeader(path.toStdString());
  QVERIFY2(parsed.ok(), parsed.ok() ? "" : parsed.error().c_str());
  QCOMPARE(parsed->tensors.size(), std::size_t(2));
  QCOMPARE(parsed->tensors[0].name, std::string("b"));  // offset order
  QCOMPARE(parsed->dataStart, std::uint64_t(8 + header.size()));
  const auto loaded = loadSafetensors(path.toStdString());
  QVERIFY2(loaded.ok(), loaded.ok() ? "" : loaded.error().c_str());
  QCOMPARE(loaded->metadata.at("k"), std::string("v"));
  QCOMPARE(loaded->find("b")[3].item<std::uint8_t>(), std::uint8_t(4));
  QCOMPARE(loaded->find("w")[1].item<float>(), -2.0f);
}

void TstSafetensors::rejectsMalformedFileWithClearError_data() {
  QTest::addColumn<QByteArray>("file");
  QTest::addColumn<QString>("keyword");

  const QByteArray u8x8 = R"({"a":{"dtype":"U8","shape":[8],"data_offsets":[0,8]}})";
  auto entry = [](const char* name, const char* dtype, const char* shape, const char* offsets) {
    return QByteArray("\"") + name + R"(":{"dtype":)" + dtype + R"(,"shape":)" + shape + R"(,"data_offsets":)" +
           offsets + "}";
  };
  auto one = [&](const char* dtype, const char* shape, const char* offsets) {
    return "{" + entry("a", dtype, shape, offsets) + "}";
  };

  QTest::newRow("empty file") << QByteArray() << "truncated";
  QTest::newRow("shorter than length prefix") << QByteArray(5, '\0') << "truncated";
  QTest::newRow("header cut") << craft(u8x8, 8).left(30) << "past the end";
  QTest::newRow("data cut") << craft(u8x8, 8).chopped(3) << "truncated";
  QTest::newRow("header length past EOF") << withLength(1000, "{}") << "past the end";
  QTest::newRow("header length 2^64-1") << withLength(~quint64(0), "{}") << "too large";
  QTest::newRow("header length over limit") << withLength(kMaxHeaderBytes + 1, "{}") << "too large";
  QTest::newRow("header length 0") << withLength(0, "{}") << "empty";
  QTest::newRow("header not JSON") << craft("{not json", 0) << "not valid JSON";
  QTest::newRow("header not UTF-8") << craft("{\"\xff\":1}", 0) << "not valid JSON";
  QTest::newRow("header is JSON array") << craft("[1,2]", 0) << "JSON object";
  QTest::newRow("entry not object") << craft(R"({"a":[1]})", 0) << "must be a JSON object";
  QTest::newRow("overlapping offsets") << craft("{" + entry("a", "\"U8\"", "[8]", "[0,8]") + "," +
                                                    entry("b", "\"U8\"", "[8]", "[4,12]") + "}",
                                                12)
                                       << "overlap";
  QTest::newRow("out-of-range offsets") << craft(one("\"U8\"", "[8]", "[100,108]"), 8) << "out of range";
  QTest::newRow("offsets near 2^64") << craft(one("\"U8\"", "[1]", "[18446744073709551614,18446744073709551615]"), 1)
                                     << "out of range";
  QTest::newRow("offsets begin after end") << craft(one("\"U8\"", "[0]", "[8,0]"), 8) << "begin after end";
  QTest::newRow("offsets not a pair") << craft(one("\"U8\"", "[0]", "[0]"), 0) << "data_offsets";
  QTest::newRow("negative offset") << craft(one("\"U8\"", "[0]", "[-1,0]"), 0) << "data_offsets";
  QTest::newRow("hole between tensors") << craft("{" + entry("a", "\"U8\"", "[4]", "[0,4]") + "," +
                                                     entry("b", "\"U8\"", "[4]", "[8,12]") + "}",
                                                 12)
                                        << "hole";
  QTest::newRow("hole at start") << craft(one("\"U8\"", "[4]", "[4,8]"), 8) << "hole";
  QTest::newRow("trailing bytes") << craft(one("\"U8\"", "[4]", "[0,4]"), 8) << "trailing";
  QTest::newRow("unknown dtype") << craft(one("\"F64\"", "[1]", "[0,8]"), 8) << "unknown dtype";
  QTest::newRow("dtype not a string") << craft(one("4", "[1]", "[0,4]"), 4) << "unknown dtype";
  QTest::newRow("shape/byte-count mismatch") << craft(one("\"F32\"", "[3]", "[0,8]"), 8) << "mismatch";
  QTest::newRow("duplicate tensor names")
      << craft("{" + entry("a", "\"U8\"", "[4]", "[0,4]") + "," + entry("a", "\"U8\"", "[4]", "[4,8]") + "}", 8)
      << "duplicate tensor name";
  QTest::newRow("duplicate key in entry")
      << craft(R"({"a":{"dtype":"U8","dtype":"U8","shape":[1],"data_offsets":[0,1]}})", 1) << "duplicate key";
  QTest::newRow("unexpected key") << craft(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"x":0}})", 1)
                                  << "unexpected key";
  QTest::newRow("missing key") << craft(R"({"a":{"dtype":"U8","shape":[1]}})", 1) << "missing key";
  QTest::newRow("non-string metadata value") << craft(R"({"__metadata__":{"k":1}})", 0) << "not a string";
  QTest::newRow("metadata not an object") << craft(R"({"__metadata__":"k"})", 0) << "__metadata__";
  QTest::newRow("negative shape") << craft(one("\"U8\"", "[-1]", "[0,0]"), 0) << "negative";
  QTest::newRow("fractional shape") << craft(one("\"U8\"", "[1.5]", "[0,1]"), 1) << "integers";
  QTest::newRow("shape not array") << craft(one("\"U8\"", "4", "[0,4]"), 4) << "shape";
  QTest::newRow("dimension beyond int64") << craft(one("\"U8\"", "[9223372036854775808]", "[0,0]"), 0) << "too large";
  // Wrapping 64-bit products would match these offsets: 2^32 * 2^32 = 0, 4 * (2^62 + 1) = 4.
  QTest::newRow("overflowing shape wraps to 0")
      << craft(one("\"U8\"", "[4294967296,4294967296]", "[0,0]"), 0) << "overflow";
  QTest::newRow("overflowing byte count wraps to 4")
      << craft(one("\"F32\"", "[4611686018427387905]", "[0,4]"), 4) << "overflow";
}

void TstSafetensors::rejectsMalformedFileWithClearError() {
  QFETCH(QByteArray, file);
  QFETCH(QString, keyword);
  const QString path = dir_.filePath("bad.safetensors");
  writeBytes(path, file);

  const auto header = readHeader(path.toStdString());
  QVERIFY2(!header.ok(), "malformed header accepted");
  const QString error = QString::fromStdString(header.error());
  QVERIFY2(error.contains(keyword, Qt::CaseInsensitive), qPrintable("error lacks \"" + keyword + "\": " + error));
  // Errors about one tensor name it, so a user can find the culprit.
  if (error.startsWith(QString::fromStdString("\"" + path.toStdString() + "\": tensor ")))
    QVERIFY(error.contains("\"a\""));

  const auto loaded = loadSafetensors(path.toStdString());
  QVERIFY(!loaded.ok());
  QCOMPARE(QString::fromStdString(loaded.error()), error);
}

void TstSafetensors::refusesToSaveInvalidTensors() {
  const at::Tensor t = at::zeros({2});
  const std::vector<std::pair<NamedTensors, QString>> cases = {
      {{{"a", t}, {"a", t}}, "duplicate"},  {{{"", t}}, "empty name"},
      {{{"__metadata__", t}}, "reserved"},  {{{"d", at::zeros({2}, at::kDouble)}}, "unsupported dtype"},
      {{{"u", at::Tensor()}}, "undefined"}, {{{"\xff", t}}, "UTF-8"},
  };
  for (const auto& [tensors, keyword] : cases) {
    const QString path = dir_.filePath("refused.safetensors");
    const auto saved = saveSafetensors(path.toStdString(), tensors);
    QVERIFY2(!saved.ok(), qPrintable(keyword));
    QVERIFY2(QString::fromStdString(saved.error()).contains(keyword), saved.error().c_str());
    QVERIFY(!QFile::exists(path));
  }
}

void TstSafetensors::writesDeterministicBytesWithAlignedData() {
  NamedTensors tensors = everyDtypeTensors();
  const Metadata metadata = {{"a", "1"}, {"b", "2"}};
  const QString first = dir_.filePath("det1.safetensors");
  const QString second = dir_.filePath("det2.safetensors");
  QVERIFY(saveSafetensors(first.toStdString(), tensors, metadata).ok());
  std::reverse(tensors.begin(), tensors.end());  // input order must not matter
  QVERIFY(saveSafetensors(second.toStdString(), tensors, metadata).ok());
  QVERIFY(!readBytes(first).isEmpty());
  QCOMPARE(readBytes(first), readBytes(second));

  // Names of every length mod 8 exercise every amount of padding.
  for (int length = 1; length <= 9; ++length) {
    const QString path = dir_.filePath("align.safetensors");
    QVERIFY(saveSafetensors(path.toStdString(), {{std::string(length, 'n'), at::ones({3}, at::kByte)}}).ok());
    const QByteArray bytes = readBytes(path);
    const quint64 n = qFromLittleEndian<quint64>(bytes.constData());
    QCOMPARE((8 + n) % 8, quint64(0));
    QCOMPARE(quint64(bytes.size()), 8 + n + 3);
    const auto header = readHeader(path.toStdString());
    QVERIFY(header.ok());
    QCOMPARE(header->dataStart % 8, std::uint64_t(0));
    QCOMPARE(bytes.mid(static_cast<int>(8 + n)), QByteArray(3, '\x01'));
  }
}

QTEST_APPLESS_MAIN(TstSafetensors)
#include "tst_safetensors.moc"
