#include "tree/node_store.h"

#include <zstd.h>

#include <algorithm>
#include <limits>
#include <list>
#include <shared_mutex>
#include <random>
#include <set>
#include <unordered_set>

#include "tree/clock_cache.h"
#include "tree/pack_format.h"

namespace magnetite::tree {

namespace {

// Reads and writes of bulk data go in pieces of this size.
constexpr std::size_t io_chunk = 1 << 20;

std::uint64_t random_salt() {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  return rng();
}

ZSTD_DCtx* thread_dctx() {
  struct holder {
    ZSTD_DCtx* ctx = ZSTD_createDCtx();
    ~holder() { ZSTD_freeDCtx(ctx); }
  };
  thread_local holder h;
  return h.ctx;
}

std::string describe_position(std::uint64_t p) {
  return fmt::format("{:#x} (pack {}, offset {})", p, position_pack(p), position_offset(p));
}

// What the cache charges for a decoded node: the memory the node holds and the
// cache's own bookkeeping for it.
std::size_t charge_of(const node& n) {
  constexpr std::size_t bookkeeping = 32;  // the shared_ptr control block (slots are charged by the table)
  return n.memory_bytes() + bookkeeping;
}

// What the record cache charges for a payload of `bytes`: the string's heap
// block (rounded as malloc rounds) and the cached_record's fields.
std::size_t record_charge_of(std::size_t bytes) { return ((bytes + 1 + 15) & ~std::size_t{15}) + 16; }

}  // namespace

status node_store_options::validate() const {
  if (target_pack_bytes < 4096 || target_pack_bytes > max_pack_offset / 2)
    return status::invalid_argument(fmt::format(
        "node store option target_pack_bytes = {}: must be between 4096 and {}", target_pack_bytes,
        max_pack_offset / 2));
  if (cache_bytes == 0) return status::invalid_argument("node store option cache_bytes must be > 0");
  if (!(record_cache_share >= 0 && record_cache_share <= 0.9))
    return status::invalid_argument(fmt::format(
        "node store option record_cache_share = {}: must be between 0 and 0.9", record_cache_share));
  if (write_buffer_bytes == 0)
    return status::invalid_argument("node store option write_buffer_bytes must be > 0");
  if (compress && (compression_level < 1 || compression_level > 19))
    return status::invalid_argument(fmt::format(
        "node store option compression_level = {}: must be between 1 and 19", compression_level));
  return status::ok();
}

// ---- packs -------------------------------------------------------------------------

struct node_store::pack {
  std::uint32_t number = 0;
  std::string path;
  std::uint64_t salt = 0;
  // Its size once sealed (or at open; the active pack's is written_size_):
  // what reclamation weighs without asking the file system.
  std::uint64_t sealed_size = 0;
  std::unique_ptr<file> f;
  // Writer only: the index file, appended at flush; null once it failed (the
  // entries past its valid prefix are then rebuilt by the next open).
  std::unique_ptr<file> index;
};

// What one reclamation cycle knows (node_store.h, reclamation).
struct node_store::reclaim_cycle {
  double max_amplification = 1.5;
  std::uint32_t boundary = 0;  // packs numbered below it are candidates
  struct item {
    hash128 h;
    int level;  // -1: not known (a root, a pending node): read it to know
  };
  std::vector<item> stack;
  std::unordered_set<hash128, hash128_hasher> internal_seen;
  // Per candidate pack, its records found live (a leaf reached through two
  // parents is listed twice until the victims are chosen).
  std::map<std::uint32_t, std::vector<index_entry>> live;
  bool chosen = false;
  std::map<std::uint32_t, std::size_t> victims;  // victim -> copy cursor into live[victim]
  std::uint64_t live_bytes = 0;
  std::uint64_t victim_bytes = 0;
  std::uint64_t copied = 0;
};

// ---- caches ------------------------------------------------------------------------

// A decoded node, with its search index kept beside it so that a leaf lookup
// need not read the node object.
struct cached_node {
  node_ptr n;
  node_index ix;
  explicit operator bool() const noexcept { return n != nullptr; }
};
class node_store::node_cache : public clock_cache<cached_node> {
  using clock_cache::clock_cache;
};

// A leaf's record as stored (its payload: compressed or not), whose content
// was verified against its hash when it was read from its pack.
struct cached_record {
  std::string payload;
  std::uint32_t raw_length = 0;
  std::uint8_t flags = 0;
  explicit operator bool() const noexcept { return !payload.empty(); }
};
class node_store::record_cache : public clock_cache<cached_record> {
  using clock_cache::clock_cache;
};

// ---- the store ---------------------------------------------------------------------

node_store::node_store(env& e, std::string dir, node_store_options options)
    : env_(e), dir_(std::move(dir)), options_(options),
      cache_(std::make_unique<node_cache>(options.cache_bytes)) {
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
  return status::failed(fmt::format("node store in {} stopped after an earlier error ({}); reopen it", dir_,
                                    failure_.message()));
}

status node_store::fail(status s) {
  std::lock_guard lk(failure_mu_);
  if (failure_.is_ok()) failure_ = s;
  return s.with_category(status_category::ambiguous);
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
  MAGNETITE_TRY(p->f->append(encode_file_header(pack_magic, number, p->salt)));
  pack_bytes_written_ += file_header_size;
  if (auto idx = env_.open(path_join(dir_, pack_index_file_name(number)), open_mode::create_truncate)) {
    if ((*idx)->append(encode_file_header(index_magic, number, p->salt)).is_ok()) p->index = std::move(*idx);
  }
  return p;
}

// ---- open / recovery -----------------------------------------------------------------

status node_store::do_open(std::optional<std::uint64_t> committed) {
  MAGNETITE_TRY(env_.create_dir(dir_));
  auto lk = env_.lock(path_join(dir_, store_lock_file_name));
  if (!lk) return lk.error();
  lock_ = std::move(*lk);

  // The manifest: which packs are live since the last gc, and gc's position.
  auto manifest = read_store_manifest(env_, dir_);
  if (!manifest) return manifest.error();
  if (*manifest) {
    first_pack_ = (*manifest)->first_pack;
    gc_floor_ = (*manifest)->gc_position;
    dropped_ = (*manifest)->dropped;
  }

  auto names = env_.list(dir_);
  if (!names) return names.error();
  std::map<std::uint32_t, std::string> pack_files, index_files;
  bool temp_manifest = false;
  for (const auto& n : *names) {
    if (auto num = parse_numbered(n, ".pack")) pack_files[*num] = n;
    else if (auto inum = parse_numbered(n, ".idx")) index_files[*inum] = n;
    else if (n == manifest_temp_file_name) temp_manifest = true;
  }

  // What is kept: everything up to max(committed, gc floor).
  if (committed && (position_pack(*committed) == 0 || position_offset(*committed) < file_header_size))
    return status::invalid_argument(fmt::format("node store in {}: committed position {} was not made by a node "
                                                "store",
                                                dir_, describe_position(*committed)));
  std::optional<std::uint64_t> keep = committed;
  if (gc_floor_ && (!keep || *keep < *gc_floor_)) {
    keep = gc_floor_;
    report_.gc_floor_used = true;
  }
  report_.position = keep;

  struct live_pack {
    std::shared_ptr<pack> p;
    std::uint64_t size = 0;   // on disk now
    std::uint64_t limit = 0;  // durable end: what is kept
    std::vector<index_entry> entries;
    std::uint64_t index_valid_bytes = 0;  // header and the entries loaded
    std::uint64_t index_size = 0;         // on disk now
    bool index_usable = false;            // header belongs to this pack
    bool index_exists = false;
    std::size_t loaded = 0;
  };
  std::vector<live_pack> live;

  // ---- checks: nothing is modified until all of them passed --------------------
  if (keep) {
    std::uint32_t last = position_pack(*keep);
    std::uint64_t end = position_offset(*keep);
    for (std::uint32_t num = first_pack_; num <= last; ++num) {
      if (dropped_.count(num)) continue;
      if (!pack_files.count(num))
        return status::corruption(fmt::format("node store in {}: pack file {} is missing but the durable position "
                                              "{} needs it; nothing was modified",
                                              dir_, pack_file_name(num), describe_position(*keep)));
      live_pack lp;
      lp.p = std::make_shared<pack>();
      lp.p->number = num;
      lp.p->path = pack_path(num);
      auto f = env_.open(lp.p->path, open_mode::open_existing);
      if (!f) return f.error();
      lp.p->f = std::move(*f);
      auto size = lp.p->f->size();
      if (!size) return size.error();
      lp.size = *size;
      std::string header(file_header_size, '\0');
      auto got = lp.p->f->read_at(0, header.size(), header.data());
      if (!got) return got.error();
      pack_bytes_read_ += *got;
      header.resize(*got);
      auto h = parse_file_header(header, pack_magic, "node store pack", lp.p->path);
      if (!h) return h.error();
      if (h->a != num)
        return status::corruption(
            fmt::format("node store pack {}: header says pack {}", lp.p->path, h->a));
      lp.p->salt = h->b;
      lp.limit = num == last ? end : lp.size;
      if (lp.size < lp.limit)
        return status::corruption(fmt::format("node store pack {} is {} bytes but the durable position {} needs "
                                              "{}; nothing was modified",
                                              lp.p->path, lp.size, describe_position(*keep), lp.limit));

      // The index's valid prefix: a header for this very pack (same salt), then
      // entries whose checksums hold, each starting where the previous record
      // ended and ending within the durable part of the pack.
      std::uint64_t covered = file_header_size;
      std::string index_path = path_join(dir_, pack_index_file_name(num));
      if (index_files.count(num)) {
        lp.index_exists = true;
        auto bytes = read_whole_file(env_, index_path);
        if (!bytes) return bytes.error();
        lp.index_size = bytes->size();
        auto ih = parse_file_header(*bytes, index_magic, "node store index", index_path);
        // A newer version's index is refused, not rebuilt over (it is not damage).
        if (!ih && ih.error().code() == status_code::not_supported) return ih.error();
        if (ih && ih->a == num && ih->b == lp.p->salt) {
          lp.index_usable = true;
          std::string_view rest = std::string_view(*bytes).substr(file_header_size);
          for (; rest.size() >= index_entry_size; rest.remove_prefix(index_entry_size)) {
            auto e = parse_index_entry(rest, lp.p->salt);
            if (!e || e->offset != covered || e->length <= record_header_size ||
                e->length > record_header_size + max_node_bytes || e->offset + e->length > lp.limit)
              break;
            lp.entries.push_back({e->hash, e->offset, e->length});
            covered += e->length;
          }
          lp.loaded = lp.entries.size();
          lp.index_valid_bytes = file_header_size + lp.loaded * index_entry_size;
        }
      }
      report_.index_entries_loaded += lp.loaded;

      // The rest is rebuilt from the record headers. Every byte below the limit
      // is durable, so a header that fails its checks here is damage, not a
      // torn write.
      std::string window;
      std::uint64_t window_at = 0;
      for (std::uint64_t at = covered; at < lp.limit;) {
        if (lp.limit - at < record_header_size)
          return status::corruption(fmt::format("node store pack {}, offset {}: {} bytes before the durable end {} "
                                                "are not a record; nothing was modified",
                                                lp.p->path, at, lp.limit - at, lp.limit));
        if (at < window_at || at + record_header_size > window_at + window.size()) {
          window.resize(static_cast<std::size_t>(std::min<std::uint64_t>(io_chunk, lp.limit - at)));
          auto n = lp.p->f->read_at(at, window.size(), window.data());
          if (!n) return n.error();
          pack_bytes_read_ += *n;
          report_.bytes_scanned += *n;
          window.resize(*n);
          window_at = at;
          if (*n < record_header_size)
            return status::corruption(fmt::format("node store pack {}: short read at offset {}", lp.p->path, at));
        }
        record_header rh;
        std::string why = parse_record_header(window.data() + (at - window_at), lp.p->salt, rh);
        if (why.empty() && at + rh.length() > lp.limit)
          why = fmt::format("record of {} bytes runs past the durable end {}", rh.length(), lp.limit);
        if (!why.empty())
          return status::corruption(fmt::format("node store pack {}, offset {}: {} (in durable data, found while "
                                                "rebuilding the index); nothing was modified",
                                                lp.p->path, at, why));
        lp.entries.push_back({rh.hash, at, static_cast<std::uint32_t>(rh.length())});
        report_.index_entries_rebuilt += 1;
        at += rh.length();
      }
      live.push_back(std::move(lp));
    }
  }

  // ---- repairs: cut what lies past the durable position ---------------------------
  std::uint32_t last = keep ? position_pack(*keep) : 0;
  bool removed = false;
  auto note = [&](std::string what) {
    if (!report_.cut_detail.empty()) report_.cut_detail += "; ";
    report_.cut_detail += what;
  };
  for (auto& [num, name] : pack_files) {
    if (num >= first_pack_ && num <= last && !dropped_.count(num)) continue;
    std::string path = path_join(dir_, name);
    std::uint64_t size = 0;
    if (auto f = env_.open(path, open_mode::open_existing))
      if (auto sz = (*f)->size()) size = *sz;
    MAGNETITE_TRY(env_.remove(path));
    removed = true;
    ++report_.packs_removed;
    if (num > last) {
      report_.bytes_cut += size;
      note(fmt::format("removed {} ({} bytes) past the durable position", path, size));
    } else {
      note(fmt::format("removed {} ({} bytes) left over from gc or reclamation", path, size));
    }
  }
  for (auto& [num, name] : index_files) {
    if (num >= first_pack_ && num <= last && !dropped_.count(num)) continue;
    MAGNETITE_TRY(env_.remove(path_join(dir_, name)));
    removed = true;
  }
  if (temp_manifest) {
    MAGNETITE_TRY(env_.remove(path_join(dir_, manifest_temp_file_name)));
    removed = true;
  }
  if (!live.empty() && live.back().size > live.back().limit) {
    live_pack& lp = live.back();
    MAGNETITE_TRY(lp.p->f->truncate(lp.limit));
    report_.bytes_cut += lp.size - lp.limit;
    note(fmt::format("cut {} bytes from {} at offset {}", lp.size - lp.limit, lp.p->path, lp.limit));
  }
  if (removed) MAGNETITE_TRY(env_.sync_dir(dir_));

  // Index files: keep the valid prefix, append what was rebuilt, and fsync
  // every index this changed. Two reasons: an index that lost bytes (cut to its
  // prefix, or replaced) must not get them back in a crash once new records sit
  // where the cut ones were (the entries would describe bytes no longer there
  // and hide the new ones); and rebuilt entries, once durable, are never
  // rebuilt again. This is the only place, besides gc, where an index is synced.
  for (auto& lp : live) {
    std::string index_path = path_join(dir_, pack_index_file_name(lp.p->number));
    bool lost_bytes = false;
    std::unique_ptr<file> idx;
    if (lp.index_usable) {
      auto f = env_.open(index_path, open_mode::open_existing);
      if (!f) return f.error();
      idx = std::move(*f);
      if (lp.index_size > lp.index_valid_bytes) {
        MAGNETITE_TRY(idx->truncate(lp.index_valid_bytes));
        lost_bytes = true;
      }
    } else {
      auto f = env_.open(index_path, open_mode::create_truncate);
      if (!f) return f.error();
      idx = std::move(*f);
      MAGNETITE_TRY(idx->append(encode_file_header(index_magic, lp.p->number, lp.p->salt)));
      lost_bytes = lp.index_exists;
    }
    if (lp.entries.size() > lp.loaded) {
      std::string buf;
      for (std::size_t i = lp.loaded; i < lp.entries.size(); ++i)
        encode_index_entry(buf, lp.p->salt, lp.entries[i].hash, lp.entries[i].offset, lp.entries[i].length);
      MAGNETITE_TRY(idx->append(buf));
    }
    if (lost_bytes || lp.entries.size() > lp.loaded) MAGNETITE_TRY(idx->sync());
    if (lp.p->number == last) lp.p->index = std::move(idx);
  }

  // ---- state -------------------------------------------------------------------------
  for (auto& lp : live) {
    lp.p->sealed_size = lp.limit;
    for (const auto& e : lp.entries) index_.emplace(e.hash, node_location{lp.p->number, e.offset, e.length});
    packs_[lp.p->number] = lp.p;
  }
  report_.packs = live.size();
  if (keep) {
    active_ = packs_.at(last);
    written_size_ = synced_size_ = position_offset(*keep);
    durable_position_ = *keep;
    has_durable_ = true;
  } else {
    // Nothing durable: start the first pack. Its header becomes durable with
    // the first flush.
    auto p = create_pack(first_pack_);
    if (!p) return p.error();
    active_ = *p;
    packs_[first_pack_] = active_;
    written_size_ = file_header_size;
    synced_size_ = 0;
    dir_dirty_ = true;
  }
  return status::ok();
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
  if (index_.count(h) || pending_at_.count(h)) {
    ++writes_deduplicated_;
    return h;
  }
  pending_record rec;
  rec.hash = h;
  rec.raw_length = static_cast<std::uint32_t>(bytes.size());
  if (options_.compress) {
    if (std::size_t bound = ZSTD_compressBound(bytes.size()); compressed_.size() < bound) compressed_.resize(bound);
    std::size_t zn = ZSTD_compressCCtx(static_cast<ZSTD_CCtx*>(cctx_), compressed_.data(), compressed_.size(),
                                       bytes.data(), bytes.size(), options_.compression_level);
    if (!ZSTD_isError(zn) && zn < bytes.size()) {
      rec.payload.assign(compressed_.data(), zn);
      rec.flags = flag_zstd;
    }
  }
  if (rec.flags == 0) rec.payload = bytes;
  pending_bytes_ += record_header_size + rec.payload.size();
  {
    std::unique_lock sl(state_mu_);
    pending_at_.emplace(h, pending_.size());
    pending_.push_back(std::move(rec));
  }
  ++nodes_written_;
  if (pending_bytes_ >= options_.write_buffer_bytes) MAGNETITE_TRY(spill(/*flushing=*/false));
  return h;
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
  {
    std::unique_lock sl(state_mu_);
    packs_[(*p)->number] = *p;
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
    return status::invalid_argument(fmt::format("node store pack {} would exceed {} bytes; flush more often",
                                                active_->path, max_pack_offset));
  if (status s = active_->f->append(buf); !s) return fail(std::move(s));
  pack_bytes_written_ += buf.size();
  written_size_ = at;
  {
    std::unique_lock sl(state_mu_);
    for (const auto& e : entries) index_.insert_or_assign(e.hash, node_location{active_->number, e.offset, e.length});
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

// ---- reading ---------------------------------------------------------------------------

status node_store::read_record_into(const hash128& h, pack& p, const node_location& loc, record_buffers& b) {
  auto bad = [&](std::string why) {
    return status::corruption(fmt::format("node {}: pack {}, offset {}: {}", h, p.path, loc.offset, why));
  };
  if (loc.length <= record_header_size || loc.length > record_header_size + max_node_bytes)
    return bad(fmt::format("index gives a record length of {}", loc.length));
  b.record.resize(loc.length);
  auto got = p.f->read_at(loc.offset, b.record.size(), b.record.data());
  if (!got)
    return status::make(got.error().code(), got.error().category(),
                        fmt::format("node {}: reading pack {} at offset {}: {}", h, p.path, loc.offset,
                                    got.error().message()));
  pack_bytes_read_ += *got;
  if (*got != b.record.size()) return bad(fmt::format("record is truncated ({} of {} bytes)", *got, b.record.size()));
  record_header rh;
  if (std::string why = parse_record_header(b.record.data(), p.salt, rh); !why.empty()) return bad(why);
  if (rh.length() != loc.length)
    return bad(fmt::format("record is {} bytes but the index says {}", rh.length(), loc.length));
  if (rh.hash != h) return bad(fmt::format("record holds node {}", rh.hash));
  b.payload = std::string_view(b.record).substr(record_header_size);
  if (checksum32(b.payload, p.salt) != rh.payload_checksum) return bad("record payload checksum mismatch");
  b.flags = rh.flags;
  b.raw_length = rh.raw;
  if (std::string why = expand(b); !why.empty()) return bad(why);
  if (hash128::of(b.raw) != h) return bad("content does not match its hash");
  return status::ok();
}

std::string node_store::expand(record_buffers& b) {
  if (!(b.flags & flag_zstd)) {
    b.raw = b.payload;
    return {};
  }
  b.decompressed.resize(b.raw_length);
  std::size_t n = ZSTD_decompressDCtx(thread_dctx(), b.decompressed.data(), b.decompressed.size(),
                                      b.payload.data(), b.payload.size());
  if (ZSTD_isError(n)) return fmt::format("zstd: {}", ZSTD_getErrorName(n));
  if (n != b.raw_length) return fmt::format("decompressed to {} bytes, not {}", n, b.raw_length);
  b.raw = b.decompressed;
  return {};
}

result<node_store::stored_record> node_store::read_record(const hash128& h, pack& p, const node_location& loc) {
  record_buffers b;
  MAGNETITE_TRY(read_record_into(h, p, loc, b));
  return stored_record{std::string(b.raw), b.flags, std::string(b.payload)};
}

result<node_ptr> node_store::read(const hash128& h) {
  node_ptr hit;
  if (cache_->with_hit(h, [&](const cached_node& c) { hit = c.n; })) return hit;
  return read_uncached(h);
}

result<std::string> node_store::pending_encoding(const pending_record& r) {
  record_buffers b;
  b.payload = r.payload;
  b.flags = r.flags;
  b.raw_length = r.raw_length;
  if (std::string why = expand(b); !why.empty())
    return status::corruption(fmt::format("node {}: record not yet written out: {}", r.hash, why));
  return std::string(b.raw);
}

// The node cache was asked already (and counted a miss): the record cache,
// pending records, then the packs. b.raw then holds the node's content.
result<node_store::fetched> node_store::fetch(const hash128& h, record_buffers& b) {
  // A record from the record cache or the write buffer was checked against its
  // hash when it was read, or made from the encoding by write(): expanding the
  // same bytes again gives the same content.
  auto expand_in_memory = [&](std::string_view where) -> status {
    b.payload = b.record;
    b.from.reset();
    if (std::string why = expand(b); !why.empty())
      return status::corruption(fmt::format("node {}: {}: {}", h, where, why));
    return status::ok();
  };
  bool again = false;
  bool cached = records_ && records_->with_hit_seen(h, [&](const cached_record& r, bool seen) {
    b.record.assign(r.payload);
    b.flags = r.flags;
    b.raw_length = r.raw_length;
    again = seen;
  });
  if (cached) {
    MAGNETITE_TRY(expand_in_memory("cached record"));
    return again ? fetched::from_record_cache_again : fetched::from_record_cache;
  }
  std::shared_ptr<pack> p;
  node_location loc;
  {
    std::shared_lock sl(state_mu_);
    if (auto it = pending_at_.find(h); it != pending_at_.end()) {
      const pending_record& r = pending_[it->second];
      b.record.assign(r.payload);
      b.flags = r.flags;
      b.raw_length = r.raw_length;
      sl.unlock();
      MAGNETITE_TRY(expand_in_memory("record not yet written out"));
      return fetched::from_pending;
    }
    auto it = index_.find(h);
    if (it == index_.end()) return status::not_found(fmt::format("tree node {} is not stored in {}", h, dir_));
    loc = it->second;
    p = packs_.at(loc.pack);
  }
  MAGNETITE_TRY(read_record_into(h, *p, loc, b));
  b.from = p;
  b.offset = loc.offset;
  return fetched::from_pack;
}

// Decodes what fetch() left in b and keeps it in the node cache.
result<node_ptr> node_store::decode_and_keep(const hash128& h, const record_buffers& b) {
  auto n = node::decode(b.raw);
  if (!n)
    return status::corruption(
        fmt::format("node {}: {}: matches its hash but does not decode: {}", h,
                    b.from ? fmt::format("pack {}, offset {}", b.from->path, b.offset) : "a record in memory",
                    n.error().message()));
  node_ptr out = std::make_shared<const node>(std::move(*n));
  std::size_t charge = charge_of(*out);
  cache_->put(h, cached_node{out, out->search_index()}, charge);
  return out;
}

// A miss reads into this thread's buffers (they keep their capacity), so
// the only allocation is the node's own.
node_store::record_buffers& node_store::thread_buffers() {
  thread_local record_buffers buffers;
  return buffers;
}

// The pack is let go at the end of the read: a thread that reads no more
// must not keep a pack that gc or reclamation removed (its space).
node_store::buffers_lease::~buffers_lease() { b.from.reset(); }

result<node_ptr> node_store::read_uncached(const hash128& h) {
  buffers_lease lease;
  record_buffers& b = lease.b;
  auto f = fetch(h, b);
  if (!f) return f.error();
  if (*f == fetched::from_pack) keep_record(h, b);
  return decode_and_keep(h, b);
}

// A leaf's record earns a place in the record cache when it holds at least
// `record_density` times the leaves a byte of decoded nodes holds: a hit
// there still costs the decompression, the largest part of a miss, and saves
// only the read of the pack and the hash (docs/benchmarks.md, "Reads beyond
// the cache"). True if it was kept.
bool node_store::keep_record(const hash128& h, const record_buffers& b) {
  constexpr std::size_t record_density = 4;
  if (!records_ || !(b.flags & flag_zstd) || b.raw.empty() || b.raw[0] != 0) return false;
  std::size_t charge = record_charge_of(b.payload.size());
  if (charge * record_density > b.raw.size()) return false;
  records_->put(h, cached_record{std::string(b.payload), b.raw_length, b.flags}, charge);
  // The node cache gets the budget less what the record cache holds (and a
  // step of headroom), so a record cache that stays empty (incompressible
  // data) costs the node cache nothing, and the two never hold more than the
  // budget by more than a record.
  constexpr std::uint64_t step = 1u << 20;
  auto want = [&] { return std::min<std::uint64_t>(records_->charged() + step, record_cache_capacity()); };
  auto due = [&](std::uint64_t w, std::uint64_t lent) { return w > lent || w + 2 * step <= lent; };
  if (!due(want(), lent_.load(std::memory_order_relaxed))) return true;  // most inserts: no lock
  std::lock_guard lk(lend_mu_);
  std::uint64_t w = want();
  if (due(w, lent_.load(std::memory_order_relaxed))) {
    lent_.store(w, std::memory_order_relaxed);
    cache_->set_capacity(options_.cache_bytes - w);
  }
  return true;
}

// A leaf that compresses well is decoded into the node cache only once it is
// in demand: read from its pack it goes to the record cache only, and a hit
// there decodes it only if it was hit before since the record cache's clock
// hand last passed it; otherwise it is searched where it lies. So leaves read
// seldom (a uniform spread of gets over data far larger than the cache) cost
// no decoding and evict no decoded node, and hot leaves are kept decoded.
// (read(), which cursors and scans use, returns a node and so decodes and
// keeps every node it reads.)
result<bool> node_store::leaf_get(const hash128& leaf, std::string_view key, std::string& value) {
  result<bool> out = false;
  if (cache_->with_hit(leaf, [&](const cached_node& c) { out = search_leaf(c.ix, leaf, key, value); })) return out;
  buffers_lease lease;
  record_buffers& b = lease.b;
  auto f = fetch(leaf, b);
  if (!f) return f.error();
  if ((*f == fetched::from_pack && keep_record(leaf, b)) || *f == fetched::from_record_cache ||
      *f == fetched::from_pending)
    return search_encoding(b.raw, leaf, key, value);
  auto n = decode_and_keep(leaf, b);
  if (!n) return n.error();
  return search_leaf((*n)->search_index(), leaf, key, value);
}

node_check node_store::check(std::span<const hash128> roots, std::size_t max_problems) {
  node_check out;
  {
    // The MANIFEST is read only at open: damage to it would otherwise show only
    // at the next open, which it would fail.
    std::lock_guard wl(write_mu_);
    auto m = read_store_manifest(env_, dir_);
    if (!m) {
      out.problems.push_back(m.error().message());
    } else if (*m ? !gc_floor_ || (*m)->first_pack != first_pack_ || (*m)->gc_position != *gc_floor_ ||
                        (*m)->dropped != dropped_
                  : gc_floor_.has_value()) {
      out.problems.push_back(fmt::format("node store manifest {}: {} where the open store has first pack {} and "
                                         "gc position {:#x}",
                                         path_join(dir_, manifest_file_name),
                                         *m ? fmt::format("first pack {}, gc position {:#x}", (*m)->first_pack,
                                                          (*m)->gc_position)
                                            : std::string("missing"),
                                         first_pack_, gc_floor_.value_or(0)));
    }
  }
  struct item {
    hash128 h;
    std::optional<hash128> parent;
  };
  std::vector<item> stack;
  for (const auto& r : roots) stack.push_back({r, std::nullopt});
  std::unordered_set<hash128, hash128_hasher> seen;
  auto problem = [&](std::string what) { out.problems.push_back(std::move(what)); };
  while (!stack.empty() && out.problems.size() < max_problems) {
    item it = stack.back();
    stack.pop_back();
    if (!seen.insert(it.h).second) continue;
    std::string raw;
    std::string where;
    {
      std::shared_ptr<pack> p;
      node_location loc;
      {
        std::shared_lock sl(state_mu_);
        if (auto pi = pending_at_.find(it.h); pi != pending_at_.end()) {
          auto e = pending_encoding(pending_[pi->second]);
          if (!e) {
            problem(e.error().message());
            continue;
          }
          raw = std::move(*e);
        } else if (auto ii = index_.find(it.h); ii != index_.end()) {
          loc = ii->second;
          p = packs_.at(loc.pack);
        }
      }
      if (p) {
        auto rec = read_record(it.h, *p, loc);
        if (!rec) {
          problem(rec.error().message());
          continue;
        }
        raw = std::move(rec->raw);
        out.bytes += loc.length;
        where = fmt::format("pack {}, offset {}", p->path, loc.offset);
      } else if (raw.empty()) {
        problem(it.parent ? fmt::format("node {} (a child of node {}) is not stored in {}", it.h, *it.parent, dir_)
                          : fmt::format("root node {} is not stored in {}", it.h, dir_));
        continue;
      } else {
        where = "pending (not yet written)";
      }
    }
    ++out.nodes;
    auto n = node::decode(raw);
    if (!n) {
      problem(fmt::format("node {}: {}: matches its hash but does not decode: {}", it.h, where, n.error().message()));
      continue;
    }
    if (n->level() == 0) continue;
    for (const auto& e : n->entries()) {
      auto c = child_ref::decode(e.value);
      if (!c) {
        problem(fmt::format("node {}: {}: a bad child reference under key of {} bytes", it.h, where, e.key.size()));
        continue;
      }
      stack.push_back({c->hash, it.h});
    }
  }
  return out;
}

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
  return index_.count(h) || pending_at_.count(h);
}

std::optional<node_location> node_store::locate(const hash128& h) const {
  std::shared_lock sl(state_mu_);
  auto it = index_.find(h);
  if (it == index_.end()) return std::nullopt;
  return it->second;
}

std::optional<std::uint64_t> node_store::durable_position() const {
  if (!has_durable_) return std::nullopt;
  return durable_position_.load();
}

node_store_stats node_store::stats() const {
  node_store_stats s;
  s.cache_hits = cache_->hits();
  s.cache_misses = cache_->misses();
  cache_->usage(s.cache_bytes, s.cache_entries, s.cache_table_bytes);
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
  s.flushes = flushes_;
  s.pack_syncs = pack_syncs_;
  s.gc_runs = gc_runs_;
  return s;
}

// ---- garbage collection ------------------------------------------------------------

// The record of a node reachable from a kept root, pending or stored, checked.
result<node_store::stored_record> node_store::load_for_gc(const hash128& h) {
  // The writer's own view: state changes only under write_mu_, which gc holds.
  if (auto it = pending_at_.find(h); it != pending_at_.end()) {
    const pending_record& r = pending_[it->second];
    auto raw = pending_encoding(r);
    if (!raw) return raw.error();
    return stored_record{std::move(*raw), r.flags, r.payload};
  }
  auto it = index_.find(h);
  if (it == index_.end())
    return status::not_found(fmt::format("gc: tree node {} reachable from a kept root is not stored in {}", h, dir_));
  return read_record(h, *packs_.at(it->second.pack), it->second);
}

result<gc_result> node_store::gc(std::span<const hash128> roots_to_keep) {
  std::lock_guard wl(write_mu_);
  MAGNETITE_TRY(check_usable());
  ++gc_runs_;
  cycle_.reset();  // gc does the whole job; a cycle's marks would be stale
  gc_result out;

  // The new packs follow the active one, so every position gc makes is above
  // every position made before it.
  struct output {
    std::shared_ptr<pack> p;
    std::uint64_t size = 0;
    std::vector<index_entry> entries;
  };
  std::vector<output> outputs;
  std::string buf;
  std::unordered_map<hash128, node_location, hash128_hasher> new_index;

  // A failed read (a reachable node missing or corrupt) abandons gc: the packs
  // it made are removed as far as possible and the store goes on as before.
  // A failed write or sync stops the store.
  auto remove_outputs = [&]() {
    for (auto& o : outputs) {
      std::uint32_t num = o.p->number;
      o.p.reset();
      (void)env_.remove(pack_path(num));
      (void)env_.remove(path_join(dir_, pack_index_file_name(num)));
    }
  };
  auto write_out = [&]() -> status {
    if (buf.empty()) return status::ok();
    if (status s = outputs.back().p->f->append(buf); !s) return fail(std::move(s));
    pack_bytes_written_ += buf.size();
    buf.clear();
    return status::ok();
  };
  auto start_pack = [&]() -> status {
    std::uint32_t num = outputs.empty() ? active_->number + 1 : outputs.back().p->number + 1;
    auto p = create_pack(num);
    if (!p) return fail(p.error());
    outputs.push_back({*p, file_header_size, {}});
    return status::ok();
  };
  // Makes a finished output pack and its complete index durable.
  auto seal = [&](output& o) -> status {
    if (status s = o.p->f->sync(); !s) return fail(std::move(s));
    if (o.p->index) {
      std::string ib;
      ib.reserve(o.entries.size() * index_entry_size);
      for (const auto& e : o.entries) encode_index_entry(ib, o.p->salt, e.hash, e.offset, e.length);
      // An index that cannot be written costs a scan at open, nothing more.
      if (!o.p->index->append(ib).is_ok() || !o.p->index->sync().is_ok()) o.p->index.reset();
    }
    return status::ok();
  };

  std::unordered_set<hash128, hash128_hasher> seen;
  std::vector<hash128> stack(roots_to_keep.begin(), roots_to_keep.end());
  while (!stack.empty()) {
    hash128 h = stack.back();
    stack.pop_back();
    if (!seen.insert(h).second) continue;
    auto rec = load_for_gc(h);
    if (!rec) {
      remove_outputs();
      return rec.error();
    }
    if (rec->raw.empty() || rec->raw[0] != 0) {  // not a leaf: follow the children
      auto n = node::decode(rec->raw);
      if (!n) {
        remove_outputs();
        return status::corruption(fmt::format("gc: node {} matches its hash but does not decode: {}", h,
                                              n.error().message()));
      }
      for (const auto& e : n->entries()) {
        auto c = child_ref::decode(e.value);
        if (!c) {
          remove_outputs();
          return status::corruption(fmt::format("gc: node {} has a bad child reference", h));
        }
        stack.push_back(c->hash);
      }
    }
    if (outputs.empty() || outputs.back().size >= options_.target_pack_bytes) {
      if (!outputs.empty()) {
        MAGNETITE_TRY(write_out());
        MAGNETITE_TRY(seal(outputs.back()));
        outputs.back().p->index.reset();
      }
      MAGNETITE_TRY(start_pack());
    }
    output& o = outputs.back();
    auto len = static_cast<std::uint32_t>(record_header_size + rec->payload.size());
    encode_record(buf, o.p->salt, h, rec->flags, rec->payload, static_cast<std::uint32_t>(rec->raw.size()));
    o.entries.push_back({h, o.size, len});
    new_index.emplace(h, node_location{o.p->number, o.size, len});
    o.size += len;
    if (buf.size() >= io_chunk) MAGNETITE_TRY(write_out());
  }
  if (outputs.empty()) MAGNETITE_TRY(start_pack());  // gc always leaves an active pack
  MAGNETITE_TRY(write_out());
  MAGNETITE_TRY(seal(outputs.back()));

  // The switch: the new packs' names durable, then the manifest naming them.
  const std::uint32_t first = outputs.front().p->number;
  const std::uint64_t position = make_position(outputs.back().p->number, outputs.back().size);
  if (status s = env_.sync_dir(dir_); !s) return fail(std::move(s));
  MAGNETITE_TRY(write_manifest(first, position, {}));

  // Switched: from here on the old packs are garbage.
  std::map<std::uint32_t, std::shared_ptr<pack>> old_packs;
  {
    std::unique_lock sl(state_mu_);
    old_packs.swap(packs_);
    for (auto& o : outputs) {
      o.p->sealed_size = o.size;
      packs_[o.p->number] = o.p;
    }
    index_.swap(new_index);
    pending_.clear();
    pending_at_.clear();
  }
  // Readers that looked a node up before the switch still hold its old pack
  // (open handles stay readable after the file is removed).
  cache_->clear();
  if (records_) records_->clear();
  epoch_.fetch_add(1, std::memory_order_release);  // nodes may have been dropped
  first_pack_ = first;
  gc_floor_ = position;
  dropped_.clear();
  active_ = outputs.back().p;
  written_size_ = synced_size_ = outputs.back().size;
  dir_dirty_ = false;
  unsynced_entries_.clear();
  pending_bytes_ = 0;
  durable_position_ = position;
  has_durable_ = true;
  for (auto& o : outputs) {
    out.bytes_kept += o.size;
    out.nodes_kept += o.entries.size();
  }
  out.position = position;

  // Old packs go oldest first; a failure stops the removal without stopping the
  // store (open removes packs older than the manifest's first).
  bool removed = false;
  for (auto& [num, p] : old_packs) {
    std::uint64_t size = 0;
    if (auto sz = p->f->size()) size = *sz;
    if (!env_.remove(p->path).is_ok()) break;
    (void)env_.remove(path_join(dir_, pack_index_file_name(num)));
    removed = true;
    out.bytes_removed += size;
    ++out.packs_removed;
  }
  if (removed) (void)env_.sync_dir(dir_);
  out.bytes_reclaimed = out.bytes_removed > out.bytes_kept ? out.bytes_removed - out.bytes_kept : 0;
  return out;
}


// Writes the manifest under its temporary name, makes it durable, renames it
// over MANIFEST and makes the rename durable: the switch of gc and reclamation.
// Any failure stops the store: whether the rename reached the disk is unknown.
status node_store::write_manifest(std::uint32_t first, std::uint64_t position,
                                  const std::set<std::uint32_t>& dropped) {
  std::string temp = path_join(dir_, manifest_temp_file_name);
  auto f = env_.open(temp, open_mode::create_truncate);
  if (!f) return fail(f.error());
  if (status s = (*f)->append(encode_store_manifest(first, position, dropped)); !s) return fail(std::move(s));
  if (status s = (*f)->sync(); !s) return fail(std::move(s));
  if (status s = env_.rename(temp, path_join(dir_, manifest_file_name)); !s) return fail(std::move(s));
  if (status s = env_.sync_dir(dir_); !s) return fail(std::move(s));
  return status::ok();
}

// ---- incremental reclamation ------------------------------------------------------


bool node_store::reclaim_due(double max_amplification, std::uint64_t min_bytes, double live_scale) const {
  std::uint64_t total = 0;
  {
    std::shared_lock sl(state_mu_);
    for (const auto& [num, p] : packs_) total += p == active_ ? written_size_ : p->sealed_size;
  }
  if (total < min_bytes) return false;
  std::lock_guard lk(reclaim_mu_);
  return !reclaim_.live_bytes ||
         static_cast<double>(total) > max_amplification * live_scale * static_cast<double>(*reclaim_.live_bytes);
}

result<std::uint64_t> node_store::reachable_bytes(std::span<const hash128> roots) {
  struct item {
    hash128 h;
    int level;
  };
  std::vector<item> stack;
  for (const auto& r : roots) stack.push_back({r, -1});
  std::unordered_set<hash128, hash128_hasher> seen;
  std::uint64_t total = 0;
  while (!stack.empty()) {
    item it = stack.back();
    stack.pop_back();
    if (!seen.insert(it.h).second) continue;
    if (auto loc = locate(it.h)) total += loc->length;
    if (it.level == 0) continue;
    auto n = read(it.h);
    if (!n) return n.error();
    if ((*n)->is_leaf()) continue;
    for (const auto& e : (*n)->entries()) {
      auto ref = child_ref::decode(e.value);
      if (!ref) return status::corruption(fmt::format("node {} has a bad child reference", it.h));
      stack.push_back({ref->hash, (*n)->level() - 1});
    }
  }
  return total;
}

reclaim_stats node_store::reclamation() const {
  std::lock_guard lk(reclaim_mu_);
  return reclaim_;
}

status node_store::begin_reclaim(std::span<const hash128> roots, double max_amplification) {
  std::lock_guard wl(write_mu_);
  MAGNETITE_TRY(check_usable());
  if (!(max_amplification > 1.0))
    return status::invalid_argument(fmt::format("reclamation: space amplification {} must be above 1", max_amplification));
  // Sealing makes the records written so far candidates. Nothing pending is
  // handed over: pending nodes land in the new pack, outside the candidates.
  if (written_size_ > file_header_size) MAGNETITE_TRY(seal_active());
  auto c = std::make_unique<reclaim_cycle>();
  c->max_amplification = max_amplification;
  c->boundary = active_->number;
  for (const auto& r : roots) c->stack.push_back({r, -1});
  // A pending node may be the top of a tree not yet committed (an import):
  // what it refers to is kept.
  for (const auto& r : pending_) c->stack.push_back({r.hash, -1});
  cycle_ = std::move(c);
  return status::ok();
}

void node_store::reclaim_note_write(const node& n, const hash128& h) {
  auto& c = *cycle_;
  if (auto it = index_.find(h); it != index_.end() && it->second.pack < c.boundary)
    c.stack.push_back({h, n.level()});  // deduplicated against a candidate: alive again
  if (n.is_leaf()) return;
  for (const auto& e : n.entries())
    if (auto ref = child_ref::decode(e.value)) c.stack.push_back({ref->hash, n.level() - 1});
}

result<bool> node_store::reclaim_mark(std::size_t& budget) {
  auto& c = *cycle_;
  while (!c.stack.empty()) {
    if (budget == 0) return false;
    auto it = c.stack.back();
    c.stack.pop_back();
    budget -= std::min<std::size_t>(budget, 64);
    auto loc = index_.find(it.h);
    if (loc == index_.end() && !pending_at_.count(it.h))
      return status::corruption(fmt::format("reclamation: tree node {} reachable from a kept root is not stored in {}",
                                            it.h, dir_));
    if (loc != index_.end() && loc->second.pack < c.boundary &&
        (!c.chosen || c.victims.count(loc->second.pack)))
      c.live[loc->second.pack].push_back({it.h, loc->second.offset, loc->second.length});
    if (it.level == 0 || !c.internal_seen.insert(it.h).second) continue;
    auto n = read(it.h);
    if (!n) return n.error();
    if ((*n)->is_leaf()) continue;
    budget -= std::min<std::size_t>(budget, (*n)->encode().size());
    for (const auto& e : (*n)->entries()) {
      auto ref = child_ref::decode(e.value);
      if (!ref) return status::corruption(fmt::format("reclamation: node {} has a bad child reference", it.h));
      c.stack.push_back({ref->hash, (*n)->level() - 1});
    }
  }
  return true;
}

// Victims: every candidate without a live record; every small candidate
// once four or more have piled up (each costs an open file, and they only
// appear when cycles seal small active packs); then the candidates with the
// least live data first, until the projected total is within 1 + (max - 1) / 2
// of the live bytes (halfway, so the next cycle is not due at once).
void node_store::reclaim_choose_victims() {
  auto& c = *cycle_;
  struct candidate {
    std::uint32_t num;
    std::uint64_t size, live;
  };
  std::vector<candidate> cands;
  std::uint64_t total = 0, live = 0;
  for (const auto& [num, p] : packs_) {
    std::uint64_t size = p == active_ ? written_size_ : p->sealed_size;
    total += size;
    if (num >= c.boundary) {
      live += size;  // written during the cycle: taken as live
      continue;
    }
    auto& v = c.live[num];
    std::sort(v.begin(), v.end(), [](const index_entry& a, const index_entry& b) { return a.offset < b.offset; });
    v.erase(std::unique(v.begin(), v.end(), [](const index_entry& a, const index_entry& b) { return a.offset == b.offset; }),
            v.end());
    std::uint64_t l = file_header_size;
    for (const auto& e : v) l += e.length;
    live += l;
    cands.push_back({num, size, std::min(l, size)});
  }
  c.live_bytes = live;
  std::uint64_t projected = total;
  auto take = [&](const candidate& k) {
    if (c.victims.emplace(k.num, 0).second) {
      projected -= k.size - k.live;
      c.victim_bytes += k.size;
    }
  };
  std::size_t small = 0;
  for (const auto& k : cands) {
    if (k.live <= file_header_size) take(k);
    if (k.size < options_.target_pack_bytes / 4) ++small;
  }
  if (small >= 4)
    for (const auto& k : cands)
      if (k.size < options_.target_pack_bytes / 4) take(k);
  std::sort(cands.begin(), cands.end(), [](const candidate& a, const candidate& b) {
    return static_cast<double>(a.live) / static_cast<double>(a.size) <
           static_cast<double>(b.live) / static_cast<double>(b.size);
  });
  const double target = static_cast<double>(live) * (1.0 + (c.max_amplification - 1.0) / 2.0);
  for (const auto& k : cands) {
    if (static_cast<double>(projected) <= target || k.live >= k.size) break;
    take(k);
  }
  for (auto it = c.live.begin(); it != c.live.end();) {
    if (c.victims.count(it->first)) ++it;
    else it = c.live.erase(it);
  }
  c.chosen = true;
}

// Copies the live records of the victims, about `budget` bytes of them, to
// the active pack and makes them durable (one fdatasync a step: the copies
// never pile up into one long sync that would hold the owner's writes).
result<bool> node_store::reclaim_copy(std::size_t& budget) {
  auto& c = *cycle_;
  std::vector<pending_record> batch;
  bool done = true;
  for (auto& [num, at] : c.victims) {
    auto& list = c.live[num];
    auto p = packs_.at(num);
    for (; at < list.size(); ++at) {
      if (budget == 0) {
        done = false;
        break;
      }
      const index_entry& e = list[at];
      auto loc = index_.find(e.hash);
      if (loc == index_.end() || loc->second.pack != num) continue;  // copied already
      auto rec = read_record(e.hash, *p, loc->second);
      if (!rec) return rec.error();
      budget -= std::min<std::size_t>(budget, loc->second.length);
      c.copied += loc->second.length;
      pending_record r;
      r.hash = e.hash;
      r.flags = rec->flags;
      r.raw_length = static_cast<std::uint32_t>(rec->raw.size());
      r.payload = std::move(rec->payload);
      batch.push_back(std::move(r));
    }
    if (!done) break;
  }
  if (!batch.empty()) {
    if (written_size_ >= options_.target_pack_bytes) MAGNETITE_TRY(seal_active());
    MAGNETITE_TRY(append_records(batch));
    MAGNETITE_TRY(sync_active());
  }
  return done;
}

// The switch: every live record of the victims is copied and durable; the
// manifest names the victims dropped, with the position covering the copies
// as its floor (so open keeps them whatever the owner recorded); then the
// victims are removed.
status node_store::reclaim_finish() {
  auto& c = *cycle_;
  std::size_t unlimited = std::numeric_limits<std::size_t>::max();
  auto marked = reclaim_mark(unlimited);  // what writes since the last step marked
  if (!marked) return marked.error();
  unlimited = std::numeric_limits<std::size_t>::max();
  auto copied = reclaim_copy(unlimited);
  if (!copied) return copied.error();
  if (c.victims.empty()) return status::ok();
  MAGNETITE_TRY(sync_active());
  std::set<std::uint32_t> dropped = dropped_;
  for (const auto& [num, at] : c.victims) dropped.insert(num);
  std::uint32_t first = first_pack_;
  while (dropped.count(first)) dropped.erase(first++);
  const std::uint64_t position = make_position(active_->number, synced_size_);
  MAGNETITE_TRY(write_manifest(first, position, dropped));

  // The records left in the victims are garbage. index_ changes only under
  // write_mu_ (held), so it is read here without state_mu_; readers are held
  // off only while the entries are erased.
  std::vector<hash128> dead;
  for (const auto& [h, loc] : index_)
    if (c.victims.count(loc.pack)) dead.push_back(h);
  std::vector<std::shared_ptr<pack>> gone;
  {
    std::unique_lock sl(state_mu_);
    for (const auto& h : dead) index_.erase(h);
    for (const auto& [num, at] : c.victims) {
      gone.push_back(packs_.at(num));
      packs_.erase(num);
    }
  }
  epoch_.fetch_add(1, std::memory_order_release);  // nodes were dropped
  first_pack_ = first;
  gc_floor_ = position;
  dropped_ = std::move(dropped);
  // A failed removal leaves garbage that open removes; the store goes on.
  for (const auto& p : gone) {
    (void)env_.remove(p->path);
    (void)env_.remove(path_join(dir_, pack_index_file_name(p->number)));
  }
  (void)env_.sync_dir(dir_);
  std::lock_guard lk(reclaim_mu_);
  reclaim_.packs_dropped += gone.size();
  reclaim_.bytes_copied += c.copied;
  reclaim_.bytes_reclaimed += c.victim_bytes > c.copied ? c.victim_bytes - c.copied : 0;
  return status::ok();
}

result<bool> node_store::reclaim_step(std::size_t budget) {
  std::lock_guard wl(write_mu_);
  MAGNETITE_TRY(check_usable());
  if (!cycle_) return true;
  auto end_with = [&](status s) -> status {
    cycle_.reset();
    return s;
  };
  auto marked = reclaim_mark(budget);
  if (!marked) return end_with(marked.error());
  if (!*marked) return false;
  if (!cycle_->chosen) {
    reclaim_choose_victims();
    if (budget == 0) return false;
  }
  auto copied = reclaim_copy(budget);
  if (!copied) return end_with(copied.error());
  if (!*copied) return false;
  std::uint64_t live = cycle_->live_bytes;
  if (status s = reclaim_finish(); !s) return end_with(std::move(s));
  MAGNETITE_TRY(end_with(status::ok()));
  std::lock_guard lk(reclaim_mu_);
  ++reclaim_.cycles;
  reclaim_.live_bytes = live;
  return true;
}

}  // namespace magnetite::tree