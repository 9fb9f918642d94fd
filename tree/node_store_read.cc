// node_store: reading (node_store.h, read, leaf_get and check): the node
// cache, the record cache and when a record earns a place in it, pending
// records, then the packs; every record checked before it is used.
#include "tree/node_store.h"

#include <lz4.h>
#include <zstd.h>

#include <algorithm>
#include <unordered_set>

#include "tree/node_store_internal.h"
#include "tree/pack_format.h"
#include "tree/searchable_leaf.h"

namespace magnetite::tree {

namespace {

ZSTD_DCtx* thread_dctx() {
  struct holder {
    ZSTD_DCtx* ctx = ZSTD_createDCtx();
    ~holder() { ZSTD_freeDCtx(ctx); }
  };
  thread_local holder h;
  return h.ctx;
}

// What the cache charges for a decoded node: the memory the node holds and the
// cache's own bookkeeping for it.
std::size_t charge_of(const node& n) {
  constexpr std::size_t bookkeeping = 32;  // the shared_ptr control block (slots are charged by the table)
  return n.memory_bytes() + bookkeeping;
}

searchable_leaf::sums sums_of(std::uint8_t flags) noexcept {
  return (flags & flag_searchable_summed) ? searchable_leaf::sums::per_entry : searchable_leaf::sums::none;
}

// What the record cache charges for a payload of `bytes`: the string's heap
// block (rounded as malloc rounds) and the cached_record's fields.
std::size_t record_charge_of(std::size_t bytes) { return ((bytes + 1 + 15) & ~std::size_t{15}) + 16; }

}  // namespace

status node_store::read_record_into(const hash128& h, pack& p, const node_location& loc, record_buffers& b,
                                    std::shared_ptr<const file_mapping> map, check_depth depth) {
  auto bad = [&](std::string why) {
    return status::corruption(fmt::format("node {}: pack {}, offset {}: {}", h, p.path, loc.offset, why));
  };
  if (loc.length <= record_header_size || loc.length > record_header_size + max_node_bytes)
    return bad(fmt::format("index gives a record length of {}", loc.length));
  std::string_view record;
  // Counters only: relaxed, every reading thread passes here.
  record_reads_.fetch_add(1, std::memory_order_relaxed);
  if (map && loc.offset <= map->size() && loc.length <= map->size() - loc.offset) {
    // Read where it lies: checked below as a copy would be.
    record = std::string_view(map->data() + loc.offset, loc.length);
    b.mapped = std::move(map);  // the fetch that took it counted it in flight
    mapped_reads_.fetch_add(1, std::memory_order_relaxed);
  } else {
    b.record.resize(loc.length);
    auto got = p.f->read_at(loc.offset, b.record.size(), b.record.data());
    if (!got)
      return status::make(
          got.error().code(), got.error().category(),
          fmt::format("node {}: reading pack {} at offset {}: {}", h, p.path, loc.offset, got.error().message()));
    pack_bytes_read_ += *got;
    if (*got != b.record.size()) return bad(fmt::format("record is truncated ({} of {} bytes)", *got, b.record.size()));
    record = b.record;
  }
  record_header rh;
  if (std::string why = parse_record_header(record.data(), p.salt, rh); !why.empty()) return bad(why);
  if (rh.length() != loc.length)
    return bad(fmt::format("record is {} bytes but the index says {}", rh.length(), loc.length));
  if (rh.hash != h) return bad(fmt::format("record holds node {}", rh.hash));
  b.payload = record.substr(record_header_size);
  if (checksum32(checksummed_payload(rh.flags, b.payload, rh.raw), p.salt) != rh.payload_checksum)
    return bad("record payload checksum mismatch");
  b.flags = rh.flags;
  b.raw_length = rh.raw;
  if (std::string why = expand(b); !why.empty()) return bad(why);
  // A copy was just made (pread): hashing it costs little beside the read.
  // Where the record lies, hashing would bring all of it from memory for a
  // search that reads a few entries, each checked against its sum.
  b.hash_checked = !(depth == check_depth::for_search && b.mapped && (b.flags & flag_searchable_summed));
  if (b.hash_checked && hash128::of(b.raw) != h) return bad("content does not match its hash");
  return status::ok();
}

std::string node_store::expand(record_buffers& b) {
  if (b.flags & searchable_flags) {
    if (std::string why = searchable_leaf::check(b.payload, b.raw_length, sums_of(b.flags)); !why.empty()) return why;
    b.raw = b.payload.substr(0, b.raw_length);
    return {};
  }
  if (!(b.flags & compressed_flags)) {
    b.raw = b.payload;
    return {};
  }
  b.decompressed.resize(b.raw_length);
  if (b.flags & flag_lz4) {
    // The safe decoder never reads or writes outside the buffers it is given,
    // whatever the bytes (lengths were bounded by the record header).
    int n = LZ4_decompress_safe(b.payload.data(), b.decompressed.data(), static_cast<int>(b.payload.size()),
                                static_cast<int>(b.decompressed.size()));
    if (n < 0) return "lz4: a malformed block";
    if (static_cast<std::uint32_t>(n) != b.raw_length)
      return fmt::format("decompressed to {} bytes, not {}", n, b.raw_length);
  } else {
    std::size_t n = ZSTD_decompressDCtx(thread_dctx(), b.decompressed.data(), b.decompressed.size(), b.payload.data(),
                                        b.payload.size());
    if (ZSTD_isError(n)) return fmt::format("zstd: {}", ZSTD_getErrorName(n));
    if (n != b.raw_length) return fmt::format("decompressed to {} bytes, not {}", n, b.raw_length);
  }
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
result<node_store::fetched> node_store::fetch(const hash128& h, record_buffers& b, check_depth depth) {
  // A record from the record cache or the write buffer was checked against its
  // hash when it was read, or made from the encoding by write(): expanding the
  // same bytes again gives the same content.
  auto expand_in_memory = [&](std::string_view where) -> status {
    b.payload = b.record;
    b.from.reset();
    b.hash_checked = true;
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
  std::shared_ptr<const file_mapping> map;
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
    const node_location* at = index_.find(h);
    if (!at) return status::not_found(fmt::format("tree node {} is not stored in {}", h, dir_));
    loc = *at;
    p = packs_.at(loc.pack);
    map = p->map;
    // Counted before the shared lock goes: retire() drops the mappings
    // under the exclusive lock, then waits for the count to drop.
    if (map) mapped_in_flight_.fetch_add(1, std::memory_order_acq_rel);
  }
  status read = read_record_into(h, *p, loc, b, map, depth);
  if (map && !b.mapped) mapped_in_flight_.fetch_sub(1, std::memory_order_acq_rel);  // read by pread after all
  MAGNETITE_TRY(read);
  b.from = p;
  b.offset = loc.offset;
  return fetched::from_pack;
}

// Decodes what fetch() left in b and, with `keep`, keeps it in the node cache.
result<node_ptr> node_store::decode_and_keep(const hash128& h, const record_buffers& b, bool keep) {
  auto bad = [&](std::string_view why) {
    return status::corruption(
        fmt::format("node {}: {}: {}", h,
                    b.from ? fmt::format("pack {}, offset {}", b.from->path, b.offset) : "a record in memory", why));
  };
  if (!b.hash_checked && hash128::of(b.raw) != h) return bad("content does not match its hash");
  auto n = node::decode(b.raw);
  if (!n) return bad(fmt::format("matches its hash but does not decode: {}", n.error().message()));
  node_ptr out = std::make_shared<const node>(std::move(*n));
  // Internal nodes stay resident: a flood of leaves read once must not
  // make the next get read the nodes above its leaf from the packs too.
  if (keep) cache_->put(h, cached_node{out, out->search_index()}, charge_of(*out), /*resident=*/!out->is_leaf());
  return out;
}

result<node_ptr> node_store::read_passing(const hash128& h) {
  node_ptr hit;
  if (cache_->with_hit(h, [&](const cached_node& c) { hit = c.n; })) return hit;
  buffers_lease lease(*this);
  record_buffers& b = lease.b;
  auto f = fetch(h, b);
  if (!f) return f.error();
  return decode_and_keep(h, b, /*keep=*/false);
}

// A miss reads into this thread's buffers (they keep their capacity), so
// the only allocation is the node's own.
node_store::record_buffers& node_store::thread_buffers() {
  thread_local record_buffers buffers;
  return buffers;
}

// The pack is let go at the end of the read: a thread that reads no more
// must not keep a pack that gc or reclamation removed (its space).
node_store::buffers_lease::~buffers_lease() {
  b.from.reset();
  if (b.mapped) {
    b.mapped.reset();
    store.mapped_in_flight_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

result<node_store::record_copy> node_store::copy_out(const hash128& h) {
  buffers_lease lease(*this);
  record_buffers& b = lease.b;
  auto f = fetch(h, b);
  if (!f) return f.error();
  return record_copy{h, b.flags, b.raw_length, std::string(b.payload), std::string(b.raw)};
}

result<node_ptr> node_store::read_uncached(const hash128& h) {
  buffers_lease lease(*this);
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
  if (!records_ || !b.hash_checked || b.raw.empty() || b.raw[0] != 0) return false;
  std::size_t charge = record_charge_of(b.payload.size());
  // A searchable leaf is as dense as a decoded one (denser: no index of
  // key prefixes) and needs no decoding: always worth its place, unless it
  // was read through a mapping: the page cache holds it already, and a copy
  // would hold the same bytes twice and take its budget from decoded nodes
  // (scans of 1M keys held in the budget ran at 0.63x with the copies).
  if (b.flags & searchable_flags) {
    if (b.mapped) return false;
  } else if (!(b.flags & compressed_flags) || charge * record_density > b.raw.size()) {
    return false;
  }
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
  leaf_lookups_.fetch_add(1, std::memory_order_relaxed);
  result<bool> out = false;
  if (cache_->with_hit(leaf, [&](const cached_node& c) { out = search_leaf(c.ix, leaf, key, value); })) return out;
  buffers_lease lease(*this);
  record_buffers& b = lease.b;
  auto f = fetch(leaf, b, check_depth::for_search);
  if (!f) return f.error();
  if (b.flags & searchable_flags) {
    // Read through a mapping (keep_record keeps no copy of it), it is
    // decoded into the node cache only while that has room to spare: data
    // that fits the budget ends up decoded (a hit there skips the hash of
    // the whole record that every read from the pack pays), and data that
    // does not is searched in the page cache without churning the cache.
    if (*f == fetched::from_pack) keep_record(leaf, b);
    if (*f == fetched::from_pack && b.mapped && cache_->has_room(b.raw.size() + b.raw.size() / 2)) {
      auto n = decode_and_keep(leaf, b);
      if (!n) return n.error();
      return search_leaf((*n)->search_index(), leaf, key, value);
    }
    return searchable_leaf::search(b.payload, b.raw_length, sums_of(b.flags), leaf, key, value);
  }
  if ((*f == fetched::from_pack && keep_record(leaf, b)) || *f == fetched::from_record_cache ||
      *f == fetched::from_pending)
    return search_encoding(b.raw, leaf, key, value);
  auto n = decode_and_keep(leaf, b);
  if (!n) return n.error();
  return search_leaf((*n)->search_index(), leaf, key, value);
}

node_check node_store::check(std::span<const hash128> roots, std::size_t max_problems) {
  node_check out;
  if (auto bad_manifest = check_manifest()) out.problems.push_back(std::move(*bad_manifest));
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
        } else if (const node_location* at = index_.find(it.h)) {
          loc = *at;
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

// The MANIFEST is read only at open: damage to it would otherwise show only
// at the next open, which it would fail. What is wrong with it; nullopt when
// it says what the open store holds.
std::optional<std::string> node_store::check_manifest() {
  std::lock_guard wl(write_mu_);
  auto m = read_store_manifest(env_, dir_);
  if (!m) return m.error().message();
  if (*m ? !gc_floor_ || (*m)->first_pack != first_pack_ || (*m)->gc_position != *gc_floor_ || (*m)->dropped != dropped_
         : gc_floor_.has_value())
    return fmt::format("node store manifest {}: {} where the open store has first pack {} and gc position {:#x}",
                       path_join(dir_, manifest_file_name),
                       *m ? fmt::format("first pack {}, gc position {:#x}", (*m)->first_pack, (*m)->gc_position)
                          : std::string("missing"),
                       first_pack_, gc_floor_.value_or(0));
  return std::nullopt;
}

}  // namespace magnetite::tree
