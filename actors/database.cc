// The host's database (<magnetite/database.h>): each call is the engine's
// (database_core.h), behind a pointer so that the public header needs none of
// the engine's headers, CAF's included; and the way in of <magnetite/caf.h>.
#include "magnetite/database.h"

#include "actors/database_core.h"
#include "magnetite/caf.h"

namespace magnetite {

result<std::unique_ptr<database>> open_database(core_options options) {
  auto core = database_core::open(std::move(options));
  if (!core) return core.error();
  return std::make_unique<database>(std::move(*core));
}

result<std::unique_ptr<database>> open_database(caf::actor_system& system, database_options options) {
  core_options o(std::move(options));
  o.system = &system;
  return open_database(std::move(o));
}

caf::actor_system& actor_system_of(database& db) { return db.core().system(); }

shard_actor shard_handle(database& db, std::size_t i) { return db.core().shard_handle(i); }

database::database(std::unique_ptr<database_core> core) noexcept : core_(std::move(core)) {}
database::~database() = default;

result<std::unique_ptr<database>> database::open(database_options options) {
  return open_database(core_options(std::move(options)));
}

result<std::optional<std::size_t>> database::recorded_shards(const std::string& dir) {
  return database_core::recorded_shards(dir);
}

std::size_t database::shard_count() const noexcept { return core_->shard_count(); }
std::size_t database::shard_of(std::string_view routing_key) const noexcept { return core_->shard_of(routing_key); }

result<std::optional<std::string>> database::get(std::string_view key, std::optional<std::string_view> routing) {
  return core_->get(key, routing);
}
status database::put(std::string_view key, std::string_view value, std::optional<std::chrono::nanoseconds> ttl,
                     std::optional<std::string_view> routing) {
  return core_->put(key, value, ttl, routing);
}
status database::del(std::string_view key, std::optional<std::string_view> routing) { return core_->del(key, routing); }
result<cas_outcome> database::cas(std::string_view key, std::optional<std::string_view> expected,
                                  std::optional<std::string_view> desired, std::optional<std::chrono::nanoseconds> ttl,
                                  std::optional<std::string_view> routing) {
  return core_->cas(key, expected, desired, ttl, routing);
}
status database::batch(std::span<const batch_write> writes, std::optional<std::string_view> routing) {
  return core_->batch(writes, routing);
}
status database::ingest(std::span<const std::pair<std::string_view, std::string_view>> sorted) {
  return core_->ingest(sorted);
}
result<std::vector<std::pair<std::string, std::string>>> database::range(std::string_view from, std::string_view to,
                                                                         std::size_t limit) {
  return core_->range(from, to, limit);
}
result<range_cursor> database::scan(std::string_view from, std::string_view to, std::size_t chunk) {
  return core_->scan(from, to, chunk);
}
result<commit_result> database::commit() { return core_->commit(); }
result<database_stats> database::stats() { return core_->stats(); }
std::vector<checkpoint> database::checkpoints() const { return core_->checkpoints(); }
result<std::vector<key_change>> database::diff(const hash128& a, const hash128& b) { return core_->diff(a, b); }
result<snapshot> database::at(const hash128& version) { return core_->at(version); }
result<snapshot> database::at(std::string_view version) { return core_->at(version); }
result<hash128> database::resolve(std::string_view version) const { return core_->resolve(version); }
result<checkpoint> database::tag(std::string_view name, std::optional<hash128> version) {
  return core_->tag(name, version);
}
status database::untag(std::string_view name) { return core_->untag(name); }
std::vector<version_tag> database::tags() const { return core_->tags(); }
result<backup_report> database::backup(const std::string& dest, std::optional<std::string_view> version) {
  backup_options o;
  if (version) o.version = std::string(*version);
  return core_->backup(dest, o);
}

result<backup_report> database::backup(const std::string& dest, const backup_options& options) {
  return core_->backup(dest, options);
}
result<database_verify_report> database::verify() { return core_->verify(); }
result<database_gc_report> database::gc() { return core_->gc(); }
result<std::vector<std::uint64_t>> database::reclaim() { return core_->reclaim(); }

void database::put_async(std::string_view key, std::string_view value, std::optional<std::chrono::nanoseconds> ttl,
                         std::function<void(status)> done, std::optional<std::string_view> routing) {
  core_->put_async(key, value, ttl, std::move(done), routing);
}
void database::del_async(std::string_view key, std::function<void(status)> done,
                         std::optional<std::string_view> routing) {
  core_->del_async(key, std::move(done), routing);
}
void database::cas_async(std::string_view key, std::optional<std::string_view> expected,
                         std::optional<std::string_view> desired, std::optional<std::chrono::nanoseconds> ttl,
                         std::function<void(result<cas_outcome>)> done, std::optional<std::string_view> routing) {
  core_->cas_async(key, expected, desired, ttl, std::move(done), routing);
}
void database::batch_async(std::span<const batch_write> writes, std::function<void(status)> done,
                           std::optional<std::string_view> routing) {
  core_->batch_async(writes, std::move(done), routing);
}

range_cursor::range_cursor(std::unique_ptr<merged_cursor> engine) noexcept : engine_(std::move(engine)) {}
range_cursor::range_cursor(range_cursor&&) noexcept = default;
range_cursor& range_cursor::operator=(range_cursor&&) noexcept = default;
range_cursor::~range_cursor() = default;
result<bool> range_cursor::next() { return engine_->next(); }
const std::string& range_cursor::key() const noexcept { return engine_->key(); }
const std::string& range_cursor::value() const noexcept { return engine_->value(); }

}  // namespace magnetite
