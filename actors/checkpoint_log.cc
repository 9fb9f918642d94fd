#include "actors/checkpoint_log.h"

#include <fmt/format.h>

namespace magnetite {

namespace {

std::string line_of(const checkpoint& c) {
  std::string out = c.combined.to_hex();
  for (const auto& r : c.roots) out += ' ' + r.to_hex();
  out += '\n';
  return out;
}

// The checkpoint a complete line (without its newline) holds, or why not.
result<checkpoint> parse_line(std::string_view line, std::size_t shards) {
  std::vector<hash128> hashes;
  while (!line.empty()) {
    std::size_t sp = line.find(' ');
    auto h = hash128::parse_hex(line.substr(0, sp));
    if (!h) return status::corruption("a field is not 32 hex digits");
    hashes.push_back(*h);
    if (sp == std::string_view::npos) break;
    line.remove_prefix(sp + 1);
  }
  if (hashes.size() != shards + 1)
    return status::corruption(fmt::format("{} roots for {} shards", hashes.size() - (hashes.empty() ? 0 : 1), shards));
  checkpoint c{hashes[0], {hashes.begin() + 1, hashes.end()}};
  if (checkpoint_log::combine(c.roots) != c.combined)
    return status::corruption("the combined root does not match the shard roots");
  return c;
}

}  // namespace

hash128 checkpoint_log::combine(std::span<const hash128> roots) {
  std::string concat;
  for (const auto& r : roots) {
    auto b = r.to_bytes();
    concat.append(reinterpret_cast<const char*>(b.data()), b.size());
  }
  return hash128::of(concat);
}

result<checkpoint_log> checkpoint_log::open(env& fs, std::string dir, std::size_t shards) {
  checkpoint_log log(fs, std::move(dir), shards);
  auto exists = fs.exists(log.path());
  if (!exists) return exists.error();
  if (!*exists) return log;
  auto text = read_whole_file(fs, log.path());
  if (!text) return text.error();
  std::size_t at = 0;
  while (at < text->size()) {
    std::size_t nl = text->find('\n', at);
    if (nl == std::string::npos) break;  // torn last line
    auto c = parse_line(std::string_view(*text).substr(at, nl - at), shards);
    if (c) log.entries_.push_back(std::move(*c));
    else log.damage_.push_back(fmt::format("{}, offset {}: {}", log.path(), at, c.error().message()));
    ++log.lines_in_file_;
    at = nl + 1;
  }
  while (log.entries_.size() > retained) log.entries_.pop_front();
  if (at < text->size()) {  // cut the torn line before anything is appended after it
    auto f = fs.open(log.path(), open_mode::open_existing);
    if (!f) return f.error();
    MAGNETITE_TRY((*f)->truncate(at));
    MAGNETITE_TRY((*f)->sync());
  }
  return log;
}

const checkpoint* checkpoint_log::find(const hash128& combined) const noexcept {
  for (const auto& c : entries_)
    if (c.combined == combined) return &c;
  return nullptr;
}

std::vector<hash128> checkpoint_log::roots_of(std::size_t shard) const {
  std::vector<hash128> out;
  for (const auto& c : entries_)
    if (shard < c.roots.size()) out.push_back(c.roots[shard]);
  return out;
}

status checkpoint_log::append(const checkpoint& c) {
  if (c.roots.size() != shards_ || combine(c.roots) != c.combined)
    return status::invalid_argument("checkpoint_log: a checkpoint whose roots do not match it");
  std::deque<checkpoint> next = entries_;
  next.push_back(c);
  while (next.size() > retained) next.pop_front();
  // After a failed append the file may end in a fragment that the next line
  // would complete into garbage: only a whole rewrite is safe then.
  if (needs_rewrite_ || lines_in_file_ + 1 >= 2 * retained) return rewrite(std::move(next));
  status s = append_line(c);
  if (!s) {
    needs_rewrite_ = true;
    return s;
  }
  entries_ = std::move(next);
  ++lines_in_file_;
  return status::ok();
}

status checkpoint_log::append_line(const checkpoint& c) {
  auto exists = fs_->exists(path());
  if (!exists) return exists.error();
  auto f = fs_->open(path(), open_mode::open_or_create);
  if (!f) return f.error();
  MAGNETITE_TRY((*f)->append(line_of(c)));
  MAGNETITE_TRY((*f)->sync());
  if (!*exists) MAGNETITE_TRY(fs_->sync_dir(dir_));
  return status::ok();
}

status checkpoint_log::repair() { return rewrite(entries_); }

// Entries change only once the new file is in place: a failure leaves the
// old file (or the new one, complete) and the entries as they were.
status checkpoint_log::rewrite(std::deque<checkpoint> next) {
  std::string text;
  for (const auto& c : next) text += line_of(c);
  std::string tmp = path() + ".tmp";
  auto written = [&]() -> status {
    auto f = fs_->open(tmp, open_mode::create_truncate);
    if (!f) return f.error();
    MAGNETITE_TRY((*f)->append(text));
    MAGNETITE_TRY((*f)->sync());
    f->reset();
    MAGNETITE_TRY(fs_->rename(tmp, path()));
    return fs_->sync_dir(dir_);
  }();
  if (!written) {
    needs_rewrite_ = true;
    return written;
  }
  entries_ = std::move(next);
  lines_in_file_ = entries_.size();
  damage_.clear();
  needs_rewrite_ = false;
  return status::ok();
}

}  // namespace magnetite
