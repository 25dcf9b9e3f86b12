#include "core/train/corpus_decompress.h"

#include <zlib.h>
#include <zstd.h>

#include <fstream>
#include <vector>

namespace es::train {
namespace {

constexpr std::size_t kChunk = 1 << 16;

bool endsWith(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

std::string corrupt(const std::string& path, const std::string& kind, const std::string& why) {
  return "corpus \"" + path + "\": not a valid " + kind + " file (" + why + ")";
}

class PlainReader : public CorpusFileReader {
 public:
  PlainReader(std::string path, std::ifstream in) : path_(std::move(path)), in_(std::move(in)) {}
  Expected<std::size_t> read(char* out, std::size_t n) override {
    in_.read(out, std::streamsize(n));
    if (in_.bad()) return makeError("corpus \"" + path_ + "\": read error");
    return std::size_t(in_.gcount());
  }

 private:
  std::string path_;
  std::ifstream in_;
};

// zlib's gz reader follows concatenated gzip members and checks each member's CRC and length.
class GzipReader : public CorpusFileReader {
 public:
  GzipReader(std::string path, gzFile file) : path_(std::move(path)), file_(file, gzclose) {}
  Expected<std::size_t> read(char* out, std::size_t n) override {
    const int got = gzread(file_.get(), out, unsigned(std::min<std::size_t>(n, 1u << 30)));
    int code = Z_OK;
    if (got < 0) {
      const char* why = gzerror(file_.get(), &code);
      return makeError(corrupt(path_, "gzip", why ? why : "?"));
    }
    // gzread returns 0 at a clean end and also at a truncated one; the error state tells them
    // apart (Z_BUF_ERROR: "unexpected end of file").
    if (got == 0 && (gzerror(file_.get(), &code), code != Z_OK && code != Z_STREAM_END))
      return makeError(corrupt(path_, "gzip", "it ends early"));
    return std::size_t(got);
  }

 private:
  std::string path_;
  std::unique_ptr<gzFile_s, int (*)(gzFile)> file_;
};

// zstd's streaming decoder, frame after frame; a stream that ends inside a frame is an error.
// A frame may ask for a window up to 2^31; the default limit (2^27, 128 MiB) is what zstd's own
// tool accepts without --long, and bounds the decoder's memory.
class ZstdReader : public CorpusFileReader {
 public:
  ZstdReader(std::string path, std::ifstream in, ZSTD_DCtx* ctx)
      : path_(std::move(path)), in_(std::move(in)), ctx_(ctx, ZSTD_freeDCtx), input_(ZSTD_DStreamInSize()) {}
  Expected<std::size_t> read(char* out, std::size_t n) override {
    ZSTD_outBuffer dst{out, n, 0};
    while (dst.pos == 0) {
      if (src_.pos == src_.size) {
        in_.read(input_.data(), std::streamsize(input_.size()));
        if (in_.bad()) return makeError("corpus \"" + path_ + "\": read error");
        src_ = {input_.data(), std::size_t(in_.gcount()), 0};
        if (src_.size == 0) break;
        any_ = true;
      }
      last_ = ZSTD_decompressStream(ctx_.get(), &dst, &src_);
      if (ZSTD_isError(last_)) return makeError(corrupt(path_, "zstd", ZSTD_getErrorName(last_)));
    }
    if (dst.pos == 0 && !any_) return makeError("corpus \"" + path_ + "\": an empty file is not a zstd stream");
    if (dst.pos == 0 && last_ != 0) return makeError(corrupt(path_, "zstd", "it ends inside a frame"));
    return dst.pos;
  }

 private:
  std::string path_;
  std::ifstream in_;
  std::unique_ptr<ZSTD_DCtx, std::size_t (*)(ZSTD_DCtx*)> ctx_;
  std::vector<char> input_;
  ZSTD_inBuffer src_{nullptr, 0, 0};
  std::size_t last_ = 0;  // ZSTD_decompressStream's hint: 0 once a frame is complete
  bool any_ = false;
};

}  // namespace

std::string corpusCompression(const std::string& path) {
  if (endsWith(path, ".gz")) return ".gz";
  if (endsWith(path, ".zst")) return ".zst";
  return {};
}

std::string withoutCompression(const std::string& path) {
  return path.substr(0, path.size() - corpusCompression(path).size());
}

Expected<std::unique_ptr<CorpusFileReader>> CorpusFileReader::open(const std::string& path) {
  const auto kind = corpusCompression(path);
  if (kind == ".gz") {
    gzFile file = gzopen(path.c_str(), "rb");
    if (!file) return makeError("corpus \"" + path + "\": cannot open it");
    gzbuffer(file, kChunk);
    auto reader = std::make_unique<GzipReader>(path, file);
    // zlib reads a file without a gzip header as it is ("transparent"): a .gz name on plain bytes
    // is a mistake to report, not text to take.
    if (gzdirect(file)) return makeError("corpus \"" + path + "\": not a gzip file (no gzip header)");
    return std::unique_ptr<CorpusFileReader>(std::move(reader));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return makeError("corpus \"" + path + "\": cannot open it");
  if (kind == ".zst") {
    ZSTD_DCtx* ctx = ZSTD_createDCtx();
    if (!ctx) return makeError("corpus \"" + path + "\": out of memory for the zstd decoder");
    return std::unique_ptr<CorpusFileReader>(std::make_unique<ZstdReader>(path, std::move(in), ctx));
  }
  return std::unique_ptr<CorpusFileReader>(std::make_unique<PlainReader>(path, std::move(in)));
}

}  // namespace es::train
