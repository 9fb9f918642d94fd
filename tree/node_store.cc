// node_store: the store (node_store.h): its state and failure, its packs,
// writing and flush, and what it reports about itself. Reading is
// node_store_read.cc, open node_store_open.cc, gc node_store_gc.cc and
// reclamation node_store_reclaim.cc.
#include "tree/node_store.h"

#include <lz4.h>
#include <zstd.h>

#include <random>
#include <thread>

#include "tree/node_store_internal.h"
#include "tree/pack_format.h"
#include "tree/searchable_leaf.h"

namespace magnetite::tree {

namespace {

std::uint64_t random_salt() {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  return rng();
}

}  // namespace

status node_store_options::validate() const {
  if (target_pack_bytes < 4096 || target_pack_bytes > max_pack_offset / 2)
    return status::invalid_argument(fmt::format("node store option target_pack_bytes = {}: must be between 4096 and {}",
                                                target_pack_bytes, max_pack_offset / 2));
  if (cache_bytes == 0) return status::invalid_argument("node store option cache_bytes must be > 0");
  if (!(record_cache_share >= 0 && record_cache_share <= 0.9))
    return status::invalid_argument(
        fmt::format("node store option record_cache_share = {}: must be between 0 and 0.9", record_cache_share));
  if (write_buffer_bytes == 0) return status::invalid_argument("node store option write_buffer_bytes must be > 0");
  if (codec == node_codec::zstd && (compression_level < 1 || compression_level > 19))
    return status::invalid_argument(
        fmt::format("node store option compression_level = {}: must be between 1 and 19", compression_level));
  return status::ok();
}

// ---- the store ---------------------------------------------------------------------

node_store::node_store(env& e, std::string dir, node_store_options options)
    : env_(e), dir_(std::move(dir)), options_(options), cache_(std::make_unique<node_cache>(options.cache_bytes)) {
  if (record_cache_capacity() > 0) records_ = std::make_unique<record_cache>(record_cache_capacity());
  cctx_ = ZSTD_createCCtx();
}

node_store::~node_store() { ZSTD_freeCCtx(static_cast<ZSTD_CCtx*>(cctx_)); }

std::string node_store::pack_path(std::uint32_t number) const { return path_join(dir_, pack_file_name(number)); }

result<std::unique_ptr<node_store>> node_store::open(env& e, std::string dir, node_store_options options,
                                                     std::optional<std::uint64_t> committed_position) {
  MAGNETITE_TRY(options.validate());
  std::unique_ptr<node_store> s(new node_store(e, std::move(dir), options));
  MAGNETITE_TRY(s->do_open(committed_position));
  return s;
}

status node_store::check_usable() const {
  std::lock_guard lk(failure_mu_);
  if (failure_.is_ok()) return status::ok();
  return status::failed(
      fmt::format("node store in {} stopped after an earlier error ({}); reopen it", dir_, failure_.message()));
}

status node_store::fail(status s) {
  std::lock_guard lk(failure_mu_);
  if (failure_.is_ok()) failure_ = s;
  return s.with_category(status_category::ambiguous);
}

void node_store::retire() {
  std::lock_guard wl(write_mu_);
  {
    std::lock_guard lk(failure_mu_);
    if (failure_.is_ok())
      failure_ = status::failed(fmt::format("node store in {} was retired: its owner closed it", dir_));
  }
  // No read may touch a mapping once a new store could cut its file: new
  // reads go by pread, and those using one now finish first.
  {
    std::unique_lock sl(state_mu_);
    retired_ = true;
    for (auto& [number, p] : packs_) p->map.reset();
  }
  while (mapped_in_flight_.load(std::memory_order_acquire) != 0) std::this_thread::yield();
  lock_.reset();
}

status node_store::failure() const {
  std::lock_guard lk(failure_mu_);
  return failure_;
}

// Creates (or empties) pack `number` and its index file, each with its header,
// nothing synced. A failure to create the index is not an error: the index is
// only an accelerator (open rebuilds what it lacks).
result<std::shared_ptr<node_store::pack>> node_store::create_pack(std::uint32_t number) {
  if (number > max_pack_number)
    return status::failed(fmt::format("node store in {}: pack numbers are exhausted ({})", dir_, number));
  auto p = std::make_shared<pack>();
  p->number = number;
  p->path = pack_path(number);
  p->salt = random_salt();
  auto f = env_.open(p->path, open_mode::create_truncate);
  if (!f) return f.error();
  p->f = std::move(*f);
  // Reads of a pack are of one record each, at random: no readahead.
  p->f->advise_random();
  MAGNETITE_TRY(p->f->append(encode_file_header(pack_magic, {number, p->salt, pack_format_version})));
  pack_bytes_written_ += file_header_size;
  if (auto idx = env_.open(path_join(dir_, pack_index_file_name(number)), open_mode::create_truncate)) {
    if ((*idx)->append(encode_file_header(index_magic, {number, p->salt})).is_ok()) p->index = std::move(*idx);
  }
  return p;
}

// ---- writing -------------------------------------------------------------------------

result<hash128> node_store::write(const node& n) {
  std::string_view bytes = n.encode();
  if (bytes.size() > max_node_bytes)
    return status::invalid_argument(
        fmt::format("tree node of {} bytes exceeds the node store's limit of {} bytes", bytes.size(), max_node_bytes));
  hash128 h = hash128::of(bytes);
  std::lock_guard wl(write_mu_);
  MAGNETITE_TRY(check_usable());
  if (cycle_) reclaim_note_write(n, h);
  if (index_.contains(h) || pending_at_.count(h)) {
    ++writes_deduplicated_;
    if (journaling_) reused_.push_back(h);
    return h;
  }
  pending_record rec;
  rec.hash = h;
  rec.raw_length = static_cast<std::uint32_t>(bytes.size());
  store_form(n, bytes, rec);
  MAGNETITE_TRY(add_pending(std::move(rec)));
  return h;
}

void node_store::store_form(const node& n, std::string_view bytes, pending_record& rec) {
  rec.flags = 0;
  if (options_.searchable_leaves && n.is_leaf()) {
    rec.payload = searchable_leaf::make(n);
    rec.flags = flag_searchable_summed;
    return;
  }
  if (options_.codec == node_codec::zstd) {
    if (std::size_t bound = ZSTD_compressBound(bytes.size()); compressed_.size() < bound) compressed_.resize(bound);
    std::size_t zn = ZSTD_compressCCtx(static_cast<ZSTD_CCtx*>(cctx_), compressed_.data(), compressed_.size(),
                                       bytes.data(), bytes.size(), options_.compression_level);
    if (!ZSTD_isError(zn) && zn < bytes.size()) {
      rec.payload.assign(compressed_.data(), zn);
      rec.flags = flag_zstd;
    }
  } else if (options_.codec == node_codec::lz4) {
    // bytes.size() <= max_node_bytes, far below LZ4's input limit.
    auto n = static_cast<int>(bytes.size());
    if (std::size_t bound = static_cast<std::size_t>(LZ4_compressBound(n)); compressed_.size() < bound)
      compressed_.resize(bound);
    int zn = LZ4_compress_default(bytes.data(), compressed_.data(), n, static_cast<int>(compressed_.size()));
    if (zn > 0 && zn < n) {
      rec.payload.assign(compressed_.data(), static_cast<std::size_t>(zn));
      rec.flags = flag_lz4;
    }
  }
  if (rec.flags == 0) rec.payload = bytes;
}

status node_store::add_pending(pending_record rec) {
  pending_bytes_ += record_header_size + rec.payload.size();
  {
    std::unique_lock sl(state_mu_);
    pending_at_.emplace(rec.hash, pending_.size());
    pending_.push_back(std::move(rec));
  }
  ++nodes_written_;
  if (pending_bytes_ >= options_.write_buffer_bytes) MAGNETITE_TRY(spill(/*flushing=*/false));
  return status::ok();
}

status node_store::copy_in(const record_copy& r) {
  if (r.raw.size() > max_node_bytes || r.raw.size() != r.raw_length)
    return status::invalid_argument(
        fmt::format("a record copy of node {} of {} bytes (length {})", r.hash, r.raw.size(), r.raw_length));
  if (hash128::of(r.raw) != r.hash)
    return status::corruption(fmt::format("a record copy of node {} hashes to {}", r.hash, hash128::of(r.raw)));
  std::lock_guard wl(write_mu_);
  MAGNETITE_TRY(check_usable());
  // A compressed record is kept as it came (the point of a copy); a leaf
  // takes this store's form, searchable or compressed, made from its
  // encoding, so that offsets are never taken on trust.
  bool leaf = !r.raw.empty() && r.raw[0] == 0;
  bool reform = leaf && (options_.searchable_leaves || (r.flags & searchable_flags));
  std::optional<node> n;
  if (cycle_ || reform) {
    auto d = node::decode(r.raw);
    if (!d) return d.error();
    n = std::move(*d);
  }
  if (cycle_) reclaim_note_write(*n, r.hash);
  if (index_.contains(r.hash) || pending_at_.count(r.hash)) {
    ++writes_deduplicated_;
    return status::ok();
  }
  pending_record rec;
  rec.hash = r.hash;
  rec.raw_length = r.raw_length;
  if (reform) {
    store_form(*n, r.raw, rec);
  } else {
    rec.flags = r.flags;
    rec.payload = r.payload;
  }
  return add_pending(std::move(rec));
}

// Makes the active pack durable up to what was written: one fdatasync, one
// directory fsync if the pack is new, then its index entries (unsynced).
status node_store::sync_active() {
  if (written_size_ == synced_size_ && !dir_dirty_) return status::ok();
  if (status s = active_->f->sync(); !s) return fail(std::move(s));
  ++pack_syncs_;
  if (dir_dirty_) {
    if (status s = env_.sync_dir(dir_); !s) return fail(std::move(s));
    dir_dirty_ = false;
  }
  synced_size_ = written_size_;
  durable_position_ = make_position(active_->number, synced_size_);
  has_durable_ = true;
  write_index_entries();
  return status::ok();
}

// Hands the pending records to the kernel in one write, unsynced, and indexes
// them. When the active pack has reached the target size it is sealed first:
// made durable to its end (its one fdatasync, once per target_pack_bytes of
// data, so never per node) and a new pack started. A pack is therefore never
// appended to once a newer one exists, and a flush only ever has the active
// pack to sync. A flush syncs the active pack anyway, so when it finds that
// pack full with bytes not yet synced it appends to it (past the target: a
// soft bound) instead of paying a second fdatasync to seal it, and the next
// spill seals it at no fdatasync.
status node_store::spill(bool flushing) {
  if (pending_.empty()) return status::ok();
  bool unsynced = synced_size_ < written_size_;
  if (written_size_ >= options_.target_pack_bytes && !(flushing && unsynced)) MAGNETITE_TRY(seal_active());
  MAGNETITE_TRY(append_records(pending_));
  {
    std::unique_lock sl(state_mu_);
    pending_.clear();
    pending_at_.clear();
  }
  pending_bytes_ = 0;
  return status::ok();
}

status node_store::seal_active() {
  MAGNETITE_TRY(sync_active());
  active_->sealed_size = written_size_;
  auto p = create_pack(active_->number + 1);
  if (!p) return fail(p.error());
  auto map = map_sealed(*active_);
  {
    std::unique_lock sl(state_mu_);
    packs_[(*p)->number] = *p;
    if (!retired_) active_->map = std::move(map);
  }
  active_->index.reset();  // sealed: every entry it will ever need was written
  active_ = *p;
  written_size_ = file_header_size;
  synced_size_ = 0;
  dir_dirty_ = true;
  return status::ok();
}

status node_store::append_records(std::span<const pending_record> records) {
  if (records.empty()) return status::ok();
  std::string buf;
  std::vector<index_entry> entries;
  entries.reserve(records.size());
  std::uint64_t at = written_size_;
  for (const auto& r : records) {
    std::uint32_t len = static_cast<std::uint32_t>(record_header_size + r.payload.size());
    encode_record(buf, active_->salt, r.hash, r.flags, r.payload, r.raw_length);
    entries.push_back({r.hash, at, len});
    at += len;
  }
  if (at > max_pack_offset)
    return status::invalid_argument(
        fmt::format("node store pack {} would exceed {} bytes; flush more often", active_->path, max_pack_offset));
  if (status s = active_->f->append(buf); !s) return fail(std::move(s));
  pack_bytes_written_ += buf.size();
  written_size_ = at;
  {
    std::unique_lock sl(state_mu_);
    for (const auto& e : entries)
      index_.insert_or_assign(e.hash, node_location{.offset = e.offset, .pack = active_->number, .length = e.length});
  }
  unsynced_entries_.insert(unsynced_entries_.end(), entries.begin(), entries.end());
  return status::ok();
}

// Appends the entries of records made durable by the last sync to the active
// pack's index file, without an fsync (a lost or torn tail is rebuilt at open).
void node_store::write_index_entries() {
  if (active_->index && !unsynced_entries_.empty()) {
    std::string buf;
    buf.reserve(unsynced_entries_.size() * index_entry_size);
    for (const auto& e : unsynced_entries_) encode_index_entry(buf, active_->salt, e.hash, e.offset, e.length);
    // Index entries must stay contiguous: after a failed append, none follow.
    if (!active_->index->append(buf).is_ok()) active_->index.reset();
  }
  unsynced_entries_.clear();
}

result<std::uint64_t> node_store::flush() {
  std::lock_guard wl(write_mu_);
  MAGNETITE_TRY(check_usable());
  MAGNETITE_TRY(spill(/*flushing=*/true));
  ++flushes_;
  MAGNETITE_TRY(sync_active());
  return make_position(active_->number, synced_size_);
}

// ---- what the store reports ----------------------------------------------------------

result<std::uint64_t> node_store::pack_bytes() const {
  std::vector<std::shared_ptr<pack>> live;
  {
    std::shared_lock sl(state_mu_);
    for (const auto& [number, p] : packs_) live.push_back(p);
  }
  std::uint64_t total = 0;
  for (const auto& p : live) {
    auto n = p->f->size();
    if (!n) return n.error();
    total += *n;
  }
  return total;
}

bool node_store::contains(const hash128& h) const {
  std::shared_lock sl(state_mu_);
  return index_.contains(h) || pending_at_.count(h);
}

std::optional<node_location> node_store::locate(const hash128& h) const {
  std::shared_lock sl(state_mu_);
  const node_location* loc = index_.find(h);
  if (!loc) return std::nullopt;
  return *loc;
}

std::optional<std::uint64_t> node_store::durable_position() const {
  if (!has_durable_) return std::nullopt;
  return durable_position_.load();
}

std::shared_ptr<const file_mapping> node_store::map_sealed(pack& p) {
  if (!options_.map_packs || p.sealed_size <= file_header_size) return nullptr;
  auto m = p.f->map(p.sealed_size);
  return m ? std::move(*m) : nullptr;
}

node_store_stats node_store::stats() const {
  node_store_stats s;
  s.cache_hits = cache_->hits();
  s.cache_misses = cache_->misses();
  cache_->usage(s.cache_bytes, s.cache_entries, s.cache_table_bytes, &s.cache_resident_bytes);
  if (records_) {
    s.record_cache_hits = records_->hits();
    s.record_cache_misses = records_->misses();
    std::uint64_t table = 0;
    records_->usage(s.record_cache_bytes, s.record_cache_entries, table);
  }
  s.nodes_written = nodes_written_;
  s.writes_deduplicated = writes_deduplicated_;
  s.pack_bytes_written = pack_bytes_written_;
  s.pack_bytes_read = pack_bytes_read_;
  s.record_reads = record_reads_;
  s.mapped_reads = mapped_reads_;
  s.leaf_lookups = leaf_lookups_;
  s.flushes = flushes_;
  s.pack_syncs = pack_syncs_;
  s.gc_runs = gc_runs_;
  return s;
}

}  // namespace magnetite::tree
