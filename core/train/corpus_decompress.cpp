#include "core/train/corpus_decompress.h"

#include "core/common/atomic_file.h"

#include <zlib.h>
#include <zstd.h>

#include <fstream>
#include <memory>
#include <vector>

namespace es::train {
namespace {

constexpr std::size_t kChunk = 1 << 16;

bool endsWith(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

std::string tooLarge(const std::string& path, std::int64_t maxBytes) {
  return "corpus \"" + path + "\": decompresses to more than the corpus's " + std::to_string(maxBytes >> 20) +
         " MiB (create-run holds the text in memory while it trains the tokenizer)";
}

// zlib's gz reader follows concatenated gzip members and checks each member's CRC and length.
Expected<std::string> readGzip(const std::string& path, std::int64_t maxBytes) {
  std::unique_ptr<gzFile_s, int (*)(gzFile)> file(gzopen(path.c_str(), "rb"), gzclose);
  if (!file) return makeError("corpus \"" + path + "\": cannot open it");
  gzbuffer(file.get(), kChunk);
  // zlib reads a file without a gzip header as it is ("transparent"): a .gz name on plain bytes
  // is a mistake to report, not text to take.
  if (gzdirect(file.get())) return makeError("corpus \"" + path + "\": not a gzip file (no gzip header)");
  std::string out;
  std::vector<char> chunk(kChunk);
  for (;;) {
    const int n = gzread(file.get(), chunk.data(), unsigned(chunk.size()));
    if (n < 0) {
      int code = 0;
      const char* why = gzerror(file.get(), &code);
      return makeError("corpus \"" + path + "\": not a valid gzip file (" + std::string(why ? why : "?") + ")");
    }
    if (n == 0) break;
    if (std::int64_t(out.size()) + n > maxBytes) return makeError(tooLarge(path, maxBytes));
    out.append(chunk.data(), std::size_t(n));
  }
  // gzread returns 0 at a clean end and also at a truncated one; the error state tells them apart
  // (Z_BUF_ERROR: "unexpected end of file").
  int code = Z_OK;
  gzerror(file.get(), &code);
  if (code != Z_OK && code != Z_STREAM_END)
    return makeError("corpus \"" + path + "\": not a valid gzip file (it ends early)");
  return out;
}

// zstd's streaming decoder, frame after frame; a stream that ends inside a frame is an error.
Expected<std::string> readZstd(const std::string& path, std::int64_t maxBytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return makeError("corpus \"" + path + "\": cannot open it");
  std::unique_ptr<ZSTD_DCtx, std::size_t (*)(ZSTD_DCtx*)> ctx(ZSTD_createDCtx(), ZSTD_freeDCtx);
  if (!ctx) return makeError("corpus \"" + path + "\": out of memory for the zstd decoder");
  // A frame may ask for a window up to 2^31; the default limit (2^27, 128 MiB) is what zstd's own
  // tool accepts without --long, and bounds the decoder's memory.
  std::vector<char> input(ZSTD_DStreamInSize()), output(ZSTD_DStreamOutSize());
  std::string out;
  std::size_t last = 0;  // ZSTD_decompressStream's hint: 0 once a frame is complete
  bool any = false;
  while (in) {
    in.read(input.data(), std::streamsize(input.size()));
    const auto got = std::size_t(in.gcount());
    if (got == 0) break;
    any = true;
    ZSTD_inBuffer src{input.data(), got, 0};
    while (src.pos < src.size) {
      ZSTD_outBuffer dst{output.data(), output.size(), 0};
      last = ZSTD_decompressStream(ctx.get(), &dst, &src);
      if (ZSTD_isError(last))
        return makeError("corpus \"" + path + "\": not a valid zstd file (" + ZSTD_getErrorName(last) + ")");
      if (std::int64_t(out.size() + dst.pos) > maxBytes) return makeError(tooLarge(path, maxBytes));
      out.append(output.data(), dst.pos);
    }
  }
  if (!any) return makeError("corpus \"" + path + "\": an empty file is not a zstd stream");
  if (last != 0) return makeError("corpus \"" + path + "\": not a valid zstd file (it ends inside a frame)");
  return out;
}

}  // namespace

std::string corpusCompression(const std::string& path) {
  if (endsWith(path, ".gz")) return ".gz";
  if (endsWith(path, ".zst")) return ".zst";
  return {};
}

std::string withoutCompression(const std::string& path) {
  return path.substr(0, path.size() - corpusCompression(path).size());
}

Expected<std::string> readCorpusBytes(const std::string& path, std::int64_t maxBytes) {
  const auto kind = corpusCompression(path);
  if (kind == ".gz") return readGzip(path, maxBytes);
  if (kind == ".zst") return readZstd(path, maxBytes);
  auto bytes = readWholeFile(path);
  if (bytes && std::int64_t(bytes->size()) > maxBytes) return makeError(tooLarge(path, maxBytes));
  return bytes;
}

}  // namespace es::train
