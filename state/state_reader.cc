#include "state/state_reader.h"

#include "engine/keyspace.h"
#include "state/item_codec.h"
#include "state/layout.h"
#include "ttl/envelope.h"

namespace magnetite::state {

result<found_value> state_value_of(std::string_view live, std::string_view what) {
  auto split = split_state_value(live, what);
  if (!split) return split.error();
  return found_value{split->revision, std::string(split->body)};
}

result<found_item> item_of(std::string_view live, std::string_view what) {
  auto split = split_state_value(live, what);
  if (!split) return split.error();
  auto x = decode_item(split->body, what);
  if (!x) return x.error();
  return found_item{split->revision, std::move(*x)};
}

result<std::optional<found_value>> live_state(std::string_view stored, std::uint64_t now_ns, std::string_view what) {
  auto live = ttl::live_value(stored, now_ns);
  if (!live) return live.error();
  if (!*live) return std::optional<found_value>();
  auto v = state_value_of(**live, what);
  if (!v) return v.error();
  return std::optional<found_value>(std::move(*v));
}

result<std::optional<found_item>> live_item(std::string_view stored, std::uint64_t now_ns, std::string_view what) {
  auto live = ttl::live_value(stored, now_ns);
  if (!live) return live.error();
  if (!*live) return std::optional<found_item>();
  auto x = item_of(**live, what);
  if (!x) return x.error();
  return std::optional<found_item>(std::move(*x));
}

namespace {
// The stored bytes of a state key, or nullopt.
result<std::optional<std::string>> stored_of(const read_view& view, std::string_view key) {
  std::string stored;
  auto found = view.find(keyspace::data_key(key), stored);
  if (!found) return found.error();
  if (!*found) return std::optional<std::string>();
  return std::optional<std::string>(std::move(stored));
}
}  // namespace

result<std::optional<found_value>> read_state(const read_view& view, std::string_view key, std::uint64_t now_ns,
                                              std::string_view what) {
  auto stored = stored_of(view, key);
  if (!stored) return stored.error();
  if (!*stored) return std::optional<found_value>();
  return live_state(**stored, now_ns, what);
}

result<std::optional<found_item>> read_item(const read_view& view, std::string_view key, std::uint64_t now_ns,
                                            std::string_view what) {
  auto stored = stored_of(view, key);
  if (!stored) return stored.error();
  if (!*stored) return std::optional<found_item>();
  return live_item(**stored, now_ns, what);
}

}  // namespace magnetite::state
