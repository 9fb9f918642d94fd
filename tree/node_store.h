// node_store: the durable node_sink of the prolly tree: tree nodes appended to
// pack files (docs/formats/node_store.md is the normative description).
//
// A store is one directory holding numbered pack files, one index file per pack
// and, once gc has run, a MANIFEST. A node is stored as one record: its
// encoding (node::encode()) behind a checksummed header that carries its hash
// (XXH3-128 of the encoding, the node's identity), compressed when that makes
// it smaller; or, for a leaf when the options say so, followed by the offsets
// of its entries, searchable where it lies (searchable_leaf.h).
//
// Positions. The durable extent of the store is a single u64,
//     position = (pack_number << 40) | offset,
// meaning: every live pack numbered below pack_number is durable in full, and
// pack pack_number is durable up to byte `offset`. Pack numbers only grow, so
// positions only grow. flush() and gc() return one; the owner stores it in its
// WAL commit marker (commit_record::node_store_length) together with the root
// that needs it, and hands the last one recorded back to open().
//
// Contract:
// - write(n) buffers the record (a cheap no-op if the hash is stored or
//   pending). Past `write_buffer_bytes` the buffer is handed to the kernel,
//   unsynced. A write that finds the active pack at its target size first
//   seals it: one fdatasync of that pack (once per target_pack_bytes of data,
//   never per node), then a new pack. So a pack is never appended to once a
//   newer one exists, and every pack but the active one is durable in full.
//   A flush seals a full pack only when that costs no fdatasync (nothing in
//   it unsynced); otherwise it appends to it, and a later write seals it.
// - flush() writes what is pending and does exactly ONE fdatasync, of the
//   active pack (none when nothing changed since the last one), plus one
//   directory fsync when that pack is new; then it returns the position that
//   covers every node written so far.
// - open(committed) keeps exactly the bytes up to max(committed, the manifest's
//   gc position) and cuts everything past it (the tail of that pack, every newer
//   pack), before anything new is appended; open_report says what was cut.
//   committed = nullopt means nothing was ever committed (everything not kept
//   by a gc is removed). The committed position must be one this store
//   returned, and never older than one recorded before. Checks come first: a
//   missing pack, a pack shorter than the position or damage found in durable
//   bytes is corruption naming the file and offset, and nothing is modified.
// - Each pack's location index is persisted in an index file, appended at each
//   flush WITHOUT an fsync, its entries checksummed under the pack's salt. open
//   loads each index's valid prefix and rebuilds only the entries past it, by
//   reading record headers from there to the durable end; an index it changed
//   is fsynced then (so a rebuild is not repeated, and entries for bytes it cut
//   can never come back). A clean reopen reads no pack byte but the headers.
// - read(h) returns the node whose encoding hashes to h; not_found if the store
//   does not hold h; or corruption naming the hash, the pack file and the
//   offset. Every record is checked (header and payload checksums, lengths
//   bounded before anything is allocated, hash of the decoded bytes): damaged
//   bytes are never returned.
// - Caching: two CLOCK caches (clock_cache.h) whose bytes together stay
//   within cache_bytes (give or take one record): decoded nodes, and the
//   payloads of leaf records kept as stored: searchable leaves, and leaves
//   that compress at least 4x (up to record_cache_share of the bound; the
//   node cache may use what they do not hold). A leaf read from its pack in
//   either form goes to the record cache only. leaf_get searches a
//   searchable leaf where it lies, never decoding it; a compressed one it
//   decompresses and searches, and decodes it into the node cache at the
//   second record-cache hit since the clock hand last passed it. A record is
//   cached only after its content was checked against its hash, so a
//   record-cache hit is not hashed again. Internal nodes are resident in the
//   node cache while they take at most half of it: a get past the cache
//   reads its leaf and nothing above it. gc() empties both caches (reads
//   of what it dropped are then not_found).
// - leaf_get reads a searchable leaf with entry sums from a mapping without
//   hashing it: the search checks each entry it reads against its sum.
// - gc(roots) copies every node reachable from `roots` into new packs numbered
//   after the active one, makes them and their index files durable, switches to
//   them atomically with a MANIFEST (written to MANIFEST.tmp, fsynced, renamed,
//   directory fsynced) and only then removes the old packs. The manifest names
//   the first live pack and records gc's position, which open() uses as a floor
//   for the committed position: a crash at any point keeps either every old
//   pack or the complete gc output, whatever the owner had recorded. The
//   owner's committed root MUST be among `roots`; gc returns the position to
//   record with it next (recording it is not required for safety).
// - Reclamation (begin_reclaim / reclaim_step) is gc done in bounded steps
//   between the owner's writes, copying only the live records of the packs
//   that are mostly garbage: begin seals the active pack, so every older pack
//   is a candidate; steps mark what the roots reach (reading internal nodes
//   only: a parent says which children are leaves), choose the candidates
//   with the least live data as victims until the space amplification would
//   be at most 1 + (max - 1) / 2, copy their live records to the active pack
//   and fdatasync each step's copies; the last step writes a manifest naming
//   the dropped packs (with its position as the floor, as gc does) and only
//   then removes them. While a cycle runs, write() marks every node it is
//   given (new or deduplicated) and its children: whatever a tree made during
//   the cycle refers to is kept, so the roots given at begin suffice as long
//   as every later root is built by write() from them. A crash anywhere keeps
//   the old packs or the copies, never neither.
// - Fail-stop: after a failed write, fdatasync, pack creation or manifest
//   switch, write/flush/gc return a `failed` error (the failing call's own error
//   is `ambiguous`). Reads keep working. Drop the store and reopen it.
//
// Thread safety: read(), contains(), locate() and stats() may be called from
// any number of threads, also while write/flush/gc run; write/flush/gc are
// serialised by an internal mutex (one owner normally drives them). A read
// racing with gc may still return a node gc dropped (it is the right node).
// Destroying the store loses what was not flushed; it does no I/O. The store
// holds one open file per live pack.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <shared_mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/env.h"
#include "magnetite/stats.h"
#include "tree/location_index.h"
#include "tree/node_source.h"

namespace magnetite::tree {

// ---- positions ---------------------------------------------------------------
inline constexpr int position_offset_bits = 40;
inline constexpr std::uint64_t max_pack_offset = (std::uint64_t{1} << position_offset_bits) - 1;
inline constexpr std::uint32_t max_pack_number = (std::uint32_t{1} << (64 - position_offset_bits)) - 1;

constexpr std::uint64_t make_position(std::uint32_t pack, std::uint64_t offset) noexcept {
  return (std::uint64_t{pack} << position_offset_bits) | (offset & max_pack_offset);
}
constexpr std::uint32_t position_pack(std::uint64_t position) noexcept {
  return static_cast<std::uint32_t>(position >> position_offset_bits);
}
constexpr std::uint64_t position_offset(std::uint64_t position) noexcept { return position & max_pack_offset; }

// ---- file names ------------------------------------------------------------
// Packs are "<8 decimal digits>.pack", their indexes "<same>.idx".
std::string pack_file_name(std::uint32_t number);
std::string pack_index_file_name(std::uint32_t number);
inline constexpr std::string_view manifest_file_name = "MANIFEST";
inline constexpr std::string_view manifest_temp_file_name = "MANIFEST.tmp";
inline constexpr std::string_view store_lock_file_name = "LOCK";

// The largest node encoding a store accepts: a maximal value and key in one
// leaf with room to spare; also the bound every length read from disk must meet.
inline constexpr std::size_t max_node_bytes = 64u << 20;

enum class node_codec : std::uint8_t { none, lz4, zstd };

struct node_store_options {
  // A new pack is started by the first flush after the active pack reached this
  // size (a soft bound: one flush's records always go to one pack).
  std::uint64_t target_pack_bytes = 64u << 20;
  // Bound on the (estimated) heap bytes of both caches: the decoded nodes, and
  // the stored records of leaves that compress well.
  std::size_t cache_bytes = 64u << 20;
  // The most of cache_bytes the record cache may hold (0: none). Whatever it
  // does not hold, the node cache may use.
  double record_cache_share = 0.5;
  // Pending records are handed to the kernel (unsynced) past this many bytes.
  std::size_t write_buffer_bytes = 4u << 20;
  // How new records are compressed (a record is stored raw when that does
  // not make it smaller). Reads take every codec, whatever this says: each
  // record names its own. LZ4 by default: a checkpoint rewrites every leaf
  // its edits touch, and decompressing and compressing them again with zstd
  // was half of a checkpoint's work (docs/benchmarks.md); zstd stores this
  // project's benchmark data in about 4/5 of the bytes.
  node_codec codec = node_codec::lz4;
  int compression_level = 1;  // zstd's level, 1..19 (zstd only)
  // Leaves are stored searchable (tree/searchable_leaf.h): their encoding
  // uncompressed with the offset of each entry, so that a get reads one
  // record and decodes only the entry it returns. Off (the default): leaves
  // are compressed by `codec` like every other node. Reads take both forms,
  // whatever this says.
  bool searchable_leaves = false;
  // Packs no longer written to (sealed) are read through a read-only
  // mapping rather than pread: no system call and no copy per read, and a
  // searchable leaf is searched in the page cache where it lies (and not
  // copied into the record cache). Every read is still checked as a pread
  // one is. A pack that cannot be mapped is read with pread. Safe because a
  // sealed pack never shrinks while this store is open: open() cuts only
  // bytes past the committed position, before anything is mapped, and a
  // store opened after this one retired cuts only bytes no view of this one
  // reads (views are of committed roots).
  bool map_packs = false;

  // invalid_argument naming the bad option.
  status validate() const;
};

// What open() found and did.
struct open_report {
  std::optional<std::uint64_t> position;   // the durable position kept (nullopt: empty store)
  bool gc_floor_used = false;              // the manifest's gc position was above `committed`
  std::uint64_t bytes_cut = 0;             // pack bytes past the position, truncated or removed
  std::uint64_t packs_removed = 0;         // newer than the position, or older than the manifest's first pack
  std::string cut_detail;                  // what was cut or removed, where; empty if nothing
  std::uint64_t packs = 0;                 // live packs
  std::uint64_t index_entries_loaded = 0;  // from index files
  std::uint64_t index_entries_rebuilt = 0;
  std::uint64_t bytes_scanned = 0;  // pack bytes read to rebuild index entries
};

using magnetite::gc_result;  // <magnetite/stats.h>

// The state of incremental reclamation, for `stats`.
struct reclaim_stats {
  std::uint64_t cycles = 0;           // completed since open
  std::uint64_t bytes_reclaimed = 0;  // pack bytes removed less bytes copied, since open
  std::uint64_t bytes_copied = 0;     // live records moved out of dropped packs, since open
  std::uint64_t packs_dropped = 0;
  // Bytes of the live records (and pack headers) the last completed mark found,
  // plus the bytes of packs written since it began: live data as of then.
  // nullopt before the first cycle ends.
  std::optional<std::uint64_t> live_bytes;
};

struct node_store_stats {
  std::uint64_t cache_hits = 0;
  std::uint64_t cache_misses = 0;
  std::uint64_t cache_bytes = 0;        // charged now: nodes and the cache's slot tables
  std::uint64_t cache_table_bytes = 0;  // of which slot tables
  // Of cache_bytes, internal nodes: kept resident (clock_cache.h) while
  // they take at most half the cache, so that a get past the cache reads
  // its leaf and nothing above it.
  std::uint64_t cache_resident_bytes = 0;
  std::uint64_t cache_entries = 0;
  // The record cache: asked on a node cache miss.
  std::uint64_t record_cache_hits = 0;
  std::uint64_t record_cache_misses = 0;
  std::uint64_t record_cache_bytes = 0;  // records and slot table
  std::uint64_t record_cache_entries = 0;
  std::uint64_t nodes_written = 0;  // new records (deduplicated writes excluded)
  std::uint64_t writes_deduplicated = 0;
  std::uint64_t pack_bytes_written = 0;
  std::uint64_t pack_bytes_read = 0;  // reads, gc and open scans, pack headers included
  // Records read from the pack files (by pread, or from a mapping), and the
  // lookups of a key in a leaf (a get that reached the tree): their ratio is
  // the reads a get costs.
  std::uint64_t record_reads = 0;
  std::uint64_t mapped_reads = 0;  // of record_reads, through a mapping
  std::uint64_t leaf_lookups = 0;
  std::uint64_t flushes = 0;
  std::uint64_t pack_syncs = 0;  // pack fdatasyncs (flushes, and sealing a full pack)
  std::uint64_t gc_runs = 0;
};

// What check() read: the nodes reachable from the roots it was given.
struct node_check {
  std::uint64_t nodes = 0;            // distinct nodes read back from their packs and checked
  std::uint64_t bytes = 0;            // their records, headers included
  std::vector<std::string> problems;  // each names the node and, when stored, its pack and offset
};

class node_store final : public node_sink {
 public:
  static result<std::unique_ptr<node_store>> open(env& e, std::string dir, node_store_options options,
                                                  std::optional<std::uint64_t> committed_position);
  ~node_store() override;
  node_store(const node_store&) = delete;
  node_store& operator=(const node_store&) = delete;

  result<node_ptr> read(const hash128& h) override;
  // read(), but a node read from a pack (or the record cache) goes to no
  // cache: what a rewrite of the tree reads (rewrite_reads), and the walks
  // of whole trees, old ones too (reclamation, reachable_bytes).
  result<node_ptr> read_passing(const hash128& h);
  result<bool> leaf_get(const hash128& leaf, std::string_view key, std::string& value) override;
  result<hash128> write(const node& n) override;
  // Changes with every gc (nodes may have been dropped).
  std::uint64_t epoch() const noexcept override { return epoch_.load(std::memory_order_acquire); }

  // Writes what is pending, one fdatasync; the position covering every write.
  result<std::uint64_t> flush();
  // Keeps the nodes reachable from `roots_to_keep` (pending ones included) and
  // drops every other node. A missing or corrupt reachable node fails gc before
  // anything is switched (and the store stays usable).
  result<gc_result> gc(std::span<const hash128> roots_to_keep);

  // ---- incremental reclamation (see the contract above) ----
  // Due when the packs hold at least `min_bytes` and more than
  // `max_amplification` times the live bytes of the last cycle scaled by
  // `live_scale` (the owner's estimate of how the live data changed since:
  // deletes shrink it without growing the packs); before the first cycle:
  // always, past min_bytes. Cheap: no I/O.
  bool reclaim_due(double max_amplification, std::uint64_t min_bytes, double live_scale = 1.0) const;
  // Starts a cycle that keeps what `roots` reach: seals the active pack (one
  // fdatasync, only if it holds records). A cycle already running is replaced.
  // The candidates are the packs older than the active one, and older than
  // `below` when given: a writer that began a tree before the cycle (whose
  // nodes written so far no root reaches yet, and the write barrier did not
  // see) passes the active_pack() of when it began, so none of its nodes can
  // be a victim.
  status begin_reclaim(std::span<const hash128> roots, double max_amplification,
                       std::optional<std::uint32_t> below = std::nullopt);
  // The pack new records go to now.
  std::uint32_t active_pack() const;
  // The reuse journal, for a writer whose tree no root reaches until it is
  // done (a background checkpoint): while on, write() notes every node it is
  // given that is stored already, and begin_reclaim keeps what those notes
  // reach as if they were roots. Such a node may lie in an old pack, reached
  // by no root the cycle keeps, and a cycle begun after the write (its
  // barrier sees only later writes) would drop it; the writer's new nodes
  // are kept by begin_reclaim's `below`. Off clears the notes (the writer's
  // root is then a root of its owner).
  void journal_reuse(bool on);
  // Does about `budget` bytes of marking or copying; true when the cycle has
  // ended (the victims removed, or nothing worth removing). A missing or
  // damaged reachable node ends the cycle with that error and changes
  // nothing; a failed write or sync stops the store (fail-stop).
  result<bool> reclaim_step(std::size_t budget);
  bool reclaiming() const noexcept { return cycle_ != nullptr; }
  reclaim_stats reclamation() const;
  // The bytes of the records `roots` reach (pack headers aside), measured now
  // by a walk that reads internal nodes only. Nodes still pending count 0.
  result<std::uint64_t> reachable_bytes(std::span<const hash128> roots);

  // Reads every node reachable from `roots` from its pack, bypassing the cache,
  // and checks its record (header and payload checksums, hash, decoding) and
  // its child references; a pending node is checked in memory. Damage is
  // reported, not returned: the walk goes on past a bad node (not into its
  // children) and stops after `max_problems` problems. Changes nothing.
  node_check check(std::span<const hash128> roots, std::size_t max_problems = 100);
  // Bytes of the live pack files (what the store takes on disk, index files aside).
  result<std::uint64_t> pack_bytes() const;
  // Stored or pending.
  bool contains(const hash128& h) const;
  // Where a stored node's record is; nullopt if pending only or absent.
  std::optional<node_location> locate(const hash128& h) const;
  // The position of the last successful flush/gc (or kept by open); nullopt
  // before the first flush of an empty store.
  std::optional<std::uint64_t> durable_position() const;
  const open_report& recovery() const noexcept { return report_; }
  node_store_stats stats() const;
  // A node's record as stored, to put into another store without decoding
  // or compressing it again (backup, restore): copy_out() reads it (from the
  // write buffer or a pack, checked as read() checks it: `raw` is the
  // encoding and hashes to `hash`); copy_in() stores it as write() would
  // have, deduplicated, after checking that `raw` hashes to `hash` (the
  // payload is trusted to be `raw` as stored with `flags`).
  struct record_copy {
    hash128 hash;
    std::uint8_t flags = 0;
    std::uint32_t raw_length = 0;
    std::string payload;
    std::string raw;
  };
  result<record_copy> copy_out(const hash128& h);
  status copy_in(const record_copy& r);

  // ok, or the error that stopped the store.
  status failure() const;
  // Ends this store as a writer and releases its directory's LOCK, so that a
  // new store may open the directory while readers still hold this one (the
  // views a crashed shard published). Afterwards every write, flush, gc and
  // reclamation step fails; reads go on from the pack files this store has
  // open, even once the new store has removed them, and never return bytes
  // that do not hash to what was asked (a pack the new store cut and wrote
  // again reads as corruption). Its pending writes are dropped: nothing
  // committed is pending.
  void retire();
  const std::string& dir() const noexcept { return dir_; }
  std::string pack_path(std::uint32_t number) const;

  struct pack;           // an open pack file
  class node_cache;      // decoded nodes (clock_cache.h)
  class record_cache;    // stored records of leaves (clock_cache.h)
  struct reclaim_cycle;  // the marks and victims of the cycle running

 private:
  // A node written and not yet handed to the kernel: only its stored bytes,
  // so the write buffer holds what it counts (a read of it decodes them).
  struct pending_record {
    hash128 hash;
    std::uint8_t flags = 0;
    std::uint32_t raw_length = 0;
    std::string payload;  // stored bytes (compressed or not)
  };
  struct index_entry {
    hash128 hash;
    std::uint64_t offset;
    std::uint32_t length;
  };
  // A record as read: `raw` (the node's encoding, verified against its hash)
  // and `payload` view `record` or `decompressed`.
  struct record_buffers {
    std::string record;        // header and payload, as read
    std::string decompressed;  // the payload decompressed, when it was compressed
    std::string_view raw;
    std::string_view payload;
    std::uint8_t flags = 0;
    std::uint32_t raw_length = 0;
    std::shared_ptr<pack> from;  // the pack it was read from (null: the record cache), for errors
    std::uint64_t offset = 0;
    // When the record was read through the pack's mapping, the mapping:
    // `payload` and `raw` point into it while it is held.
    std::shared_ptr<const file_mapping> mapped;
    // Whether `raw` was checked against the node's hash. Only a searchable
    // leaf with entry sums read where it lies for a search is not (its
    // search checks the entries it reads); decoding checks it first.
    bool hash_checked = false;
  };
  // How much of a record a read checks before it is used: everything (the
  // header, the payload checksum, the hash of the content), or, for a
  // searchable leaf with entry sums read where it lies, all but the hash,
  // for a caller that only searches it (searchable_leaf::search checks each
  // entry it reads against its sum).
  enum class check_depth { whole, for_search };
  enum class fetched { from_pending, from_record_cache, from_record_cache_again, from_pack };
  struct stored_record {
    std::string raw;  // the node's encoding, verified against its hash
    std::uint8_t flags;
    std::string payload;  // as stored
  };

  node_store(env& e, std::string dir, node_store_options options);

  status do_open(std::optional<std::uint64_t> committed);
  // open's steps (node_store_open.cc), in the order do_open takes them.
  struct store_files;     // the store's files found in dir_
  struct recovered_pack;  // a pack open keeps, with its index entries
  status load_manifest();
  result<store_files> find_files() const;
  result<std::optional<std::uint64_t>> kept_position(std::optional<std::uint64_t> committed);
  status check_packs(std::uint64_t keep, const store_files& files, std::vector<recovered_pack>& live);
  status open_kept_pack(std::uint32_t number, std::uint64_t keep, recovered_pack& lp);
  result<std::uint64_t> load_index_prefix(recovered_pack& lp, bool exists);
  status rebuild_index_tail(recovered_pack& lp, std::uint64_t from);
  status cut_past_position(std::uint32_t last, const store_files& files, const std::vector<recovered_pack>& live);
  status rewrite_indexes(const std::vector<recovered_pack>& live, std::uint32_t last);
  status adopt_recovered(const std::vector<recovered_pack>& live, std::optional<std::uint64_t> keep);

  status check_usable() const;
  status fail(status s);
  result<std::shared_ptr<pack>> create_pack(std::uint32_t number);
  result<node_ptr> read_uncached(const hash128& h);
  status spill(bool flushing);
  status sync_active();
  status read_record_into(const hash128& h, pack& p, const node_location& loc, record_buffers& b,
                          std::shared_ptr<const file_mapping> map = nullptr, check_depth depth = check_depth::whole);
  // A sealed pack's mapping when options_.map_packs (null otherwise, or
  // when the env cannot map it); the caller stores it in p.map under
  // state_mu_.
  std::shared_ptr<const file_mapping> map_sealed(pack& p);
  result<stored_record> read_record(const hash128& h, pack& p, const node_location& loc);
  // Sets b.raw from b.payload, b.flags and b.raw_length (decompressing into
  // b.decompressed); what is wrong, or empty.
  static std::string expand(record_buffers& b);
  // How this store stores the node whose encoding is `bytes` (write_mu_
  // held: compressed_ is the writer's): rec's flags and payload.
  void store_form(const node& n, std::string_view bytes, pending_record& rec);
  // Offers a leaf's record, just read and verified, to the record cache; true
  // if it was kept.
  bool keep_record(const hash128& h, const record_buffers& b);
  result<fetched> fetch(const hash128& h, record_buffers& b, check_depth depth = check_depth::whole);
  static result<std::string> pending_encoding(const pending_record& r);
  result<node_ptr> decode_and_keep(const hash128& h, const record_buffers& b, bool keep = true);
  static record_buffers& thread_buffers();
  // This thread's buffers for one read; ending the lease lets go of what
  // the read held (its pack, its mapping: see mapped_in_flight_).
  struct buffers_lease {
    explicit buffers_lease(node_store& s) : store(s) {}
    node_store& store;
    record_buffers& b = thread_buffers();
    ~buffers_lease();
  };
  std::size_t record_cache_capacity() const noexcept {
    return static_cast<std::size_t>(static_cast<double>(options_.cache_bytes) * options_.record_cache_share);
  }
  // What is wrong with the MANIFEST on disk, compared with what open read.
  std::optional<std::string> check_manifest();
  // gc's parts (node_store_gc.cc).
  class gc_output;  // the packs gc writes
  result<stored_record> load_for_gc(const hash128& h);
  // Queues a new record (write_mu_ held, not yet stored or pending).
  status add_pending(pending_record rec);
  status gc_copy_reachable(std::span<const hash128> roots, gc_output& copies);
  std::map<std::uint32_t, std::shared_ptr<pack>> gc_adopt(gc_output& copies, std::uint64_t position);
  void write_index_entries();
  // Makes the active pack durable to its end and starts the next one.
  status seal_active();
  // Appends records to the active pack unsynced and points the index at them
  // (a relocated record replaces its old location).
  status append_records(std::span<const pending_record> records);
  // Writes MANIFEST (via MANIFEST.tmp, synced, renamed, directory synced).
  status write_manifest(std::uint32_t first, std::uint64_t position, const std::set<std::uint32_t>& dropped);
  // The write barrier: marks n (stored as h) and its children while a cycle runs.
  void reclaim_note_write(const node& n, const hash128& h);
  // Marks what the cycle's stack holds, within `budget` (bytes); false: budget spent.
  result<bool> reclaim_mark(std::size_t& budget);
  void reclaim_choose_victims();
  result<bool> reclaim_copy(std::size_t& budget);
  status reclaim_finish();

  env& env_;
  std::string dir_;
  node_store_options options_;
  std::unique_ptr<file_lock> lock_;
  std::unique_ptr<node_cache> cache_;
  std::unique_ptr<record_cache> records_;  // null when record_cache_share is 0
  std::mutex lend_mu_;                     // serialises changes of lent_ and the node cache's capacity
  std::atomic<std::uint64_t> lent_{0};     // of cache_bytes, kept from the node cache for records_
  open_report report_;

  // Serialises write/flush/gc. Held for the whole of each.
  std::mutex write_mu_;
  // Guards what readers look at: packs_, index_, pending_, pending_at_.
  // Changed only with write_mu_ also held, so the writer may read without it.
  mutable std::shared_mutex state_mu_;
  std::map<std::uint32_t, std::shared_ptr<pack>> packs_;
  location_index index_;
  std::vector<pending_record> pending_;
  std::unordered_map<hash128, std::size_t, hash128_hasher> pending_at_;

  // Writer state (write_mu_).
  std::uint32_t first_pack_ = 1;           // manifest's first live pack
  std::optional<std::uint64_t> gc_floor_;  // manifest's gc position
  std::set<std::uint32_t> dropped_;        // manifest's dropped packs (above first_pack_)
  std::unique_ptr<reclaim_cycle> cycle_;
  // The reuse journal (journal_reuse): on, and the stored nodes write() was
  // given again since it was turned on.
  bool journaling_ = false;
  std::vector<hash128> reused_;
  mutable std::mutex reclaim_mu_;  // guards reclaim_ (stats() may be called from any thread)
  reclaim_stats reclaim_;
  std::shared_ptr<pack> active_;
  std::uint64_t written_size_ = 0;             // bytes of active_ handed to the kernel
  std::uint64_t synced_size_ = 0;              // bytes of active_ made durable
  bool dir_dirty_ = false;                     // active_'s name not yet durable
  std::vector<index_entry> unsynced_entries_;  // records of active_ past synced_size_
  std::size_t pending_bytes_ = 0;
  void* cctx_ = nullptr;    // ZSTD_CCtx
  std::string compressed_;  // write()'s output buffer: it keeps its size, never filled
  std::atomic<bool> has_durable_{false};
  std::atomic<std::uint64_t> epoch_{0};
  std::atomic<std::uint64_t> durable_position_{0};

  mutable std::mutex failure_mu_;
  status failure_;

  std::atomic<std::uint64_t> record_reads_{0}, mapped_reads_{0}, leaf_lookups_{0};
  // Reads using a pack's mapping now (from the mapping taken to the end of
  // their lease). retire() drops every mapping and waits for these to end:
  // a store opened after it may truncate a pack this one mapped, and a byte
  // of a mapping past its file's end cannot be read (SIGBUS).
  std::atomic<std::uint64_t> mapped_in_flight_{0};
  bool retired_ = false;  // state_mu_: no mapping is made once set
  std::atomic<std::uint64_t> nodes_written_{0}, writes_deduplicated_{0}, pack_bytes_written_{0}, pack_bytes_read_{0},
      flushes_{0}, pack_syncs_{0}, gc_runs_{0};
};

// The node store as a rewrite of its tree reads it (a checkpoint's batch
// update): what it reads is not kept in the caches (a hit there is used).
// A checkpoint reads each node its edits touch once and writes its
// successor, so caching it would only push out what readers use, and during
// a bulk load (every leaf touched by every checkpoint, and every internal
// node of every version in turn) it would fill the whole cache, the
// process's memory with it, for nothing: RocksDB's flushes and compactions
// read past its block cache for the same reason. The tree's own table of
// upper nodes (a thread's, prolly_tree.cc) still spares a rewrite reading
// them again. Writes go to the store as they are.
class rewrite_reads final : public node_sink {
 public:
  explicit rewrite_reads(node_store& store) : store_(store) {}
  result<node_ptr> read(const hash128& h) override { return store_.read_passing(h); }
  result<hash128> write(const node& n) override { return store_.write(n); }
  std::uint64_t epoch() const noexcept override { return store_.epoch(); }

 private:
  node_store& store_;
};

}  // namespace magnetite::tree
