// node_store: garbage collection, and the manifest switch that gc and
// reclamation share (node_store.h, the contract of gc()).
#include "tree/node_store.h"

#include <unordered_set>

#include "tree/node_store_internal.h"
#include "tree/pack_format.h"

namespace magnetite::tree {

// The packs gc writes. They follow the active one, so every position gc makes
// is above every position made before it. A pack is sealed (synced, with its
// complete index) before the next one is started.
class node_store::gc_output {
 public:
  explicit gc_output(node_store& s) : s_(s) {}

  // Appends a checked record, first sealing the last pack and starting the
  // next when it has reached the target size.
  status add(const hash128& h, const stored_record& rec);
  // Writes what is buffered and seals the last pack (starting one if there is
  // none: gc always leaves an active pack).
  status finish();
  // Removes the packs made, as far as possible: gc was abandoned.
  void abandon();

  struct output {
    std::shared_ptr<pack> p;
    std::uint64_t size = 0;
    std::vector<index_entry> entries;
  };
  std::vector<output> outputs;
  location_index index;

 private:
  status write_out();
  status start_pack();
  status seal(output& o);

  node_store& s_;
  std::string buf_;
};

status node_store::gc_output::add(const hash128& h, const stored_record& rec) {
  if (outputs.empty() || outputs.back().size >= s_.options_.target_pack_bytes) {
    if (!outputs.empty()) {
      MAGNETITE_TRY(write_out());
      MAGNETITE_TRY(seal(outputs.back()));
      outputs.back().p->index.reset();
    }
    MAGNETITE_TRY(start_pack());
  }
  output& o = outputs.back();
  auto len = static_cast<std::uint32_t>(record_header_size + rec.payload.size());
  encode_record(buf_, o.p->salt, h, rec.flags, rec.payload, static_cast<std::uint32_t>(rec.raw.size()));
  o.entries.push_back({h, o.size, len});
  index.insert(h, node_location{.offset = o.size, .pack = o.p->number, .length = len});
  o.size += len;
  if (buf_.size() >= io_chunk) MAGNETITE_TRY(write_out());
  return status::ok();
}

status node_store::gc_output::finish() {
  if (outputs.empty()) MAGNETITE_TRY(start_pack());
  MAGNETITE_TRY(write_out());
  return seal(outputs.back());
}

void node_store::gc_output::abandon() {
  for (auto& o : outputs) {
    std::uint32_t num = o.p->number;
    o.p.reset();
    (void)s_.env_.remove(s_.pack_path(num));
    (void)s_.env_.remove(path_join(s_.dir_, pack_index_file_name(num)));
  }
}

status node_store::gc_output::write_out() {
  if (buf_.empty()) return status::ok();
  if (status s = outputs.back().p->f->append(buf_); !s) return s_.fail(std::move(s));
  s_.pack_bytes_written_ += buf_.size();
  buf_.clear();
  return status::ok();
}

status node_store::gc_output::start_pack() {
  std::uint32_t num = outputs.empty() ? s_.active_->number + 1 : outputs.back().p->number + 1;
  auto p = s_.create_pack(num);
  if (!p) return s_.fail(p.error());
  outputs.push_back({*p, file_header_size, {}});
  return status::ok();
}

// Makes a finished output pack and its complete index durable.
status node_store::gc_output::seal(output& o) {
  if (status s = o.p->f->sync(); !s) return s_.fail(std::move(s));
  if (o.p->index) {
    std::string ib;
    ib.reserve(o.entries.size() * index_entry_size);
    for (const auto& e : o.entries) encode_index_entry(ib, o.p->salt, e.hash, e.offset, e.length);
    // An index that cannot be written costs a scan at open, nothing more.
    if (!o.p->index->append(ib).is_ok() || !o.p->index->sync().is_ok()) o.p->index.reset();
  }
  return status::ok();
}

// The record of a node reachable from a kept root, pending or stored, checked.
result<node_store::stored_record> node_store::load_for_gc(const hash128& h) {
  // The writer's own view: state changes only under write_mu_, which gc holds.
  if (auto it = pending_at_.find(h); it != pending_at_.end()) {
    const pending_record& r = pending_[it->second];
    auto raw = pending_encoding(r);
    if (!raw) return raw.error();
    return stored_record{std::move(*raw), r.flags, r.payload};
  }
  const node_location* loc = index_.find(h);
  if (!loc)
    return status::not_found(fmt::format("gc: tree node {} reachable from a kept root is not stored in {}", h, dir_));
  return read_record(h, *packs_.at(loc->pack), *loc);
}

result<gc_result> node_store::gc(std::span<const hash128> roots_to_keep) {
  std::lock_guard wl(write_mu_);
  MAGNETITE_TRY(check_usable());
  ++gc_runs_;
  cycle_.reset();  // gc does the whole job; a cycle's marks would be stale
  gc_output copies(*this);
  MAGNETITE_TRY(gc_copy_reachable(roots_to_keep, copies));
  MAGNETITE_TRY(copies.finish());

  // The switch: the new packs' names durable, then the manifest naming them.
  const std::uint32_t first = copies.outputs.front().p->number;
  const std::uint64_t position = make_position(copies.outputs.back().p->number, copies.outputs.back().size);
  if (status s = env_.sync_dir(dir_); !s) return fail(std::move(s));
  MAGNETITE_TRY(write_manifest(first, position, {}));
  auto old_packs = gc_adopt(copies, position);

  gc_result out;
  for (auto& o : copies.outputs) {
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

// Copies every node reachable from `roots` to `copies`, each once. A failed
// read (a reachable node missing or corrupt) abandons gc: the packs it made
// are removed as far as possible and the store goes on as before. A failed
// write or sync stops the store.
status node_store::gc_copy_reachable(std::span<const hash128> roots, gc_output& copies) {
  auto abandon = [&](status s) {
    copies.abandon();
    return s;
  };
  std::unordered_set<hash128, hash128_hasher> seen;
  std::vector<hash128> stack(roots.begin(), roots.end());
  while (!stack.empty()) {
    hash128 h = stack.back();
    stack.pop_back();
    if (!seen.insert(h).second) continue;
    auto rec = load_for_gc(h);
    if (!rec) return abandon(rec.error());
    if (rec->raw.empty() || rec->raw[0] != 0) {  // not a leaf: follow the children
      auto n = node::decode(rec->raw);
      if (!n)
        return abandon(status::corruption(
            fmt::format("gc: node {} matches its hash but does not decode: {}", h, n.error().message())));
      for (const auto& e : n->entries()) {
        auto c = child_ref::decode(e.value);
        if (!c) return abandon(status::corruption(fmt::format("gc: node {} has a bad child reference", h)));
        stack.push_back(c->hash);
      }
    }
    MAGNETITE_TRY(copies.add(h, *rec));
  }
  return status::ok();
}

// Switched (the manifest names the copies): the store takes them as its packs,
// the last one active and durable to `position`, and forgets every node it
// did not copy. Returns the old packs, garbage from here on.
std::map<std::uint32_t, std::shared_ptr<node_store::pack>> node_store::gc_adopt(gc_output& copies,
                                                                                std::uint64_t position) {
  std::map<std::uint32_t, std::shared_ptr<pack>> old_packs;
  // Writes go on in the last output: the others are sealed, mapped before
  // the readers' lock is taken (a system call each).
  std::vector<std::shared_ptr<const file_mapping>> maps;
  for (auto& o : copies.outputs) {
    o.p->sealed_size = o.size;
    maps.push_back(&o != &copies.outputs.back() ? map_sealed(*o.p) : nullptr);
  }
  {
    std::unique_lock sl(state_mu_);
    old_packs.swap(packs_);
    for (std::size_t i = 0; i < copies.outputs.size(); ++i) {
      packs_[copies.outputs[i].p->number] = copies.outputs[i].p;
      copies.outputs[i].p->map = std::move(maps[i]);
    }
    index_.swap(copies.index);
    pending_.clear();
    pending_at_.clear();
  }
  // Readers that looked a node up before the switch still hold its old pack
  // (open handles stay readable after the file is removed).
  cache_->clear();
  if (records_) records_->clear();
  epoch_.fetch_add(1, std::memory_order_release);  // nodes may have been dropped
  first_pack_ = copies.outputs.front().p->number;
  gc_floor_ = position;
  dropped_.clear();
  active_ = copies.outputs.back().p;
  written_size_ = synced_size_ = copies.outputs.back().size;
  dir_dirty_ = false;
  unsynced_entries_.clear();
  pending_bytes_ = 0;
  durable_position_ = position;
  has_durable_ = true;
  return old_packs;
}

// Writes the manifest under its temporary name, makes it durable, renames it
// over MANIFEST and makes the rename durable: the switch of gc and reclamation.
// Any failure stops the store: whether the rename reached the disk is unknown.
status node_store::write_manifest(std::uint32_t first, std::uint64_t position, const std::set<std::uint32_t>& dropped) {
  std::string temp = path_join(dir_, manifest_temp_file_name);
  auto f = env_.open(temp, open_mode::create_truncate);
  if (!f) return fail(f.error());
  if (status s = (*f)->append(encode_store_manifest(first, position, dropped)); !s) return fail(std::move(s));
  if (status s = (*f)->sync(); !s) return fail(std::move(s));
  if (status s = env_.rename(temp, path_join(dir_, manifest_file_name)); !s) return fail(std::move(s));
  if (status s = env_.sync_dir(dir_); !s) return fail(std::move(s));
  return status::ok();
}

}  // namespace magnetite::tree
