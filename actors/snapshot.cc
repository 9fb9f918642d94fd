// A retained checkpoint's reads (<magnetite/snapshot.h>): one pinned view a
// shard at the checkpoint's roots (shard::view_at, asked for by
// database_core::at), read on the calling thread as database's own reads
// read the published views.
#include "magnetite/snapshot.h"

#include "actors/database_core.h"
#include "core/shard_routing.h"
#include "engine/state_space.h"

namespace magnetite {

snapshot::snapshot(std::unique_ptr<impl> p) noexcept : impl_(std::move(p)) {}
snapshot::snapshot(snapshot&&) noexcept = default;
snapshot& snapshot::operator=(snapshot&&) noexcept = default;
snapshot::~snapshot() = default;

const hash128& snapshot::version() const noexcept { return impl_->version; }

result<std::optional<std::string>> snapshot::get(std::string_view key, std::optional<std::string_view> routing) const {
  MAGNETITE_TRY(state_space::check_user_key(key));
  MAGNETITE_TRY(check_routing(routing));
  const auto& v = *impl_->views[shard_for(routing ? *routing : key, impl_->views.size())];
  return v.get(key, impl_->clock());
}

result<std::vector<std::pair<std::string, std::string>>> snapshot::range(std::string_view from, std::string_view to,
                                                                         std::size_t limit) const {
  return first_entries(scan(from, to, range_chunk_size(limit)), limit);
}

result<range_cursor> snapshot::scan(std::string_view from, std::string_view to, std::size_t chunk) const {
  return scan_views(impl_->views, from, to, impl_->clock(), chunk);
}

}  // namespace magnetite
