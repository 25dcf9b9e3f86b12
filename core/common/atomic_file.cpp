#include "core/common/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace es {
namespace {

std::string errnoText(const std::string& what, const std::string& path) {
  return what + " \"" + path + "\": " + std::strerror(errno);
}

std::string parentDir(const std::string& path) {
  const auto slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

}  // namespace

std::string writeAll(int fd, const void* data, std::size_t size) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd, p, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return std::string("write failed: ") + std::strerror(errno);
    }
    p += n;
    size -= static_cast<std::size_t>(n);
  }
  return {};
}

Status writeFileAtomically(const std::string& path, const std::function<std::string(int fd)>& write) {
  const std::string tmp = path + ".tmp-" + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return makeError(errnoText("cannot create", tmp));

  std::string error = write(fd);
  if (error.empty() && ::fsync(fd) != 0) error = errnoText("fsync failed on", tmp);
  if (::close(fd) != 0 && error.empty()) error = errnoText("close failed on", tmp);
  if (error.empty() && ::rename(tmp.c_str(), path.c_str()) != 0) error = errnoText("cannot rename to", path);
  if (!error.empty()) {
    ::unlink(tmp.c_str());
    return makeError(error);
  }
  // Make the rename itself durable. Best effort, as always here: the file is complete and in place;
  // a directory fsync that fails (some file systems refuse it) must not fail the write.
  (void)syncDirectory(parentDir(path));
  return {};
}

Status syncDirectory(const std::string& dir) {
  const int dirFd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dirFd < 0) return makeError(errnoText("cannot open", dir));
  const bool synced = ::fsync(dirFd) == 0;
  const std::string error = synced ? std::string() : errnoText("fsync failed on", dir);
  ::close(dirFd);
  if (!synced) return makeError(error);
  return {};
}

Status writeFileAtomically(const std::string& path, std::string_view bytes) {
  return writeFileAtomically(path, [&](int fd) { return writeAll(fd, bytes.data(), bytes.size()); });
}

Expected<std::string> readWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return makeError("cannot open \"" + path + "\": " + std::strerror(errno));
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) return makeError("cannot read \"" + path + "\"");
  return buffer.str();
}

}  // namespace es
