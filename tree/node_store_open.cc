// node_store: open and recovery (node_store.h, the contract of open()).
#include "tree/node_store.h"

#include <algorithm>
#include <map>

#include "tree/node_store_internal.h"
#include "tree/pack_format.h"

namespace magnetite::tree {

namespace {

std::string describe_position(std::uint64_t p) {
  return fmt::format("{:#x} (pack {}, offset {})", p, position_pack(p), position_offset(p));
}

}  // namespace

// The store's files found in its directory, by kind. Other names are not the
// store's and are left alone.
struct node_store::store_files {
  std::map<std::uint32_t, std::string> packs, indexes;
  bool temp_manifest = false;
};

// A pack open keeps, and the index entries of its durable part: contiguous
// from the pack's header on, `loaded` of them from its index file and the
// rest rebuilt from its record headers.
struct node_store::recovered_pack {
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

// The steps run in this order. Every check that can refuse the store comes
// before cut_past_position, the first step that changes a file: when open
// fails before it, nothing was modified.
status node_store::do_open(std::optional<std::uint64_t> committed) {
  MAGNETITE_TRY(env_.create_dir(dir_));
  auto lk = env_.lock(path_join(dir_, store_lock_file_name));
  if (!lk) return lk.error();
  lock_ = std::move(*lk);
  MAGNETITE_TRY(load_manifest());
  auto files = find_files();
  if (!files) return files.error();
  auto keep = kept_position(committed);
  if (!keep) return keep.error();
  std::vector<recovered_pack> live;
  if (*keep) MAGNETITE_TRY(check_packs(**keep, *files, live));
  const std::uint32_t last = *keep ? position_pack(**keep) : 0;
  MAGNETITE_TRY(cut_past_position(last, *files, live));
  MAGNETITE_TRY(rewrite_indexes(live, last));
  return adopt_recovered(live, *keep);
}

// The manifest: which packs are live since the last gc, and gc's position.
// Without one, every pack from 1 on is live and there is no floor.
status node_store::load_manifest() {
  auto manifest = read_store_manifest(env_, dir_);
  if (!manifest) return manifest.error();
  if (*manifest) {
    first_pack_ = (*manifest)->first_pack;
    gc_floor_ = (*manifest)->gc_position;
    dropped_ = (*manifest)->dropped;
  }
  return status::ok();
}

result<node_store::store_files> node_store::find_files() const {
  auto names = env_.list(dir_);
  if (!names) return names.error();
  store_files out;
  for (const auto& n : *names) {
    if (auto num = parse_numbered(n, ".pack"))
      out.packs[*num] = n;
    else if (auto inum = parse_numbered(n, ".idx"))
      out.indexes[*inum] = n;
    else if (n == manifest_temp_file_name)
      out.temp_manifest = true;
  }
  return out;
}

// What is kept: everything up to max(committed, gc floor); nullopt when
// neither exists (everything not kept by a gc is removed).
result<std::optional<std::uint64_t>> node_store::kept_position(std::optional<std::uint64_t> committed) {
  if (committed && (position_pack(*committed) == 0 || position_offset(*committed) < file_header_size))
    return status::invalid_argument(
        fmt::format("node store in {}: committed position {} was not made by a node "
                    "store",
                    dir_, describe_position(*committed)));
  std::optional<std::uint64_t> keep = committed;
  if (gc_floor_ && (!keep || *keep < *gc_floor_)) {
    keep = gc_floor_;
    report_.gc_floor_used = true;
  }
  report_.position = keep;
  return keep;
}

// ---- checks: nothing is modified until all of them passed --------------------

// Opens every live pack up to `keep` and finds the location of each record
// below the position, in memory only: a missing pack, a pack shorter than the
// position or damage in durable bytes is corruption naming the file.
status node_store::check_packs(std::uint64_t keep, const store_files& files, std::vector<recovered_pack>& live) {
  const std::uint32_t last = position_pack(keep);
  for (std::uint32_t num = first_pack_; num <= last; ++num) {
    if (dropped_.count(num)) continue;
    if (!files.packs.count(num))
      return status::corruption(
          fmt::format("node store in {}: pack file {} is missing but the durable position "
                      "{} needs it; nothing was modified",
                      dir_, pack_file_name(num), describe_position(keep)));
    recovered_pack lp;
    MAGNETITE_TRY(open_kept_pack(num, keep, lp));
    auto covered = load_index_prefix(lp, files.indexes.count(num) > 0);
    if (!covered) return covered.error();
    MAGNETITE_TRY(rebuild_index_tail(lp, *covered));
    live.push_back(std::move(lp));
  }
  return status::ok();
}

// Opens pack `number`, checks its header (which gives its salt) and that it
// holds every byte `keep` says is durable: all of it, or up to the offset in
// the last pack.
status node_store::open_kept_pack(std::uint32_t number, std::uint64_t keep, recovered_pack& lp) {
  lp.p = std::make_shared<pack>();
  lp.p->number = number;
  lp.p->path = pack_path(number);
  auto f = env_.open(lp.p->path, open_mode::open_existing);
  if (!f) return f.error();
  lp.p->f = std::move(*f);
  lp.p->f->advise_random();  // as create_pack does
  auto size = lp.p->f->size();
  if (!size) return size.error();
  lp.size = *size;
  std::string header(file_header_size, '\0');
  auto got = lp.p->f->read_at(0, header.size(), header.data());
  if (!got) return got.error();
  pack_bytes_read_ += *got;
  header.resize(*got);
  auto h = parse_file_header(header, pack_magic, "node store pack", lp.p->path, pack_format_version);
  if (!h) return h.error();
  if (h->a != number)
    return status::corruption(fmt::format("node store pack {}: header says pack {}", lp.p->path, h->a));
  lp.p->salt = h->b;
  lp.limit = number == position_pack(keep) ? position_offset(keep) : lp.size;
  if (lp.size < lp.limit)
    return status::corruption(
        fmt::format("node store pack {} is {} bytes but the durable position {} needs "
                    "{}; nothing was modified",
                    lp.p->path, lp.size, describe_position(keep), lp.limit));
  return status::ok();
}

// The index's valid prefix: a header for this very pack (same salt), then
// entries whose checksums hold, each starting where the previous record
// ended and ending within the durable part of the pack. Returns the offset
// the loaded entries reach (the pack header's end when none).
result<std::uint64_t> node_store::load_index_prefix(recovered_pack& lp, bool exists) {
  std::uint64_t covered = file_header_size;
  if (!exists) return covered;
  lp.index_exists = true;
  std::string index_path = path_join(dir_, pack_index_file_name(lp.p->number));
  auto bytes = read_whole_file(env_, index_path);
  if (!bytes) return bytes.error();
  lp.index_size = bytes->size();
  auto ih = parse_file_header(*bytes, index_magic, "node store index", index_path, format_version);
  // A newer version's index is refused, not rebuilt over (it is not damage).
  if (!ih && ih.error().code() == status_code::not_supported) return ih.error();
  if (!ih || ih->a != lp.p->number || ih->b != lp.p->salt) return covered;
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
  report_.index_entries_loaded += lp.loaded;
  return covered;
}

// The entries past the index's prefix are rebuilt from the record headers,
// from `from` to the durable end. Every byte below that end is durable, so a
// header that fails its checks here is damage, not a torn write.
status node_store::rebuild_index_tail(recovered_pack& lp, std::uint64_t from) {
  std::string window;
  std::uint64_t window_at = 0;
  for (std::uint64_t at = from; at < lp.limit;) {
    if (lp.limit - at < record_header_size)
      return status::corruption(
          fmt::format("node store pack {}, offset {}: {} bytes before the durable end {} "
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
      return status::corruption(
          fmt::format("node store pack {}, offset {}: {} (in durable data, found while "
                      "rebuilding the index); nothing was modified",
                      lp.p->path, at, why));
    lp.entries.push_back({rh.hash, at, static_cast<std::uint32_t>(rh.length())});
    report_.index_entries_rebuilt += 1;
    at += rh.length();
  }
  return status::ok();
}

// ---- repairs: cut what lies past the durable position ---------------------------

// Removes every pack and index file not live up to pack `last` (newer than the
// position, older than the manifest's first pack, or dropped), a leftover
// MANIFEST.tmp, and the bytes of the last pack past the position; then makes
// the removals durable, before anything new can be appended.
status node_store::cut_past_position(std::uint32_t last, const store_files& files,
                                     const std::vector<recovered_pack>& live) {
  bool removed = false;
  auto note = [&](std::string what) {
    if (!report_.cut_detail.empty()) report_.cut_detail += "; ";
    report_.cut_detail += what;
  };
  for (auto& [num, name] : files.packs) {
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
  for (auto& [num, name] : files.indexes) {
    if (num >= first_pack_ && num <= last && !dropped_.count(num)) continue;
    MAGNETITE_TRY(env_.remove(path_join(dir_, name)));
    removed = true;
  }
  if (files.temp_manifest) {
    MAGNETITE_TRY(env_.remove(path_join(dir_, manifest_temp_file_name)));
    removed = true;
  }
  if (!live.empty() && live.back().size > live.back().limit) {
    const recovered_pack& lp = live.back();
    MAGNETITE_TRY(lp.p->f->truncate(lp.limit));
    report_.bytes_cut += lp.size - lp.limit;
    note(fmt::format("cut {} bytes from {} at offset {}", lp.size - lp.limit, lp.p->path, lp.limit));
  }
  if (removed) MAGNETITE_TRY(env_.sync_dir(dir_));
  return status::ok();
}

// Index files: keep the valid prefix, append what was rebuilt, and fsync
// every index this changed. Two reasons: an index that lost bytes (cut to its
// prefix, or replaced) must not get them back in a crash once new records sit
// where the cut ones were (the entries would describe bytes no longer there
// and hide the new ones); and rebuilt entries, once durable, are never
// rebuilt again. This is the only place, besides gc, where an index is synced.
// The index of pack `last`, the one appended to next, stays open.
status node_store::rewrite_indexes(const std::vector<recovered_pack>& live, std::uint32_t last) {
  for (const auto& lp : live) {
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
      MAGNETITE_TRY(idx->append(encode_file_header(index_magic, {lp.p->number, lp.p->salt})));
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
  return status::ok();
}

// ---- state -------------------------------------------------------------------------

// The store takes the recovered packs as its own: the last one kept is the
// active pack, durable to `keep`. With nothing kept, a first pack is made, its
// header durable with the first flush.
status node_store::adopt_recovered(const std::vector<recovered_pack>& live, std::optional<std::uint64_t> keep) {
  for (const auto& lp : live) {
    lp.p->sealed_size = lp.limit;
    for (const auto& e : lp.entries)
      index_.insert(e.hash, node_location{.offset = e.offset, .pack = lp.p->number, .length = e.length});
    packs_[lp.p->number] = lp.p;
  }
  report_.packs = live.size();
  if (keep) {
    active_ = packs_.at(position_pack(*keep));
    // Every pack below the one writes continue in is sealed. No reader yet:
    // state_mu_ is not needed.
    for (auto& [number, p] : packs_)
      if (number != active_->number) p->map = map_sealed(*p);
    written_size_ = synced_size_ = position_offset(*keep);
    durable_position_ = *keep;
    has_durable_ = true;
  } else {
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

}  // namespace magnetite::tree
