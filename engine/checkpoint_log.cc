#include "engine/checkpoint_log.h"

#include <fmt/format.h>

#include <algorithm>

namespace magnetite {

namespace {

std::string line_of(const checkpoint& c) { return checkpoint_log::format(c) + '\n'; }

}  // namespace

std::string checkpoint_log::format(const checkpoint& c) {
  std::string out = c.combined.to_hex();
  for (const auto& r : c.roots) out += ' ' + r.to_hex();
  return out;
}

result<checkpoint> checkpoint_log::parse(std::string_view line, std::size_t shards) {
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
  if (combine(c.roots) != c.combined) return status::corruption("the combined root does not match the shard roots");
  return c;
}

hash128 checkpoint_log::combine(std::span<const hash128> roots) {
  std::string concat;
  for (const auto& r : roots) {
    auto b = r.to_bytes();
    concat.append(reinterpret_cast<const char*>(b.data()), b.size());
  }
  return hash128::of(concat);
}

namespace {

// What the file's bytes hold: the retained checkpoints, the damaged complete
// lines, and where a torn last line (no newline) starts.
struct parsed_file {
  std::deque<checkpoint> entries;
  std::size_t lines = 0;
  std::vector<std::string> damage;
  std::size_t end = 0;  // < text.size(): a torn last line starts here
};

parsed_file parse_file(std::string_view text, std::size_t shards, std::size_t retained, const std::string& path) {
  parsed_file out;
  while (out.end < text.size()) {
    std::size_t nl = text.find('\n', out.end);
    if (nl == std::string_view::npos) break;  // torn last line
    auto c = checkpoint_log::parse(text.substr(out.end, nl - out.end), shards);
    if (c)
      out.entries.push_back(std::move(*c));
    else
      out.damage.push_back(fmt::format("{}, offset {}: {}", path, out.end, c.error().message()));
    ++out.lines;
    out.end = nl + 1;
  }
  while (out.entries.size() > retained) out.entries.pop_front();
  return out;
}

}  // namespace

result<checkpoint_log> checkpoint_log::open(env& fs, std::string dir, std::size_t shards, std::size_t retained) {
  if (retained == 0) return status::invalid_argument("checkpoint_log: at least 1 checkpoint must be retained");
  checkpoint_log log(fs, std::move(dir), shards, retained);
  auto exists = fs.exists(log.path());
  if (!exists) return exists.error();
  if (!*exists) return log;
  auto text = read_whole_file(fs, log.path());
  if (!text) return text.error();
  parsed_file parsed = parse_file(*text, shards, retained, log.path());
  log.entries_ = std::move(parsed.entries);
  log.damage_ = std::move(parsed.damage);
  log.lines_in_file_ = parsed.lines;
  if (parsed.end < text->size()) {  // cut the torn line before anything is appended after it
    auto f = fs.open(log.path(), open_mode::open_existing);
    if (!f) return f.error();
    MAGNETITE_TRY((*f)->truncate(parsed.end));
    MAGNETITE_TRY((*f)->sync());
  }
  return log;
}

std::vector<std::string> checkpoint_log::check_file() const {
  std::vector<std::string> out;
  auto exists = fs_->exists(path());
  if (!exists) return {exists.error().message()};
  std::string text;
  if (*exists) {
    auto bytes = read_whole_file(*fs_, path());
    if (!bytes) return {bytes.error().message()};
    text = std::move(*bytes);
  }
  parsed_file parsed = parse_file(text, shards_, retained_, path());
  out = std::move(parsed.damage);
  // After a failed append the file may hold a fragment or a line that is not
  // retained; the next append rewrites it whole.
  if (needs_rewrite_) return out;
  if (parsed.end < text.size())
    out.push_back(fmt::format("{}, offset {}: a line without its newline", path(), parsed.end));
  auto same = [](const checkpoint& a, const checkpoint& b) { return a.combined == b.combined && a.roots == b.roots; };
  if (!std::equal(parsed.entries.begin(), parsed.entries.end(), entries_.begin(), entries_.end(), same))
    out.push_back(fmt::format("{}: holds {} intact checkpoints where the database retains {} (or other ones)", path(),
                              parsed.entries.size(), entries_.size()));
  return out;
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
  while (next.size() > retained_) next.pop_front();
  // After a failed append the file may end in a fragment that the next line
  // would complete into garbage: only a whole rewrite is safe then.
  if (needs_rewrite_ || lines_in_file_ + 1 >= 2 * retained_) return rewrite(std::move(next));
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
  status written = replace_file(*fs_, dir_, file_name, text);
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
