#include "core/train/bpe_pretokenize.h"

namespace es::train::bpe_detail {
namespace {

// GPT-2's split, on bytes. Bytes >= 0x80 count as letters so a UTF-8
// character (valid or not) never splits a word. Every byte lands in exactly one chunk, which is
// what makes decode(encode(x)) == x hold for arbitrary bytes.

enum class ByteClass : std::uint8_t { Other, Letter, Digit, Space };

ByteClass classOf(char ch) {
  const auto c = static_cast<unsigned char>(ch);
  if (c >= 0x80 || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) return ByteClass::Letter;
  if (c >= '0' && c <= '9') return ByteClass::Digit;
  if (c == ' ' || (c >= '\t' && c <= '\r')) return ByteClass::Space;  // \t \n \v \f \r
  return ByteClass::Other;
}

// Length of an English contraction ('s 't 're 've 'm 'll 'd) at `i`, or 0. Unlike GPT-2 the
// suffix must end the word, so "'tis" or a quoted "'sam" do not lose their first letter.
std::size_t contractionLength(std::string_view s, std::size_t i) {
  for (const std::string_view suffix : {"s", "t", "m", "d", "re", "ve", "ll"}) {
    const std::size_t end = i + 1 + suffix.size();
    if (s.compare(i + 1, suffix.size(), suffix) == 0 && (end >= s.size() || classOf(s[end]) != ByteClass::Letter))
      return 1 + suffix.size();
  }
  return 0;
}

}  // namespace

// End of the chunk that starts at `i` (< s.size()).
std::size_t chunkEnd(std::string_view s, std::size_t i) {
  const std::size_t n = s.size();
  if (s[i] == '\'') {
    if (const std::size_t len = contractionLength(s, i)) return i + len;
  }
  std::size_t j = i;
  if (s[j] == ' ' && j + 1 < n && classOf(s[j + 1]) != ByteClass::Space) ++j;  // " word"
  const ByteClass cls = classOf(s[j]);
  if (cls != ByteClass::Space) {
    while (j < n && classOf(s[j]) == cls) ++j;
    return j;
  }
  while (j < n && classOf(s[j]) == ByteClass::Space) ++j;
  // GPT-2's \s+(?!\S): before a word the run gives up its last byte, so a space there becomes
  // the word's prefix (another whitespace byte becomes a chunk of its own).
  return (j == n || j - i == 1) ? j : j - 1;
}

}  // namespace es::train::bpe_detail
