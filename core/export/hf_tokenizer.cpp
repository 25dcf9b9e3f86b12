#include "core/export/hf_tokenizer.h"

#include <nlohmann/json.hpp>

#include <array>
#include <unordered_map>

namespace es::hf {
namespace {

std::string utf8(std::uint32_t codePoint) {
  std::string out;
  if (codePoint < 0x80) {
    out += char(codePoint);
  } else if (codePoint < 0x800) {
    out += char(0xC0 | (codePoint >> 6));
    out += char(0x80 | (codePoint & 0x3F));
  } else {
    out += char(0xE0 | (codePoint >> 12));
    out += char(0x80 | ((codePoint >> 6) & 0x3F));
    out += char(0x80 | (codePoint & 0x3F));
  }
  return out;
}

// GPT-2's bytes_to_unicode: printable Latin-1 bytes stand for themselves, the other 68 bytes
// take code points 256, 257, … in byte order.
std::array<std::uint32_t, 256> byteLevelTable() {
  std::array<std::uint32_t, 256> table{};
  std::uint32_t next = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    table[std::size_t(b)] = printable ? std::uint32_t(b) : next++;
  }
  return table;
}

nlohmann::ordered_json preTokenizer() {
  nlohmann::ordered_json split = {
      {"type", "Split"}, {"pattern", {{"Regex", pretokenizePattern()}}}, {"behavior", "Isolated"}, {"invert", false}};
  nlohmann::ordered_json byteLevel = {
      {"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", false}};
  return {{"type", "Sequence"}, {"pretokenizers", {split, byteLevel}}};
}

}  // namespace

const std::string& pretokenizePattern() {
  // Letters are ASCII letters and every non-ASCII character (its UTF-8 bytes are >= 0x80, which
  // our byte classes count as letters); spaces are \t \n \v \f \r and ' '.
  static const std::string letter = "[A-Za-z\\x{80}-\\x{10FFFF}]", digit = "[0-9]",
                           other = "[^A-Za-z0-9\\t-\\r \\x{80}-\\x{10FFFF}]", space = "[\\t-\\r ]",
                           nonSpace = "[^\\t-\\r ]";
  static const std::string pattern = "'(?:s|t|m|d|re|ve|ll)(?!" + letter +
                                     ")"  // a contraction ending its word
                                     "| ?" +
                                     letter + "+| ?" + digit + "+| ?" + other +
                                     "+"  // one class, maybe after ' '
                                     "|" +
                                     space + "+(?!" + nonSpace +
                                     ")"  // leaves its last byte to a word
                                     "|" +
                                     space + "+";
  return pattern;
}

std::string byteLevelChar(unsigned char b) {
  static const auto table = byteLevelTable();
  return utf8(table[b]);
}

Expected<std::string> tokenizerJson(const train::BpeTokenizer& tokenizer) {
  std::vector<std::string> pieces;  // id -> its ByteLevel string
  pieces.reserve(std::size_t(tokenizer.vocabSize()));
  for (int b = 0; b < 256; ++b) pieces.push_back(byteLevelChar(static_cast<unsigned char>(b)));
  nlohmann::ordered_json vocab = nlohmann::ordered_json::object();
  nlohmann::ordered_json merges = nlohmann::ordered_json::array();
  std::unordered_map<std::string, std::size_t> idOf;
  for (std::size_t id = 0; id < 256; ++id) idOf.emplace(pieces[id], id);
  for (const auto& [left, right] : tokenizer.merges()) {
    pieces.push_back(pieces.at(left) + pieces.at(right));
    const std::size_t id = pieces.size() - 1;
    if (const auto [it, fresh] = idOf.emplace(pieces.back(), id); !fresh)
      return makeError("tokens " + std::to_string(it->second) + " and " + std::to_string(id) +
                       " are the same bytes; tokenizer.json cannot hold both");
    merges.push_back(pieces.at(left) + " " + pieces.at(right));
  }
  for (std::size_t id = 0; id < pieces.size(); ++id) vocab[pieces[id]] = id;

  nlohmann::ordered_json j;
  j["version"] = "1.0";
  j["truncation"] = nullptr;
  j["padding"] = nullptr;
  j["added_tokens"] = nlohmann::ordered_json::array();
  j["normalizer"] = nullptr;
  j["pre_tokenizer"] = preTokenizer();
  j["post_processor"] = nullptr;
  j["decoder"] = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", false}};
  j["model"] = {{"type", "BPE"},
                {"dropout", nullptr},
                {"unk_token", nullptr},
                {"continuing_subword_prefix", nullptr},
                {"end_of_word_suffix", nullptr},
                {"fuse_unk", false},
                {"byte_fallback", false},
                {"vocab", vocab},
                {"merges", merges}};
  return j.dump(1);
}

std::string tokenizerConfigJson(int modelMaxLength) {
  nlohmann::ordered_json j;
  j["tokenizer_class"] = "PreTrainedTokenizerFast";
  j["model_max_length"] = modelMaxLength;
  j["clean_up_tokenization_spaces"] = false;
  j["add_bos_token"] = false;
  j["add_eos_token"] = false;
  j["added_tokens_decoder"] = nlohmann::ordered_json::object();
  return j.dump(2) + "\n";
}

}  // namespace es::hf
