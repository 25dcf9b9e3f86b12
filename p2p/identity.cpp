#include "p2p/identity.h"

#include "core/common/atomic_file.h"

#include <sodium.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

namespace es::p2p {
namespace detail {
void ensureSodium();  // types.cpp
}

namespace {

constexpr std::size_t kFileBytes = 72;
constexpr char kMagic[4] = {'E', 'S', 'I', 'D'};
constexpr std::uint8_t kFileVersion = 1;
constexpr std::size_t kSeedOffset = 8;
constexpr std::size_t kKeyOffset = 40;

using Seed = std::array<std::uint8_t, 32>;

std::string quoted(const std::string& path) { return "\"" + path + "\""; }

std::string errnoText(const std::string& what, const std::string& path) {
  return what + " " + quoted(path) + ": " + std::strerror(errno);
}

std::string parentDir(const std::string& path) {
  const auto slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

class FdGuard {
 public:
  explicit FdGuard(int fd) : fd_(fd) {}
  ~FdGuard() {
    if (fd_ >= 0) ::close(fd_);
  }
  FdGuard(const FdGuard&) = delete;
  FdGuard& operator=(const FdGuard&) = delete;
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

std::string readExactly(int fd, std::uint8_t* out, std::size_t size) {
  std::size_t done = 0;
  while (done < size) {
    const ssize_t n = ::read(fd, out + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return std::strerror(errno);
    if (n == 0) return "unexpected end of file";
    done += static_cast<std::size_t>(n);
  }
  return {};
}

// The only place the 72-byte layout is written; keeps the secret off the heap-allocated strings.
std::array<std::uint8_t, kFileBytes> encodeKeyFile(const Seed& seed, const PublicKey& key) {
  std::array<std::uint8_t, kFileBytes> file{};
  std::memcpy(file.data(), kMagic, sizeof kMagic);
  file[4] = kFileVersion;
  std::memcpy(file.data() + kSeedOffset, seed.data(), seed.size());
  std::memcpy(file.data() + kKeyOffset, key.data(), key.size());
  return file;
}

// Writes a new key file without ever replacing an existing one: the temp file is created 0600
// (never readable by others, whatever the umask), and link(2) — unlike rename — fails when the
// target exists, so a key created concurrently by another process wins. Returns false then.
Expected<bool> createKeyFile(const std::string& path, const std::array<std::uint8_t, kFileBytes>& bytes) {
  std::array<std::uint8_t, 8> nonce{};
  randombytes_buf(nonce.data(), nonce.size());
  const std::string tmp = path + ".tmp-" + std::to_string(::getpid()) + "-" + toHex(nonce.data(), nonce.size());
  FdGuard fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  if (fd.get() < 0) return makeError(errnoText("cannot create identity file", tmp));

  std::string error;
  bool exists = false;
  if (::fchmod(fd.get(), 0600) != 0) error = errnoText("cannot chmod", tmp);
  if (error.empty()) error = writeAll(fd.get(), bytes.data(), bytes.size());
  if (error.empty() && ::fsync(fd.get()) != 0) error = errnoText("fsync failed on", tmp);
  if (::close(fd.release()) != 0 && error.empty()) error = errnoText("close failed on", tmp);
  if (error.empty() && ::link(tmp.c_str(), path.c_str()) != 0) {
    exists = errno == EEXIST;
    if (!exists) error = errnoText("cannot create identity file", path);
  }
  ::unlink(tmp.c_str());
  if (!error.empty()) return makeError(error);
  if (exists) return false;

  const int dirFd = ::open(parentDir(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dirFd >= 0) {
    ::fsync(dirFd);
    ::close(dirFd);
  }
  return true;
}

}  // namespace

Identity Identity::fromSeed(const Seed& seed) {
  detail::ensureSodium();
  Identity identity;
  crypto_sign_seed_keypair(identity.publicKey_.data(), identity.secretKey_.data(), seed.data());
  return identity;
}

Identity Identity::generate() {
  detail::ensureSodium();
  Seed seed{};
  randombytes_buf(seed.data(), seed.size());
  Identity identity = fromSeed(seed);
  sodium_memzero(seed.data(), seed.size());
  return identity;
}

Expected<Identity> Identity::load(const std::string& path) {
  FdGuard fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) {
    if (errno == ENOENT) return makeError("identity file " + quoted(path) + " does not exist");
    return makeError(errnoText("cannot open identity file", path));
  }
  // fstat on the open descriptor, so the checks apply to the file actually read.
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return makeError(errnoText("cannot stat identity file", path));
  if (!S_ISREG(st.st_mode)) return makeError("identity file " + quoted(path) + " is not a regular file");
  // Like ssh: a secret key others can read is compromised or about to be; refuse rather than fix
  // it silently so the user notices.
  if ((st.st_mode & 077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return makeError("identity file " + quoted(path) + " is accessible by group or others (mode " + mode +
                     "); refusing to use it. Run: chmod 600 " + quoted(path));
  }
  const std::string damaged = "identity file " + quoted(path) + " is damaged: ";
  if (st.st_size != static_cast<off_t>(kFileBytes)) {
    return makeError(damaged + std::to_string(st.st_size) + " bytes, expected " + std::to_string(kFileBytes) +
                     ". It was left untouched; move it away to create a new identity (a new key starts "
                     "with no reputation)");
  }
  std::array<std::uint8_t, kFileBytes> file{};
  if (const std::string error = readExactly(fd.get(), file.data(), file.size()); !error.empty()) {
    return makeError("cannot read identity file " + quoted(path) + ": " + error);
  }

  std::string problem;
  if (std::memcmp(file.data(), kMagic, sizeof kMagic) != 0) {
    problem = "not an ExpertSwarm identity file (bad magic)";
  } else if (file[4] != kFileVersion) {
    problem = "unsupported identity file version " + std::to_string(file[4]);
  } else if (file[5] != 0 || file[6] != 0 || file[7] != 0) {
    problem = "reserved header bytes are not zero";
  }
  Seed seed{};
  std::memcpy(seed.data(), file.data() + kSeedOffset, seed.size());
  Identity identity = fromSeed(seed);
  sodium_memzero(seed.data(), seed.size());
  if (problem.empty() && std::memcmp(identity.publicKey_.data(), file.data() + kKeyOffset, 32) != 0) {
    problem = "the stored public key does not match its seed";
  }
  sodium_memzero(file.data(), file.size());
  if (!problem.empty()) return makeError(damaged + problem + ". It was left untouched");
  return identity;
}

Expected<Identity> Identity::loadOrCreate(const std::string& path) {
  struct stat st {};
  // Anything but "does not exist" (damaged, unreadable, wrong mode) is load()'s error to report:
  // an existing key is never replaced.
  if (::stat(path.c_str(), &st) == 0 || errno != ENOENT) return load(path);
  const std::string dir = parentDir(path);
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return makeError("cannot create identity file " + quoted(path) + ": directory " + quoted(dir) + " does not exist");
  }
  Identity identity = generate();
  Seed seed{};
  std::memcpy(seed.data(), identity.secretKey_.data(), seed.size());
  auto bytes = encodeKeyFile(seed, identity.publicKey_);
  sodium_memzero(seed.data(), seed.size());
  const Expected<bool> created = createKeyFile(path, bytes);
  sodium_memzero(bytes.data(), bytes.size());
  if (!created.ok()) return makeError(created.error());
  if (!*created) return load(path);  // another process created it meanwhile
  return identity;
}

Signature Identity::sign(std::string_view message) const {
  Signature signature{};
  crypto_sign_detached(signature.data(), nullptr, reinterpret_cast<const unsigned char*>(message.data()),
                       message.size(), secretKey_.data());
  return signature;
}

bool verifySignature(const PublicKey& key, std::string_view message, const Signature& signature) {
  detail::ensureSodium();
  return crypto_sign_verify_detached(signature.data(), reinterpret_cast<const unsigned char*>(message.data()),
                                     message.size(), key.data()) == 0;
}

}  // namespace es::p2p
