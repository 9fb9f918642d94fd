// The POSIX file layer. Reads and writes retry EINTR and complete short
// transfers; every error names the operation and the path.
#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/env.h"

namespace magnetite {
namespace {

// What the engine creates is its owner's alone (docs/reliability.md,
// "Security"): the modes are set with fchmod after the create, since the
// umask can only take bits away from the create's mode, and a umask that
// takes the owner's own would leave files the engine cannot reopen.
constexpr mode_t private_file = 0600;
constexpr mode_t private_dir = 0700;

status from_errno(std::string_view op, const std::string& path, int err);

status make_private(int fd, const std::string& path, mode_t mode) {
  if (::fchmod(fd, mode) != 0) return from_errno("chmod", path, errno);
  return status::ok();
}

// open(2) with EINTR retried; a file it creates is made private_file. With
// `keep_existing` (and O_CREAT in flags) it creates with O_EXCL first, so
// that a file that was there already keeps its mode. -1 and errno on error.
int open_made_private(const std::string& path, int flags, bool keep_existing) {
  bool creates = (flags & O_CREAT) != 0;
  int fd;
  do fd = ::open(path.c_str(), keep_existing && creates ? flags | O_EXCL : flags, private_file);
  while (fd < 0 && errno == EINTR);
  if (fd < 0 && errno == EEXIST && keep_existing && creates) {
    creates = false;
    do fd = ::open(path.c_str(), flags & ~O_CREAT, private_file);
    while (fd < 0 && errno == EINTR);
  }
  if (fd >= 0 && creates && ::fchmod(fd, private_file) != 0) {
    int err = errno;
    ::close(fd);
    errno = err;
    return -1;
  }
  return fd;
}

status from_errno(std::string_view op, const std::string& path, int err) {
  std::string msg = fmt::format("{} {}: {}", op, path, std::strerror(err));
  switch (err) {
    case ENOENT:
      return status::not_found(std::move(msg));
    case ENOSPC:
    case EDQUOT:
      return status::make(status_code::no_space, status_category::permanent, std::move(msg));
    case EWOULDBLOCK:
      return status::busy(std::move(msg));
    default:
      return status::io_error(std::move(msg));
  }
}

class posix_file final : public file {
 public:
  posix_file(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  ~posix_file() override { ::close(fd_); }

  // A failed hint costs nothing but the readahead it would have saved.
  void advise_random() override { (void)::posix_fadvise(fd_, 0, 0, POSIX_FADV_RANDOM); }

  result<std::shared_ptr<const file_mapping>> map(std::size_t size) override {
    class posix_mapping final : public file_mapping {
     public:
      posix_mapping(const char* data, std::size_t size) noexcept : file_mapping(data, size) {}
      ~posix_mapping() override {
        if (size() > 0) ::munmap(const_cast<char*>(data()), size());
      }
    };
    if (size == 0) return std::shared_ptr<const file_mapping>(std::make_shared<posix_mapping>(nullptr, 0));
    void* p = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd_, 0);
    if (p == MAP_FAILED) return from_errno("mmap", path_, errno);
    (void)::madvise(p, size, MADV_RANDOM);  // a hint, as advise_random
    return std::shared_ptr<const file_mapping>(std::make_shared<posix_mapping>(static_cast<const char*>(p), size));
  }

  status append(std::string_view data) override {
    // The contract is "at the current end": after a truncate or a write_at past
    // the end, the descriptor's offset is not there. (O_APPEND would make
    // pwrite append too, on Linux.)
    if (::lseek(fd_, 0, SEEK_END) < 0) return from_errno("lseek", path_, errno);
    while (!data.empty()) {
      ssize_t n = ::write(fd_, data.data(), data.size());
      if (n < 0) {
        if (errno == EINTR) continue;
        return from_errno("write", path_, errno);
      }
      if (n == 0) return from_errno("write", path_, EIO);  // never loop on no progress
      data.remove_prefix(static_cast<std::size_t>(n));
    }
    return status::ok();
  }

  status write_at(std::uint64_t offset, std::string_view data) override {
    while (!data.empty()) {
      ssize_t n = ::pwrite(fd_, data.data(), data.size(), static_cast<off_t>(offset));
      if (n < 0) {
        if (errno == EINTR) continue;
        return from_errno("pwrite", path_, errno);
      }
      if (n == 0) return from_errno("pwrite", path_, EIO);
      data.remove_prefix(static_cast<std::size_t>(n));
      offset += static_cast<std::uint64_t>(n);
    }
    return status::ok();
  }

  result<std::size_t> read_at(std::uint64_t offset, std::size_t n, char* scratch) override {
    std::size_t done = 0;
    while (done < n) {
      ssize_t r = ::pread(fd_, scratch + done, n - done, static_cast<off_t>(offset + done));
      if (r < 0) {
        if (errno == EINTR) continue;
        return from_errno("pread", path_, errno);
      }
      if (r == 0) break;
      done += static_cast<std::size_t>(r);
    }
    return done;
  }

  status sync() override {
    if (::fdatasync(fd_) != 0) return from_errno("fdatasync", path_, errno);
    return status::ok();
  }

  status truncate(std::uint64_t size) override {
    if (::ftruncate(fd_, static_cast<off_t>(size)) != 0) return from_errno("ftruncate", path_, errno);
    return status::ok();
  }

  status preallocate(std::uint64_t size) override {
    for (;;) {
      if (::fallocate(fd_, 0, 0, static_cast<off_t>(size)) == 0) return status::ok();
      if (errno == EINTR) continue;
      if (errno == EOPNOTSUPP || errno == ENOSYS)
        return status::make(status_code::not_supported, status_category::permanent,
                            fmt::format("fallocate {}: {}", path_, std::strerror(errno)));
      return from_errno("fallocate", path_, errno);
    }
  }

  result<std::uint64_t> size() override {
    struct stat st;
    if (::fstat(fd_, &st) != 0) return from_errno("fstat", path_, errno);
    return static_cast<std::uint64_t>(st.st_size);
  }

 private:
  int fd_;
  std::string path_;
};

class posix_lock final : public file_lock {
 public:
  explicit posix_lock(int fd) : fd_(fd) {}
  ~posix_lock() override { ::close(fd_); }  // closing releases the flock

 private:
  int fd_;
};

class posix_env final : public env {
 public:
  result<std::unique_ptr<file>> open(const std::string& path, open_mode mode) override {
    int flags = O_RDWR | O_CLOEXEC;
    switch (mode) {
      case open_mode::create_new:
        flags |= O_CREAT | O_EXCL;
        break;
      case open_mode::open_existing:
        break;
      case open_mode::open_or_create:
        flags |= O_CREAT;
        break;
      case open_mode::create_truncate:
        flags |= O_CREAT | O_TRUNC;
        break;
    }
    int fd = open_made_private(path, flags, mode == open_mode::open_or_create);
    if (fd < 0) return from_errno("open", path, errno);
    return std::unique_ptr<file>(new posix_file(fd, path));
  }

  status create_dir(const std::string& path) override {
    if (::mkdir(path.c_str(), private_dir) == 0) {
      int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      if (fd < 0) return from_errno("open directory", path, errno);
      status s = make_private(fd, path, private_dir);
      ::close(fd);
      return s;
    }
    int err = errno;
    if (err == EEXIST) {
      struct stat st;
      if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) return status::ok();
      return status::invalid_argument(fmt::format("mkdir {}: exists and is not a directory", path));
    }
    return from_errno("mkdir", path, err);
  }

  status sync_dir(const std::string& path) override {
    int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return from_errno("open directory", path, errno);
    int rc = ::fsync(fd);
    int err = errno;
    ::close(fd);
    if (rc != 0) return from_errno("fsync directory", path, err);
    return status::ok();
  }

  status rename(const std::string& from, const std::string& to) override {
    if (::rename(from.c_str(), to.c_str()) != 0) return from_errno("rename", from + " -> " + to, errno);
    return status::ok();
  }

  status remove(const std::string& path) override {
    if (::unlink(path.c_str()) != 0) return from_errno("unlink", path, errno);
    return status::ok();
  }

  result<std::vector<std::string>> list(const std::string& dir) override {
    DIR* d = ::opendir(dir.c_str());
    if (d == nullptr) return from_errno("opendir", dir, errno);
    std::vector<std::string> names;
    errno = 0;
    while (dirent* e = ::readdir(d)) {
      std::string_view name = e->d_name;
      if (name != "." && name != "..") names.emplace_back(name);
    }
    int err = errno;
    ::closedir(d);
    if (err != 0) return from_errno("readdir", dir, err);
    std::sort(names.begin(), names.end());
    return names;
  }

  result<bool> exists(const std::string& path) override {
    struct stat st;
    if (::stat(path.c_str(), &st) == 0) return true;
    if (errno == ENOENT) return false;
    return from_errno("stat", path, errno);
  }

  result<bool> is_directory(const std::string& path) override {
    struct stat st;
    if (::stat(path.c_str(), &st) == 0) return S_ISDIR(st.st_mode);
    return from_errno("stat", path, errno);
  }

  result<std::uint32_t> permissions(const std::string& path) override {
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) return from_errno("stat", path, errno);
    return static_cast<std::uint32_t>(st.st_mode & 07777);
  }

  result<std::unique_ptr<file_lock>> lock(const std::string& path) override {
    int fd = open_made_private(path, O_RDWR | O_CREAT | O_CLOEXEC, true);
    if (fd < 0) return from_errno("open lock file", path, errno);
    // flock locks belong to the open file description, so a second open in the
    // same process conflicts too (fcntl locks would not).
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      int err = errno;
      ::close(fd);
      if (err == EWOULDBLOCK)
        return status::busy(
            fmt::format("{} is locked: the data directory is in use by another "
                        "process or another open database",
                        path));
      return from_errno("flock", path, err);
    }
    return std::unique_ptr<file_lock>(new posix_lock(fd));
  }
};

}  // namespace

env& env::posix() {
  static posix_env instance;
  return instance;
}

result<std::string> read_whole_file(env& e, const std::string& path) {
  auto f = e.open(path, open_mode::open_existing);
  if (!f) return f.error();
  auto sz = (*f)->size();
  if (!sz) return sz.error();
  std::string out(static_cast<std::size_t>(*sz), '\0');
  auto n = (*f)->read_at(0, out.size(), out.data());
  if (!n) return n.error();
  out.resize(*n);
  return out;
}

status replace_file(env& e, const std::string& dir, std::string_view name, std::string_view contents) {
  std::string path = path_join(dir, name);
  std::string tmp = path + ".tmp";
  auto f = e.open(tmp, open_mode::create_truncate);
  if (!f) return f.error();
  MAGNETITE_TRY((*f)->append(contents));
  MAGNETITE_TRY((*f)->sync());
  f->reset();
  MAGNETITE_TRY(e.rename(tmp, path));
  return e.sync_dir(dir);
}

result<std::uint64_t> directory_bytes(env& e, const std::string& dir) {
  auto names = e.list(dir);
  if (!names) return names.error();
  std::uint64_t total = 0;
  for (const auto& name : *names) {
    std::string path = path_join(dir, name);
    auto is_dir = e.is_directory(path);
    if (!is_dir) return is_dir.error();
    if (*is_dir) continue;
    auto f = e.open(path, open_mode::open_existing);
    if (!f) return f.error();
    auto sz = (*f)->size();
    if (!sz) return sz.error();
    total += *sz;
  }
  return total;
}

}  // namespace magnetite
