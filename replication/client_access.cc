#include "replication/client_access.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/coding.h"
#include "engine/state_space.h"

namespace magnetite::replication {

client_access::client_access(std::vector<client_grant> grants) : grants_(std::move(grants)) {
  std::sort(grants_.begin(), grants_.end());
  grants_.erase(std::unique(grants_.begin(), grants_.end()), grants_.end());
}

bool client_access::may_read(std::string_view key) const noexcept {
  return std::any_of(grants_.begin(), grants_.end(), [&](const client_grant& g) { return key.starts_with(g.prefix); });
}

bool client_access::may_write(std::string_view key) const noexcept {
  return std::any_of(grants_.begin(), grants_.end(),
                     [&](const client_grant& g) { return g.write && key.starts_with(g.prefix); });
}

bool client_access::may_read_range(std::string_view from, std::string_view to) const noexcept {
  return std::any_of(grants_.begin(), grants_.end(), [&](const client_grant& g) {
    if (!from.starts_with(g.prefix)) return false;
    // The keys with the prefix end before its successor: the prefix with
    // its last byte below FF raised by one (and what followed it dropped).
    // A prefix of FF bytes alone (the empty one too) has none: every key
    // from `from` on starts with it.
    std::string end = g.prefix;
    while (!end.empty() && static_cast<unsigned char>(end.back()) == 0xff) end.pop_back();
    if (end.empty()) return true;
    end.back() = static_cast<char>(static_cast<unsigned char>(end.back()) + 1);
    if (to.empty()) return false;
    return to <= std::string_view(end);
  });
}

bool client_access::writes_anything() const noexcept {
  return std::any_of(grants_.begin(), grants_.end(), [](const client_grant& g) { return g.write; });
}

namespace {
int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}
bool plain_byte(unsigned char c) { return c > 0x20 && c < 0x7f && c != '%' && c != '#' && c != '*'; }
}  // namespace

result<std::string> parse_prefix(std::string_view word) {
  if (word == "*") return std::string();
  if (word.empty()) return status::invalid_argument("an empty prefix (write `*` for every key)");
  std::string out;
  for (std::size_t i = 0; i < word.size(); ++i) {
    char c = word[i];
    if (c == '*') return status::invalid_argument(fmt::format("prefix `{}`: `*` stands alone (every key)", word));
    if (c != '%') {
      out += c;
      continue;
    }
    int hi = i + 2 < word.size() ? hex_digit(word[i + 1]) : -1;
    int lo = i + 2 < word.size() ? hex_digit(word[i + 2]) : -1;
    if (hi < 0 || lo < 0)
      return status::invalid_argument(fmt::format("prefix `{}`: `%` must be followed by two hex digits", word));
    out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return out;
}

std::string format_prefix(std::string_view prefix) {
  if (prefix.empty()) return "*";
  std::string out;
  for (char c : prefix) {
    auto b = static_cast<unsigned char>(c);
    if (plain_byte(b))
      out += c;
    else
      out += fmt::format("%{:02X}", b);
  }
  return out;
}

result<std::string> state_prefix(std::string_view kind, std::string_view name) {
  // The tag after FF FF of each kind's keys (docs/formats/state.md, frozen;
  // replication_test, "client access: prefixes as the cluster file writes
  // them", checks them against state/layout.h's).
  char tag = kind == "records" ? 'r' : kind == "stream" ? 's' : kind == "state" ? 'c' : '\0';
  if (tag == '\0')
    return status::invalid_argument(fmt::format("`{}` is not a kind of state (records, stream, state)", kind));
  if (name.empty()) return status::invalid_argument(fmt::format("an empty {} name", kind));
  return std::string(state_space::prefix) + tag + key_encoder().bytes(name).str();
}

}  // namespace magnetite::replication
