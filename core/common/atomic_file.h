// Crash-safe file writes: the data goes to "<path>.tmp-<pid>", is fsync'ed, renamed over <path>,
// and the directory is fsync'ed. A reader therefore sees the old file or the new one, never a
// partial one. Plain POSIX so the Torch libraries can use it without Qt (QSaveFile elsewhere).
#pragma once

#include "core/common/expected.h"

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

namespace es {

// Calls `write(fd)` on a fresh temp file, then commits it atomically. `write` returns an error
// message or an empty string; any failure removes the temp file and leaves <path> untouched.
Status writeFileAtomically(const std::string& path, const std::function<std::string(int fd)>& write);

Status writeFileAtomically(const std::string& path, std::string_view bytes);

// fsync(2) on a directory: makes the renames and creations inside it durable.
Status syncDirectory(const std::string& dir);

// write(2) until done, retrying on EINTR and short writes. Returns an error message or "".
std::string writeAll(int fd, const void* data, std::size_t size);

Expected<std::string> readWholeFile(const std::string& path);

}  // namespace es
