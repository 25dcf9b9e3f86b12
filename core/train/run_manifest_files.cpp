// The corpus a manifest names, on disk. The manifest may come from a stranger (a magnet link),
// so its paths must not reach outside the run: a path that escaped would be read, tokenized,
// trained on and — through the contributions — leaked to the swarm (an ssh key, say), and a FIFO
// or device would block or never end. Everything here is stat(), never open().
#include "core/train/manifest_json.h"

#include <filesystem>
#include <utility>

namespace es::train {
namespace manifest {

std::string checkCorpusPathSyntax(const std::string& path, const std::string& field) {
  if (path.empty() || path.front() == '/')
    return field + ": must be a path relative to the run folder, got \"" + path + "\"";
  std::size_t begin = 0;
  while (begin <= path.size()) {
    const std::size_t end = std::min(path.find('/', begin), path.size());
    const std::string part = path.substr(begin, end - begin);
    if (part.empty() || part == "..")
      return field + ": must not contain \"..\" or empty path components, got \"" + path + "\"";
    begin = end + 1;
  }
  return {};
}

}  // namespace manifest

namespace {

namespace fs = std::filesystem;

bool inside(const fs::path& file, const fs::path& root) {
  auto f = file.begin();
  for (auto r = root.begin(); r != root.end(); ++r, ++f)
    if (f == file.end() || *f != *r) return false;
  return f != file.end();  // strictly below the root
}

// One corpus file: a regular file below one of `roots`; its size is added to `total`.
Status checkOne(const std::string& field, const std::string& relative, const fs::path& source,
                const std::vector<fs::path>& roots, std::int64_t& total) {
  if (auto problem = manifest::checkCorpusPathSyntax(relative, field); !problem.empty())
    return makeError("run manifest: " + problem);
  std::error_code ec;
  const fs::path resolved = fs::canonical(source / relative, ec);  // follows every symlink
  if (ec)
    return makeError("run manifest: " + field + ": cannot find \"" + relative + "\" in \"" + source.string() +
                     "\": " + ec.message());
  bool allowed = false;
  for (const auto& root : roots) allowed = allowed || inside(resolved, root);
  if (!allowed)
    return makeError("run manifest: " + field + ": \"" + relative + "\" resolves to \"" + resolved.string() +
                     "\", outside the run folder");
  const auto status = fs::status(resolved, ec);
  if (ec || !fs::is_regular_file(status))
    return makeError("run manifest: " + field + ": \"" + relative + "\" is not a regular file");
  const auto size = fs::file_size(resolved, ec);
  if (ec) return makeError("run manifest: " + field + ": \"" + relative + "\": " + ec.message());
  total += static_cast<std::int64_t>(size);
  if (total > kMaxCorpusBytes)
    return makeError("run manifest: " + field + ": the corpus exceeds " + std::to_string(kMaxCorpusBytes >> 20) +
                     " MiB in all");
  return {};
}

}  // namespace

Status checkCorpusFiles(const RunManifest& m, const std::string& sourceDir, const std::string& alsoAllowedDir) {
  std::error_code ec;
  const fs::path source = fs::canonical(sourceDir, ec);
  if (ec) return makeError("run folder \"" + sourceDir + "\": " + ec.message());
  std::vector<fs::path> roots{source};
  if (!alsoAllowedDir.empty())
    if (auto other = fs::canonical(alsoAllowedDir, ec); !ec) roots.push_back(std::move(other));
  if (m.data.prepared()) return {};  // no text corpus: the shards are checked by checkPreparedFiles
  std::vector<std::pair<std::string, std::string>> files;  // (field, path)
  for (std::size_t i = 0; i < m.data.trainCorpus.size(); ++i)
    files.emplace_back("data.train_corpus[" + std::to_string(i) + "]", m.data.trainCorpus[i]);
  files.emplace_back("data.val_corpus", m.data.valCorpus);
  std::int64_t total = 0;
  for (const auto& [field, relative] : files)
    if (auto s = checkOne(field, relative, source, roots, total); !s) return s;
  return {};
}

}  // namespace es::train
