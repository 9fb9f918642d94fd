#include "engine/version_tags.h"

#include <fmt/format.h>

#include <algorithm>

#include "engine/checkpoint_log.h"
#include "engine/sealed_text.h"

namespace magnetite {

namespace {

constexpr std::string_view kind = "magnetite-tags";

using tag_map = std::map<std::string, checkpoint, std::less<>>;

std::string text_of(const tag_map& tags) {
  std::string body;
  for (const auto& [name, c] : tags) body += fmt::format("{} {}\n", name, checkpoint_log::format(c));
  return seal(kind, body);
}

bool is_hex_version(std::string_view name) {
  if (name.size() != 32) return false;
  return name.find_first_not_of("0123456789abcdefABCDEF") == std::string_view::npos;
}

// The names a file's bytes hold, or what is wrong with them (the offset and
// the reason; the caller names the file).
result<tag_map> parse(std::string_view text, std::size_t shards) {
  auto body = unseal(text, kind);
  if (!body) return body.error();
  tag_map out;
  for (std::size_t at = 0; at < body->text.size();) {
    const std::size_t nl = body->text.find('\n', at);
    const std::size_t offset = body->offset + at;
    std::string_view line = body->text.substr(at, nl - at);
    at = nl + 1;
    std::size_t name_end = line.find(' ');
    if (name_end == std::string_view::npos) return damaged_at(offset, "a line without a version");
    std::string_view name = line.substr(0, name_end);
    if (auto s = version_tags::check_name(name); !s) return damaged_at(offset, s.message());
    auto c = checkpoint_log::parse(line.substr(name_end + 1), shards);
    if (!c) return damaged_at(offset, c.error().message());
    if (!out.empty() && out.rbegin()->first >= name) return damaged_at(offset, "names out of order or twice");
    out.emplace(std::string(name), std::move(*c));
  }
  return out;
}

}  // namespace

status version_tags::check_name(std::string_view name) {
  if (name.empty() || name.size() > max_name_bytes)
    return status::invalid_argument(
        fmt::format("a tag's name is 1 to {} bytes; this one is {}", max_name_bytes, name.size()));
  if (name.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") !=
      std::string_view::npos)
    return status::invalid_argument(fmt::format("tag name {:?}: only letters, digits, '.', '_' and '-'", name));
  if (name.front() == '-' || name.front() == '.')
    return status::invalid_argument(fmt::format("tag name {:?} begins with '{}'", name, name.front()));
  if (is_hex_version(name))
    return status::invalid_argument(
        fmt::format("tag name {:?} is 32 hex digits, which read as a version (a combined root)", name));
  return status::ok();
}

result<version_tags> version_tags::open(env& fs, std::string dir, std::size_t shards) {
  version_tags tags(fs, std::move(dir), shards);
  auto exists = fs.exists(tags.path());
  if (!exists) return exists.error();
  if (!*exists) return tags;
  auto text = read_whole_file(fs, tags.path());
  if (!text) return text.error();
  auto parsed = parse(*text, shards);
  if (!parsed) {
    if (parsed.error().code() == status_code::not_supported)
      return status::make(status_code::not_supported, status_category::permanent,
                          fmt::format("{} is of {}", tags.path(), parsed.error().message()));
    return status::corruption(fmt::format(
        "{}, {}: the database's named versions cannot be trusted; restore the file from a backup, or remove it "
        "to drop every name",
        tags.path(), parsed.error().message()));
  }
  tags.entries_ = std::move(*parsed);
  return tags;
}

const checkpoint* version_tags::find(std::string_view name) const noexcept {
  auto it = entries_.find(name);
  return it == entries_.end() ? nullptr : &it->second;
}

const checkpoint* version_tags::find(const hash128& combined) const noexcept {
  for (const auto& [name, c] : entries_)
    if (c.combined == combined) return &c;
  return nullptr;
}

std::vector<hash128> version_tags::roots_of(std::size_t shard) const {
  std::vector<hash128> out;
  for (const auto& [name, c] : entries_)
    if (shard < c.roots.size()) out.push_back(c.roots[shard]);
  return out;
}

status version_tags::set(std::string_view name, const checkpoint& c) {
  MAGNETITE_TRY(check_name(name));
  if (c.roots.size() != shards_ || checkpoint_log::combine(c.roots) != c.combined)
    return status::invalid_argument("version_tags: a checkpoint whose roots do not match it");
  if (const checkpoint* held = find(name)) {
    if (held->combined == c.combined) return status::ok();
    return status::invalid_argument(
        fmt::format("tag {} already names version {}; untag it first to name another", name, held->combined));
  }
  if (entries_.size() >= max_tags)
    return status::invalid_argument(fmt::format("{} tags already: untag one first", max_tags));
  tag_map next = entries_;
  next.emplace(std::string(name), c);
  return replace(std::move(next));
}

result<checkpoint> version_tags::remove(std::string_view name) {
  MAGNETITE_TRY(check_name(name));
  auto it = entries_.find(name);
  if (it == entries_.end()) return status::not_found(fmt::format("no tag is named {:?}", name));
  checkpoint c = it->second;
  tag_map next = entries_;
  next.erase(std::string(name));
  MAGNETITE_TRY(replace(std::move(next)));
  return c;
}

status version_tags::replace(tag_map next) {
  MAGNETITE_TRY(replace_file(*fs_, dir_, file_name, text_of(next)));
  entries_ = std::move(next);
  return status::ok();
}

std::vector<std::string> version_tags::check_file() const {
  auto exists = fs_->exists(path());
  if (!exists) return {exists.error().message()};
  tag_map on_disk;
  if (*exists) {
    auto text = read_whole_file(*fs_, path());
    if (!text) return {text.error().message()};
    auto parsed = parse(*text, shards_);
    if (!parsed) return {fmt::format("{}, {}", path(), parsed.error().message())};
    on_disk = std::move(*parsed);
  }
  auto same = [](const auto& a, const auto& b) {
    return a.first == b.first && a.second.combined == b.second.combined && a.second.roots == b.second.roots;
  };
  if (!std::equal(on_disk.begin(), on_disk.end(), entries_.begin(), entries_.end(), same))
    return {fmt::format("{}: holds {} names where the database keeps {} (or other ones)", path(), on_disk.size(),
                        entries_.size())};
  return {};
}

}  // namespace magnetite
