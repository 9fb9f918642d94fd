#include "core/fault_env.h"

#include <algorithm>
#include <random>

namespace magnetite {

namespace {
std::pair<std::string, std::string> split_path(const std::string& path) {
  std::string p = path;
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  auto slash = p.rfind('/');
  if (slash == std::string::npos) return {".", p};
  if (slash == 0) return {"/", p.substr(1)};
  return {p.substr(0, slash), p.substr(slash + 1)};
}

std::string normalize_dir(std::string p) {
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  return p;
}
}  // namespace

struct fault_env::inode {
  struct write_op {
    bool is_truncate = false;
    std::uint64_t offset = 0;  // write: where; truncate: the new size
    std::string bytes;
  };
  std::string data;     // what reads see
  std::string durable;  // what survives a crash
  std::vector<write_op> pending;

  static void apply(std::string& to, const write_op& op, std::size_t keep) {
    if (op.is_truncate) {
      to.resize(op.offset);
      return;
    }
    std::size_t n = std::min(keep, op.bytes.size());
    if (to.size() < op.offset + n) to.resize(op.offset + n, '\0');
    std::copy_n(op.bytes.data(), n, to.data() + op.offset);
  }
};

struct fault_env::directory {
  using entries = std::map<std::string, std::shared_ptr<inode>>;
  // One atomic namespace change: a rename is two changes that land together.
  using dir_op = std::vector<std::pair<std::string, std::shared_ptr<inode>>>;

  entries now;
  entries durable;
  std::vector<dir_op> pending;

  void change(dir_op op) {
    for (auto& [name, target] : op) {
      if (target) now[name] = target;
      else now.erase(name);
    }
    pending.push_back(std::move(op));
  }
};

struct fault_env::state {
  mutable std::mutex mu;
  std::uint64_t generation = 1;
  std::map<std::string, directory> dirs;
  std::set<std::string> locks;
  counters stats;

  std::uint64_t sync_fail_in = 0;
  std::uint64_t dir_sync_fail_in = 0;
  std::uint64_t write_fail_in = 0;
  std::uint64_t remove_fail_in = 0;
  status_code write_fail_code = status_code::io_error;
  std::size_t write_fail_keep = 0;
  std::optional<std::uint64_t> space_limit;
  std::string target;  // target_paths(): only these paths move the counters

  // Whether an operation on `path` counts towards (and can trip) a fault.
  bool targeted(const std::string& path) const { return target.empty() || path.find(target) != std::string::npos; }

  directory* find_dir(const std::string& d) {
    auto it = dirs.find(normalize_dir(d));
    return it == dirs.end() ? nullptr : &it->second;
  }

  std::shared_ptr<inode> find_file(const std::string& path) {
    auto [d, name] = split_path(path);
    directory* dir = find_dir(d);
    if (!dir) return nullptr;
    auto it = dir->now.find(name);
    return it == dir->now.end() ? nullptr : it->second;
  }

  std::uint64_t bytes_in_use() const {
    std::uint64_t total = 0;
    for (auto& [_, d] : dirs)
      for (auto& [_, f] : d.now) total += f->data.size();
    return total;
  }

  // Stores `data` at `offset`, honouring injected write failures and the space
  // limit: a failing write keeps a prefix, as a real short write does.
  status write(inode& f, std::uint64_t offset, std::string_view data, const std::string& path) {
    std::size_t keep = data.size();
    std::optional<status> failure;
    if (write_fail_in > 0 && targeted(path) && --write_fail_in == 0) {
      keep = std::min(write_fail_keep, data.size());
      failure = status::make(write_fail_code, status_category::permanent,
                             fmt::format("write {}: injected {}", path, to_string(write_fail_code)));
    }
    if (space_limit) {
      std::uint64_t used = bytes_in_use();
      std::uint64_t free = *space_limit > used ? *space_limit - used : 0;
      std::uint64_t end_allowed = f.data.size() + free;
      std::uint64_t fits = end_allowed > offset ? end_allowed - offset : 0;
      if (fits < keep) {
        keep = static_cast<std::size_t>(fits);
        failure = status::make(status_code::no_space, status_category::permanent,
                               fmt::format("write {}: No space left on device", path));
      }
    }
    if (keep > 0 || !failure) {
      inode::write_op op{false, offset, std::string(data.substr(0, keep))};
      inode::apply(f.data, op, keep);
      f.pending.push_back(std::move(op));
      ++stats.writes;
      stats.bytes_written += keep;
    }
    return failure ? *failure : status::ok();
  }
};

namespace {

class fault_file final : public file {
 public:
  fault_file(std::shared_ptr<fault_env::state> s, std::shared_ptr<fault_env::inode> f,
             std::string path, std::uint64_t generation)
      : s_(std::move(s)), f_(std::move(f)), path_(std::move(path)), generation_(generation) {}

  status append(std::string_view data) override {
    std::lock_guard lk(s_->mu);
    MAGNETITE_TRY(check_alive());
    return s_->write(*f_, f_->data.size(), data, path_);
  }

  status write_at(std::uint64_t offset, std::string_view data) override {
    std::lock_guard lk(s_->mu);
    MAGNETITE_TRY(check_alive());
    return s_->write(*f_, offset, data, path_);
  }

  result<std::size_t> read_at(std::uint64_t offset, std::size_t n, char* scratch) override {
    std::lock_guard lk(s_->mu);
    MAGNETITE_TRY(check_alive());
    if (offset >= f_->data.size()) return std::size_t{0};
    std::size_t got = std::min<std::size_t>(n, f_->data.size() - offset);
    std::copy_n(f_->data.data() + offset, got, scratch);
    return got;
  }

  status sync() override {
    std::lock_guard lk(s_->mu);
    MAGNETITE_TRY(check_alive());
    if (s_->sync_fail_in > 0 && s_->targeted(path_) && --s_->sync_fail_in == 0) {
      // As Linux does after a failed writeback: the dirty pages are dropped
      // (they will never reach the disk) but reads still see them.
      f_->pending.clear();
      return status::io_error(fmt::format("fdatasync {}: Input/output error (injected)", path_));
    }
    for (auto& op : f_->pending) fault_env::inode::apply(f_->durable, op, op.bytes.size());
    f_->pending.clear();
    ++s_->stats.file_syncs;
    return status::ok();
  }

  status truncate(std::uint64_t size) override {
    std::lock_guard lk(s_->mu);
    MAGNETITE_TRY(check_alive());
    fault_env::inode::write_op op{true, size, {}};
    fault_env::inode::apply(f_->data, op, 0);
    f_->pending.push_back(std::move(op));
    return status::ok();
  }

  status preallocate(std::uint64_t size) override {
    std::lock_guard lk(s_->mu);
    MAGNETITE_TRY(check_alive());
    if (size <= f_->data.size()) return status::ok();
    if (s_->space_limit && s_->bytes_in_use() + (size - f_->data.size()) > *s_->space_limit)
      return status::make(status_code::no_space, status_category::permanent,
                          fmt::format("fallocate {}: No space left on device", path_));
    // A size change like an extending truncate: pending until the next sync.
    fault_env::inode::write_op op{true, size, {}};
    fault_env::inode::apply(f_->data, op, 0);
    f_->pending.push_back(std::move(op));
    return status::ok();
  }

  result<std::uint64_t> size() override {
    std::lock_guard lk(s_->mu);
    MAGNETITE_TRY(check_alive());
    return static_cast<std::uint64_t>(f_->data.size());
  }

 private:
  status check_alive() const {
    if (generation_ != s_->generation)
      return status::io_error(fmt::format("{}: file handle from before a simulated crash", path_));
    return status::ok();
  }

  std::shared_ptr<fault_env::state> s_;
  std::shared_ptr<fault_env::inode> f_;
  std::string path_;
  std::uint64_t generation_;
};

class fault_lock final : public file_lock {
 public:
  fault_lock(std::weak_ptr<fault_env::state> s, std::string path, std::uint64_t generation)
      : s_(std::move(s)), path_(std::move(path)), generation_(generation) {}
  ~fault_lock() override {
    if (auto s = s_.lock()) {
      std::lock_guard lk(s->mu);
      if (s->generation == generation_) s->locks.erase(path_);
    }
  }

 private:
  std::weak_ptr<fault_env::state> s_;
  std::string path_;
  std::uint64_t generation_;
};

}  // namespace

fault_env::fault_env() : s_(std::make_shared<state>()) {}
fault_env::~fault_env() = default;

result<std::unique_ptr<file>> fault_env::open(const std::string& path, open_mode mode) {
  std::lock_guard lk(s_->mu);
  auto [d, name] = split_path(path);
  directory* dir = s_->find_dir(d);
  if (!dir) return status::not_found(fmt::format("open {}: no such directory", path));
  if (s_->dirs.count(normalize_dir(path)))
    return status::io_error(fmt::format("open {}: is a directory", path));
  auto it = dir->now.find(name);
  std::shared_ptr<inode> f;
  if (it != dir->now.end()) {
    if (mode == open_mode::create_new)
      return status::io_error(fmt::format("open {}: File exists", path));
    f = it->second;
    if (mode == open_mode::create_truncate && !f->data.empty()) {
      inode::write_op op{true, 0, {}};
      inode::apply(f->data, op, 0);
      f->pending.push_back(std::move(op));
    }
  } else {
    if (mode == open_mode::open_existing)
      return status::not_found(fmt::format("open {}: No such file or directory", path));
    f = std::make_shared<inode>();
    dir->change({{name, f}});
  }
  return std::unique_ptr<file>(new fault_file(s_, f, path, s_->generation));
}

status fault_env::create_dir(const std::string& path) {
  std::lock_guard lk(s_->mu);
  if (s_->find_file(path))
    return status::invalid_argument(fmt::format("mkdir {}: exists and is not a directory", path));
  s_->dirs[normalize_dir(path)];
  return status::ok();
}

status fault_env::sync_dir(const std::string& path) {
  std::lock_guard lk(s_->mu);
  directory* dir = s_->find_dir(path);
  if (!dir) return status::not_found(fmt::format("fsync directory {}: no such directory", path));
  if (s_->dir_sync_fail_in > 0 && s_->targeted(normalize_dir(path) + "/") && --s_->dir_sync_fail_in == 0)
    return status::io_error(fmt::format("fsync directory {}: Input/output error (injected)", path));
  dir->durable = dir->now;
  dir->pending.clear();
  ++s_->stats.dir_syncs;
  return status::ok();
}

status fault_env::rename(const std::string& from, const std::string& to) {
  std::lock_guard lk(s_->mu);
  auto [fd, fname] = split_path(from);
  auto [td, tname] = split_path(to);
  directory* fdir = s_->find_dir(fd);
  directory* tdir = s_->find_dir(td);
  if (!fdir || !tdir || !fdir->now.count(fname))
    return status::not_found(fmt::format("rename {} -> {}: No such file or directory", from, to));
  auto f = fdir->now[fname];
  if (fdir == tdir) {
    if (fname == tname) return status::ok();
    fdir->change({{tname, f}, {fname, nullptr}});
  } else {
    tdir->change({{tname, f}});
    fdir->change({{fname, nullptr}});
  }
  return status::ok();
}

status fault_env::remove(const std::string& path) {
  std::lock_guard lk(s_->mu);
  auto [d, name] = split_path(path);
  directory* dir = s_->find_dir(d);
  if (!dir || !dir->now.count(name))
    return status::not_found(fmt::format("unlink {}: No such file or directory", path));
  if (s_->remove_fail_in > 0 && s_->targeted(path) && --s_->remove_fail_in == 0)
    return status::io_error(fmt::format("unlink {}: Input/output error (injected)", path));
  dir->change({{name, nullptr}});
  return status::ok();
}

result<std::vector<std::string>> fault_env::list(const std::string& d) {
  std::lock_guard lk(s_->mu);
  std::string key = normalize_dir(d);
  directory* dir = s_->find_dir(key);
  if (!dir) return status::not_found(fmt::format("opendir {}: No such file or directory", d));
  std::vector<std::string> names;
  for (auto& [name, _] : dir->now) names.push_back(name);
  for (auto& [path, _] : s_->dirs) {
    auto [parent, name] = split_path(path);
    if (parent == key && path != key) names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

result<bool> fault_env::exists(const std::string& path) {
  std::lock_guard lk(s_->mu);
  return s_->find_file(path) != nullptr || s_->find_dir(path) != nullptr;
}

result<bool> fault_env::is_directory(const std::string& path) {
  std::lock_guard lk(s_->mu);
  if (s_->find_dir(path)) return true;
  if (s_->find_file(path)) return false;
  return status::not_found(fmt::format("stat {}: No such file or directory", path));
}

result<std::unique_ptr<file_lock>> fault_env::lock(const std::string& path) {
  std::lock_guard lk(s_->mu);
  auto [d, name] = split_path(path);
  directory* dir = s_->find_dir(d);
  if (!dir) return status::not_found(fmt::format("open lock file {}: no such directory", path));
  if (!s_->locks.insert(path).second)
    return status::busy(fmt::format("{} is locked: the data directory is in use by another "
                                    "process or another open database",
                                    path));
  if (!dir->now.count(name)) dir->change({{name, std::make_shared<inode>()}});
  return std::unique_ptr<file_lock>(new fault_lock(s_, path, s_->generation));
}

void fault_env::fail_sync(std::uint64_t nth) {
  std::lock_guard lk(s_->mu);
  s_->sync_fail_in = nth;
}

void fault_env::fail_dir_sync(std::uint64_t nth) {
  std::lock_guard lk(s_->mu);
  s_->dir_sync_fail_in = nth;
}

void fault_env::fail_write(std::uint64_t nth, status_code code, std::size_t keep_bytes) {
  std::lock_guard lk(s_->mu);
  s_->write_fail_in = nth;
  s_->write_fail_code = code;
  s_->write_fail_keep = keep_bytes;
}

void fault_env::fail_remove(std::uint64_t nth) {
  std::lock_guard lk(s_->mu);
  s_->remove_fail_in = nth;
}

void fault_env::set_space_limit(std::optional<std::uint64_t> bytes) {
  std::lock_guard lk(s_->mu);
  s_->space_limit = bytes;
}

void fault_env::target_paths(std::string substring) {
  std::lock_guard lk(s_->mu);
  s_->target = std::move(substring);
}

void fault_env::clear_faults() {
  std::lock_guard lk(s_->mu);
  s_->sync_fail_in = s_->dir_sync_fail_in = s_->write_fail_in = s_->remove_fail_in = 0;
  s_->space_limit.reset();
  s_->target.clear();
}

bool fault_env::flip_bit(const std::string& path, std::uint64_t offset, int bit) {
  std::lock_guard lk(s_->mu);
  auto f = s_->find_file(path);
  if (!f || offset >= f->data.size()) return false;
  char mask = static_cast<char>(1u << (bit & 7));
  f->data[offset] ^= mask;
  if (offset < f->durable.size()) f->durable[offset] ^= mask;
  return true;
}

void fault_env::crash(unsynced mode, std::uint64_t seed) {
  std::lock_guard lk(s_->mu);
  std::mt19937_64 rng(seed);
  auto pick = [&](std::size_t n) -> std::size_t {
    switch (mode) {
      case unsynced::lose: return 0;
      case unsynced::keep: return n;
      case unsynced::random:
      case unsynced::reorder: return static_cast<std::size_t>(rng() % (n + 1));
    }
    return 0;
  };
  // Every inode reachable now or durably; each is settled once.
  std::set<inode*> seen;
  for (auto& [_, d] : s_->dirs) {
    for (auto* entries : {&d.now, &d.durable}) {
      for (auto& [_, f] : *entries) {
        if (!seen.insert(f.get()).second) continue;
        if (mode == unsynced::reorder) {
          for (const auto& op : f->pending) {
            if (op.is_truncate) {
              inode::apply(f->durable, op, 0);
              continue;
            }
            // Split at 512-byte boundaries of the file; each piece lands or not.
            for (std::size_t at = 0; at < op.bytes.size();) {
              std::uint64_t abs = op.offset + at;
              std::size_t piece = std::min<std::size_t>(op.bytes.size() - at, 512 - abs % 512);
              if (rng() & 1) inode::apply(f->durable, {false, abs, op.bytes.substr(at, piece)}, piece);
              at += piece;
            }
          }
          f->pending.clear();
          f->data = f->durable;
          continue;
        }
        std::size_t kept = pick(f->pending.size());
        for (std::size_t i = 0; i < kept; ++i) inode::apply(f->durable, f->pending[i], f->pending[i].bytes.size());
        if (mode == unsynced::random && kept < f->pending.size() && (rng() & 1)) {
          auto& torn = f->pending[kept];
          if (!torn.is_truncate && !torn.bytes.empty())
            inode::apply(f->durable, torn, static_cast<std::size_t>(rng() % torn.bytes.size()));
        }
        f->pending.clear();
        f->data = f->durable;
      }
    }
  }
  for (auto& [_, d] : s_->dirs) {
    std::size_t kept = pick(d.pending.size());
    for (std::size_t i = 0; i < kept; ++i)
      for (auto& [name, target] : d.pending[i]) {
        if (target) d.durable[name] = target;
        else d.durable.erase(name);
      }
    d.pending.clear();
    d.now = d.durable;
  }
  s_->locks.clear();
  ++s_->generation;
}

void fault_env::process_crash() {
  std::lock_guard lk(s_->mu);
  s_->locks.clear();
  ++s_->generation;
}

void fault_env::crash_tearing_last_write(const std::string& path, std::size_t keep_bytes) {
  {
    std::lock_guard lk(s_->mu);
    if (auto f = s_->find_file(path); f && !f->pending.empty()) {
      for (std::size_t i = 0; i + 1 < f->pending.size(); ++i)
        inode::apply(f->durable, f->pending[i], f->pending[i].bytes.size());
      inode::apply(f->durable, f->pending.back(), keep_bytes);
      f->pending.clear();
    }
  }
  crash(unsynced::lose);
}

fault_env::counters fault_env::stats() const {
  std::lock_guard lk(s_->mu);
  return s_->stats;
}

std::optional<std::string> fault_env::contents(const std::string& path) const {
  std::lock_guard lk(s_->mu);
  auto f = s_->find_file(path);
  if (!f) return std::nullopt;
  return f->data;
}

std::optional<std::string> fault_env::durable_contents(const std::string& path) const {
  std::lock_guard lk(s_->mu);
  auto f = s_->find_file(path);
  if (!f) return std::nullopt;
  return f->durable;
}

}  // namespace magnetite
