// Temporary file + fsync + rename (atomic_file.h). Temporaries are named <target>.tmp-<pid>-<n> so that
// processes and threads writing the same folder never share one.
#include "atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "infer/error.h"

namespace infer {
namespace {

[[noreturn]] void fail(const std::string& path, int err) {
  throw Error("cannot write '" + path + "': " + std::strerror(err));
}

std::string temporary_name(const std::string& path) {
  static std::atomic<unsigned> counter{0};
  return path + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
}

// Writes and fsyncs `tmp`; on failure removes it and throws naming `path`.
void write_temporary(const std::string& tmp, const std::string& path, const std::vector<uint8_t>& bytes) {
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) fail(path, errno);
  int err = 0;
  for (size_t done = 0; done < bytes.size() && err == 0;) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n > 0)
      done += static_cast<size_t>(n);
    else if (n < 0 && errno != EINTR)
      err = errno;
    else if (n == 0)
      err = EIO;
  }
  if (err == 0 && ::fsync(fd) != 0) err = errno;  // data on disk before the rename makes it visible
  if (::close(fd) != 0 && err == 0) err = errno;
  if (err != 0) {
    ::unlink(tmp.c_str());
    fail(path, err);
  }
}

}  // namespace

void write_file_atomic(const std::string& path, const std::vector<uint8_t>& bytes) {
  StagedWrites staged;
  staged.add(path, bytes);
  staged.commit();
}

StagedWrites::~StagedWrites() {
  for (const auto& [tmp, path] : staged_) ::unlink(tmp.c_str());
}

void StagedWrites::add(const std::string& path, const std::vector<uint8_t>& bytes) {
  const std::string tmp = temporary_name(path);
  write_temporary(tmp, path, bytes);
  staged_.emplace_back(tmp, path);
}

void StagedWrites::commit() {
  // Renames cannot fail for want of space; what could fail (a target turned into a folder meanwhile)
  // is reported, and the temporaries not yet renamed are removed by the destructor.
  while (!staged_.empty()) {
    const auto& [tmp, path] = staged_.front();
    if (std::rename(tmp.c_str(), path.c_str()) != 0) fail(path, errno);
    staged_.erase(staged_.begin());
  }
}

}  // namespace infer
