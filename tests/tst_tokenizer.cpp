// Specification of the byte-level BPE tokenizer (es_text) and of token shard files.
#include "core/common/atomic_file.h"
#include "core/train/bpe_tokenizer.h"
#include "core/train/token_shard.h"

#include <QFile>
#include <QTemporaryDir>
#include <QTest>

#include <algorithm>
#include <cctype>
#include <optional>
#include <random>
#include <stdexcept>

using es::train::BpeTokenizer;
using es::train::TokenId;

namespace {

const std::string kCorpusDir = std::string(ES_SHARE_DIR) + "/runs/sotu-text/corpus/";
constexpr std::size_t kTrainPrefix = 1 << 20;  // 1 MB of training text keeps each training < 0.1 s

std::string readCorpus(const std::string& name) {
  auto text = es::readWholeFile(kCorpusDir + name);
  if (!text) qFatal("%s (build the es_resources target first)", text.error().c_str());
  return std::move(text).value();
}

// Inputs a tokenizer must survive: every byte value, NULs, broken UTF-8, random noise, text mixed
// with noise (so learned merges fire next to garbage) and one chunk too long for quadratic code.
std::vector<std::string> awkwardInputs(const std::string& text) {
  std::vector<std::string> inputs = {"",
                                     " ",
                                     "\n",
                                     std::string(1, '\0'),
                                     std::string(100, '\0'),
                                     "\xC3",
                                     "\x80\x80\xBF",
                                     "\xFF\xFE\xFD",
                                     "\xC0\xAF",
                                     "\xED\xA0\x80",
                                     "caf\xC3\xA9 na\xC3\xAFve \xE2\x80\x94 \xF0\x9F\x98\x80!",
                                     "it's   they'll  'tis\t\r\n  \n x",
                                     std::string(5000, ' ') + "word",
                                     std::string(100000, 'a'),
                                     std::string(20000, '\n')};
  std::string allBytes;
  for (int b = 0; b < 256; ++b) allBytes += static_cast<char>(b);
  inputs.push_back(allBytes);
  inputs.push_back(allBytes + allBytes + std::string(allBytes.rbegin(), allBytes.rend()));
  std::mt19937 rng(20240601);
  for (std::size_t length : {1, 2, 3, 5, 8, 13, 64, 255, 256, 257, 1000, 4096, 65537}) {
    for (int trial = 0; trial < 4; ++trial) {
      std::string noise(length, '\0');
      for (char& c : noise) c = static_cast<char>(rng() & 0xffu);
      inputs.push_back(noise);
      std::string mixed = text.substr(rng() % (text.size() - length), length);
      for (char& c : mixed)
        if (rng() % 8 == 0) c = static_cast<char>(rng() & 0xffu);
      inputs.push_back(mixed);
    }
  }
  return inputs;
}

bool isWhitespace(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

// 0 letter (incl. bytes >= 0x80), 1 digit, 2 other non-space.
int wordClass(char ch) {
  const auto c = static_cast<unsigned char>(ch);
  if (c >= 0x80 || std::isalpha(c)) return 0;
  return std::isdigit(c) ? 1 : 2;
}

std::string prefix(const std::string& bytes, std::size_t n) { return bytes.substr(0, n); }

}  // namespace

class TokenizerTest : public QObject {
  Q_OBJECT

 private:
  std::string train_;  // first 1 MB of the training corpus
  std::string val_;
  std::optional<BpeTokenizer> trained_;  // 4096 tokens learned from train_

 private Q_SLOTS:
  void initTestCase() {
    train_ = prefix(readCorpus("sotu-train.txt"), kTrainPrefix);
    val_ = readCorpus("sotu-val.txt");
    auto tokenizer = BpeTokenizer::train(train_, 4096);
    QVERIFY2(tokenizer.ok(), tokenizer.ok() ? "" : tokenizer.error().c_str());
    QCOMPARE(tokenizer->vocabSize(), 4096);
    trained_ = std::move(tokenizer).value();
  }

  void decodeOfEncodeIsExactForArbitraryBytes_data() {
    QTest::addColumn<bool>("useTrained");
    QTest::newRow("trained on English, 4096 tokens") << true;
    QTest::newRow("untrained, 256 byte tokens") << false;
  }
  void decodeOfEncodeIsExactForArbitraryBytes() {
    QFETCH(bool, useTrained);
    const BpeTokenizer tokenizer = useTrained ? *trained_ : BpeTokenizer();
    for (const std::string& input : awkwardInputs(train_)) {
      const std::vector<TokenId> ids = tokenizer.encode(input);
      for (const TokenId id : ids) QVERIFY(id < TokenId(tokenizer.vocabSize()));
      QVERIFY2(tokenizer.decode(ids) == input, qPrintable(QString("round trip failed for %1 bytes").arg(input.size())));
    }
  }

  void untrainedTokenizerMapsEachByteToItsOwnId() {
    const BpeTokenizer bytes;
    QCOMPARE(bytes.vocabSize(), 256);
    const std::string input("A\0\xFF z", 5);
    QCOMPARE(bytes.encode(input), (std::vector<TokenId>{65, 0, 255, 32, 122}));
  }

  void noTokenSpansAWordBoundary() {
    // Chunks are: [space]letters, [space]digits, [space]punctuation, whitespace, contractions.
    const std::vector<std::string> contractions = {"'s", "'t", "'re", "'ve", "'m", "'ll", "'d"};
    for (const TokenId id : trained_->encode(val_)) {
      const std::string bytes = trained_->decode({id});
      if (std::all_of(bytes.begin(), bytes.end(), isWhitespace)) continue;
      if (std::find(contractions.begin(), contractions.end(), bytes) != contractions.end()) continue;
      const std::string body = bytes[0] == ' ' ? bytes.substr(1) : bytes;
      QVERIFY2(!body.empty(), bytes.c_str());
      for (const char c : body) {
        QVERIFY2(!isWhitespace(c) && wordClass(c) == wordClass(body[0]),
                 qPrintable("token '" + QString::fromStdString(bytes) + "'"));
      }
    }
  }

  void contractionsSplitOffTheWord() {
    std::string text;
    for (int i = 0; i < 200; ++i) text += "it's ok, it's fine, we're here. ";
    const auto tokenizer = BpeTokenizer::train(text, 1000);
    QVERIFY(tokenizer.ok());
    std::vector<std::string> pieces;
    for (const TokenId id : tokenizer->encode(" it's we're")) pieces.push_back(tokenizer->decode({id}));
    QCOMPARE(pieces, (std::vector<std::string>{" it", "'s", " we", "'re"}));
  }

  void trainingTwiceOnTheSameTextGivesIdenticalMerges() {
    const auto again = BpeTokenizer::train(train_, 4096);
    QVERIFY(again.ok());
    QVERIFY(again->merges() == trained_->merges());
  }

  void trainingOnDifferentTextGivesDifferentMerges() {
    const std::string full = readCorpus("sotu-train.txt");
    const auto other = BpeTokenizer::train(full.substr(full.size() - kTrainPrefix), 4096);
    QVERIFY(other.ok());
    QCOMPARE(other->vocabSize(), 4096);
    QVERIFY(other->merges() != trained_->merges());
  }

  void trainingBreaksCountTiesBySmallestTokenPair() {
    // Chunks "ab" " ab" " cd" " cd": (' ','c'), ('a','b') and ('c','d') all occur twice.
    const auto tokenizer = BpeTokenizer::train("ab ab cd cd", 1000);
    QVERIFY(tokenizer.ok());
    using M = std::pair<TokenId, TokenId>;
    QCOMPARE(tokenizer->merges(), (std::vector<M>{{' ', 'c'}, {'a', 'b'}, {256, 'd'}}));
  }

  void trainingStopsWhenNoPairOccursTwice() {
    const auto abab = BpeTokenizer::train("abab", 1000);  // (a,b) twice, then (ab,ab) once
    QVERIFY(abab.ok());
    QCOMPARE(abab->vocabSize(), 257);
    const auto distinct = BpeTokenizer::train("abcdef", 1000);
    QVERIFY(distinct.ok());
    QCOMPARE(distinct->vocabSize(), 256);
  }

  void trainingRejectsVocabSizeOutsideTheUint16Range() {
    for (const int bad : {-1, 0, 255, 65537})
      QVERIFY2(!BpeTokenizer::train("abab", bad).ok(), qPrintable(QString::number(bad)));
    QCOMPARE(BpeTokenizer::train(train_.substr(0, 1000), 256)->vocabSize(), 256);
    QVERIFY(BpeTokenizer::train(train_.substr(0, 1000), 65536).ok());
  }

  void decodeThrowsOnIdsOutsideTheVocabulary() {
    QVERIFY_THROWS_EXCEPTION(std::out_of_range, trained_->decode({65, 4096}));
    QVERIFY_THROWS_EXCEPTION(std::out_of_range, BpeTokenizer().decode({256}));
    QCOMPARE(trained_->decode({4095}).empty(), false);
  }

  void jsonSaveAndLoadGiveIdenticalEncodings() {
    const auto parsed = BpeTokenizer::fromJson(trained_->toJson());
    QVERIFY2(parsed.ok(), parsed.ok() ? "" : parsed.error().c_str());
    QVERIFY(parsed->merges() == trained_->merges());
    QVERIFY(parsed->encode(val_) == trained_->encode(val_));

    QTemporaryDir dir;
    const std::string path = dir.filePath("tokenizer.json").toStdString();
    QVERIFY(trained_->save(path).ok());
    const auto loaded = BpeTokenizer::load(path);
    QVERIFY2(loaded.ok(), loaded.ok() ? "" : loaded.error().c_str());
    QCOMPARE(loaded->vocabSize(), 4096);
    QVERIFY(loaded->encode(val_) == trained_->encode(val_));
    QVERIFY(!BpeTokenizer::load(dir.filePath("missing.json").toStdString()).ok());
  }

  void fromJsonRejectsMalformedInput_data() {
    QTest::addColumn<QString>("json");
    const auto row = [](const char* name, const char* json) { QTest::newRow(name) << QString::fromUtf8(json); };
    row("not JSON", R"({"type":"byte-bpe",)");
    row("empty", "");
    row("not an object", "[]");
    row("missing type", R"({"version":1,"vocab_size":256,"merges":[]})");
    row("wrong type", R"({"type":"sentencepiece","version":1,"vocab_size":256,"merges":[]})");
    row("unknown version", R"({"type":"byte-bpe","version":2,"vocab_size":256,"merges":[]})");
    row("version as string", R"({"type":"byte-bpe","version":"1","vocab_size":256,"merges":[]})");
    row("vocab_size mismatch", R"({"type":"byte-bpe","version":1,"vocab_size":258,"merges":[[97,98]]})");
    row("vocab_size too small", R"({"type":"byte-bpe","version":1,"vocab_size":255,"merges":[]})");
    row("merges not an array", R"({"type":"byte-bpe","version":1,"vocab_size":256,"merges":{}})");
    row("merge of a future token", R"({"type":"byte-bpe","version":1,"vocab_size":257,"merges":[[256,97]]})");
    row("merge of itself", R"({"type":"byte-bpe","version":1,"vocab_size":258,"merges":[[97,98],[257,97]]})");
    row("merge not a pair", R"({"type":"byte-bpe","version":1,"vocab_size":257,"merges":[[97]]})");
    row("negative id", R"({"type":"byte-bpe","version":1,"vocab_size":257,"merges":[[-1,97]]})");
    row("fractional id", R"({"type":"byte-bpe","version":1,"vocab_size":257,"merges":[[97.5,98]]})");
    row("duplicate merge", R"({"type":"byte-bpe","version":1,"vocab_size":258,"merges":[[97,98],[97,98]]})");
  }
  void fromJsonRejectsMalformedInput() {
    QFETCH(QString, json);
    const auto parsed = BpeTokenizer::fromJson(json.toStdString());
    QVERIFY(!parsed.ok());
    QVERIFY2(parsed.error().find("tokenizer JSON") == 0, parsed.error().c_str());
  }

  void fromJsonAcceptsAMinimalTokenizer() {
    const auto parsed =
        BpeTokenizer::fromJson(R"({"type":"byte-bpe","version":1,"vocab_size":257,"merges":[[97,98]]})");
    QVERIFY2(parsed.ok(), parsed.ok() ? "" : parsed.error().c_str());
    QCOMPARE(parsed->encode("abab"), (std::vector<TokenId>{256, 256}));
  }

  void validationTextCompressesToMoreThanThreeBytesPerToken() {
    // A 4096 tokenizer trained on 1 MB reaches about 4.0 bytes/token on the validation speeches.
    const double bytesPerToken = double(val_.size()) / double(trained_->encode(val_).size());
    qInfo("validation: %.3f bytes/token", bytesPerToken);
    QVERIFY2(bytesPerToken > 3.7, qPrintable(QString::number(bytesPerToken)));
  }

  void tokenShardRoundTripsTokens() {
    QTemporaryDir dir;
    const std::string path = dir.filePath("train.tokens").toStdString();
    std::vector<std::uint16_t> tokens = {0, 1, 255, 256, 4095, 65535};
    std::mt19937 rng(5);
    for (int i = 0; i < 200000; ++i) tokens.push_back(static_cast<std::uint16_t>(rng()));
    QVERIFY(es::train::writeTokenShard(path, tokens).ok());
    QCOMPARE(QFile(QString::fromStdString(path)).size(), qint64(16 + 2 * tokens.size()));
    const auto read = es::train::readTokenShard(path);
    QVERIFY2(read.ok(), read.ok() ? "" : read.error().c_str());
    QVERIFY(*read == tokens);

    QVERIFY(es::train::writeTokenShard(path, {}).ok());
    QVERIFY(es::train::readTokenShard(path)->empty());
  }

  void tokenShardHeaderIsMagicThenLittleEndianCount() {
    QTemporaryDir dir;
    const std::string path = dir.filePath("small.tokens").toStdString();
    QVERIFY(es::train::writeTokenShard(path, {0x0102, 0xA0B0}).ok());
    const std::string expected("ESTOKEN1\x02\0\0\0\0\0\0\0\x02\x01\xB0\xA0", 20);
    QCOMPARE(*es::readWholeFile(path), expected);
  }

  void truncatedTokenShardIsRejected() {
    QTemporaryDir dir;
    const std::string path = dir.filePath("cut.tokens").toStdString();
    for (const qint64 size : {0, 10, 16, 17, 16 + 2 * 99}) {
      QVERIFY(es::train::writeTokenShard(path, std::vector<std::uint16_t>(100, 7)).ok());
      QVERIFY(QFile::resize(QString::fromStdString(path), size));
      const auto read = es::train::readTokenShard(path);
      QVERIFY2(!read.ok(), qPrintable(QString("size %1 accepted").arg(size)));
      QVERIFY2(read.error().find("truncated") != std::string::npos, read.error().c_str());
    }
  }

  void tokenShardWithWrongMagicOrTrailingBytesIsRejected() {
    QTemporaryDir dir;
    const std::string path = dir.filePath("bad.tokens").toStdString();
    QVERIFY(es::writeFileAtomically(path, std::string("ESTOKEN2\x01\0\0\0\0\0\0\0\x05\x00", 18)).ok());
    auto read = es::train::readTokenShard(path);
    QVERIFY(!read.ok());
    QVERIFY2(read.error().find("magic") != std::string::npos, read.error().c_str());

    QVERIFY(es::writeFileAtomically(path, std::string("ESTOKEN1\x01\0\0\0\0\0\0\0\x05\x00\x06\x00", 20)).ok());
    read = es::train::readTokenShard(path);
    QVERIFY(!read.ok());
    QVERIFY2(read.error().find("1 tokens") != std::string::npos, read.error().c_str());

    QVERIFY(!es::train::readTokenShard(dir.filePath("missing.tokens").toStdString()).ok());
  }
};

QTEST_APPLESS_MAIN(TokenizerTest)
#include "tst_tokenizer.moc"
