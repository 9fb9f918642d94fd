// Tests of the pack-file node store (tree/node_store.h).
//
// Most run on fault_env, which can fail, flip, tear and crash; one runs on the
// real POSIX env in a temporary directory. Crash tests reopen the store with the
// position an owner would have recorded in its WAL (the last one "committed")
// and check every node the committed roots reach against a std::map model.
#include <doctest/doctest.h>

#include <atomic>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <thread>

#include "core/coding.h"
#include "core/fault_env.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tree_model.h"
#include "tree/clock_cache.h"
#include "tree/node_store.h"
#include "tree/pack_format.h"
#include "tree/prolly_tree.h"

using namespace magnetite;
using namespace magnetite::tree;

namespace {

using model = std::map<std::string, std::string>;

constexpr const char* store_dir = "/db/nodes";
using testing::small_nodes;

using testing::must;
void must_ok(const status& s) { REQUIRE_MESSAGE(s.is_ok(), s.to_string()); }

node_store_options small_options() {
  node_store_options o;
  o.target_pack_bytes = 16 << 10;
  o.cache_bytes = 256 << 10;
  o.write_buffer_bytes = 8 << 10;
  return o;
}

std::unique_ptr<node_store> must_open(env& e, const node_store_options& o, std::optional<std::uint64_t> committed,
                                      const std::string& dir = store_dir) {
  auto s = node_store::open(e, dir, o, committed);
  REQUIRE_MESSAGE(s.is_ok(), s.error().to_string());
  return std::move(*s);
}

using testing::entries_of;

// Replaces a file's bytes, durably (a test that rewrites a pack as another
// build wrote it).
void rewrite_file(fault_env& fe, const std::string& path, const std::string& bytes) {
  auto f = must(fe.open(path, open_mode::create_truncate));
  must_ok(f->append(bytes));
  must_ok(f->sync());
}

// The tree of m built in a fresh store and flushed: its root and the position
// an owner would commit. The store is closed again (reopen it to read cold).
struct committed_tree {
  hash128 root;
  std::uint64_t position = 0;
};
committed_tree commit_tree(env& e, const node_store_options& o, const std::map<std::string, std::string>& m) {
  auto s = must_open(e, o, std::nullopt);
  committed_tree out;
  out.root = testing::must(prolly_tree(*s, testing::small_nodes).build(entries_of(m)));
  out.position = testing::must(s->flush());
  return out;
}

std::string key_of(std::uint64_t i) { return fmt::format("key{:08}", i); }
std::string value_of(std::mt19937_64& rng) {
  std::string v(rng() % 48, '\0');
  for (auto& c : v) c = static_cast<char>('a' + rng() % 26);
  return v;
}

// Applies a random batch of puts and deletes to the tree and the model.
hash128 random_batch(prolly_tree& t, hash128 root, model& m, std::mt19937_64& rng, int space, int size) {
  return testing::random_batch(t, root, m, rng, space, size, key_of, value_of);
}

model random_model(std::mt19937_64& rng, int n, int space) {
  model m;
  while (static_cast<int>(m.size()) < n) m[key_of(rng() % space)] = value_of(rng);
  return m;
}

// Every node hash a root reaches.
std::set<hash128> reachable(node_source& src, const hash128& root) {
  std::set<hash128> out;
  std::vector<hash128> todo{root};
  while (!todo.empty()) {
    hash128 h = todo.back();
    todo.pop_back();
    if (!out.insert(h).second) continue;
    auto n = src.read(h);
    REQUIRE_MESSAGE(n.is_ok(), n.error().to_string());
    if ((*n)->is_leaf()) continue;
    for (const auto& e : (*n)->entries()) todo.push_back(must(child_ref::decode(e.value)).hash);
  }
  return out;
}

// The tree at `root` holds exactly `m`.
void check_tree(node_sink& store, const hash128& root, const model& m, const chunk_policy& policy = small_nodes) {
  prolly_tree t(store, policy);
  CHECK(must(t.count(root)) == m.size());
  std::size_t wrong = 0;
  for (const auto& [k, v] : m) {
    auto got = t.get(root, k);
    if (!got.is_ok() || !*got || **got != v) {
      if (++wrong <= 3) FAIL_CHECK("key " << k << ": " << (got.is_ok() ? "wrong value" : got.error().to_string()));
    }
  }
  CHECK(wrong == 0);
}

node leaf_of(std::vector<entry> es) { return node(0, es); }

bool file_exists(env& e, const std::string& path) { return must(e.exists(path)); }

// An env that forwards to another until its k-th mutating operation (open,
// append, write, sync, truncate, rename, remove, directory sync) has been
// performed; from then on every operation, reads included, fails, as if the
// process had died right after that operation. The test then crashes the
// underlying fault_env to decide what the disk kept.
class dying_env final : public env {
 public:
  explicit dying_env(env& base) : base_(base) {}

  void arm(std::uint64_t k) {
    left_ = k;
    armed_ = true;
  }
  bool dead() const { return dead_; }
  std::uint64_t ops() const { return ops_; }

  status step() {
    if (dead_) return status::io_error("simulated crash: the process is dead");
    ++ops_;
    if (armed_ && --left_ == 0) dead_ = true;  // this one happens, nothing after it
    return status::ok();
  }
  status alive() const {
    if (dead_) return status::io_error("simulated crash: the process is dead");
    return status::ok();
  }

  class dying_file final : public file {
   public:
    dying_file(dying_env& e, std::unique_ptr<file> f) : e_(e), f_(std::move(f)) {}
    status append(std::string_view data) override {
      MAGNETITE_TRY(e_.step());
      return f_->append(data);
    }
    status write_at(std::uint64_t offset, std::string_view data) override {
      MAGNETITE_TRY(e_.step());
      return f_->write_at(offset, data);
    }
    result<std::size_t> read_at(std::uint64_t offset, std::size_t n, char* scratch) override {
      MAGNETITE_TRY(e_.alive());
      return f_->read_at(offset, n, scratch);
    }
    status sync() override {
      MAGNETITE_TRY(e_.step());
      return f_->sync();
    }
    status truncate(std::uint64_t size) override {
      MAGNETITE_TRY(e_.step());
      return f_->truncate(size);
    }
    status preallocate(std::uint64_t size) override {
      MAGNETITE_TRY(e_.step());
      return f_->preallocate(size);
    }
    result<std::uint64_t> size() override {
      MAGNETITE_TRY(e_.alive());
      return f_->size();
    }

   private:
    dying_env& e_;
    std::unique_ptr<file> f_;
  };

  result<std::unique_ptr<file>> open(const std::string& path, open_mode mode) override {
    MAGNETITE_TRY(mode == open_mode::open_existing ? alive() : step());
    auto f = base_.open(path, mode);
    if (!f) return f.error();
    return std::unique_ptr<file>(new dying_file(*this, std::move(*f)));
  }
  status create_dir(const std::string& path) override {
    MAGNETITE_TRY(alive());
    return base_.create_dir(path);
  }
  status sync_dir(const std::string& path) override {
    MAGNETITE_TRY(step());
    return base_.sync_dir(path);
  }
  status rename(const std::string& from, const std::string& to) override {
    MAGNETITE_TRY(step());
    return base_.rename(from, to);
  }
  status remove(const std::string& path) override {
    MAGNETITE_TRY(step());
    return base_.remove(path);
  }
  result<std::vector<std::string>> list(const std::string& dir) override {
    MAGNETITE_TRY(alive());
    return base_.list(dir);
  }
  result<bool> exists(const std::string& path) override {
    MAGNETITE_TRY(alive());
    return base_.exists(path);
  }
  result<bool> is_directory(const std::string& path) override {
    MAGNETITE_TRY(alive());
    return base_.is_directory(path);
  }
  result<std::unique_ptr<file_lock>> lock(const std::string& path) override {
    MAGNETITE_TRY(alive());
    return base_.lock(path);
  }

 private:
  env& base_;
  std::atomic<bool> dead_{false};
  std::atomic<bool> armed_{false};
  std::atomic<std::uint64_t> left_{0};
  std::atomic<std::uint64_t> ops_{0};
};

const fault_env::unsynced crash_modes[] = {fault_env::unsynced::lose, fault_env::unsynced::keep,
                                           fault_env::unsynced::random, fault_env::unsynced::reorder};

}  // namespace

TEST_CASE("node_store: bad options are invalid_argument and create nothing") {
  fault_env fe;
  auto bad = [&](node_store_options o, std::string_view what) {
    auto s = node_store::open(fe, store_dir, o, std::nullopt);
    REQUIRE_FALSE(s.is_ok());
    CHECK(s.error().code() == status_code::invalid_argument);
    CHECK(s.error().message().find(what) != std::string::npos);
  };
  node_store_options o;
  o.cache_bytes = 0;
  bad(o, "cache_bytes");
  o = {};
  o.target_pack_bytes = 100;
  bad(o, "target_pack_bytes");
  o = {};
  o.write_buffer_bytes = 0;
  bad(o, "write_buffer_bytes");
  o = {};
  o.codec = node_codec::zstd;
  o.compression_level = 0;
  bad(o, "compression_level");
  o.compression_level = 42;
  bad(o, "compression_level");
  for (double share : {-0.1, 0.95, std::numeric_limits<double>::quiet_NaN()}) {
    o = {};
    o.record_cache_share = share;
    bad(o, "record_cache_share");
  }
  CHECK_FALSE(file_exists(fe, store_dir));
  o = {};
  o.codec = node_codec::lz4;
  o.compression_level = 0;  // zstd's alone
  CHECK(node_store::open(fe, store_dir, o, std::nullopt).is_ok());
}

TEST_CASE("node_store: a committed position not made by a store is invalid_argument") {
  fault_env fe;
  auto s = node_store::open(fe, store_dir, {}, make_position(1, 3));
  REQUIRE_FALSE(s.is_ok());
  CHECK(s.error().code() == status_code::invalid_argument);
  s = node_store::open(fe, store_dir, {}, std::uint64_t{12});  // pack 0
  REQUIRE_FALSE(s.is_ok());
  CHECK(s.error().code() == status_code::invalid_argument);
}

TEST_CASE("node_store: position encoding is (pack << 40) | offset") {
  constexpr std::uint64_t p = make_position(7, 123456);
  static_assert(p == (std::uint64_t{7} << 40 | 123456));
  static_assert(position_pack(p) == 7 && position_offset(p) == 123456);
  static_assert(make_position(2, 0) > make_position(1, max_pack_offset));
  CHECK(pack_file_name(7) == "00000007.pack");
  CHECK(pack_index_file_name(7) == "00000007.idx");
}

TEST_CASE("node_store: round trip of a 50 000-entry prolly tree, reopened, agrees with a std::map") {
  fault_env fe;
  std::mt19937_64 rng(42);
  node_store_options o;
  o.target_pack_bytes = 256 << 10;  // several packs, sealed as the writes spill
  o.write_buffer_bytes = 64 << 10;
  model m = random_model(rng, 50'000, 200'000);
  std::uint64_t position = 0;
  hash128 root;
  {
    auto s = must_open(fe, o, std::nullopt);
    prolly_tree t(*s);
    root = must(t.build(entries_of(m)));
    for (int b = 0; b < 5; ++b) root = random_batch(t, root, m, rng, 200'000, 2000);
    position = must(s->flush());
    check_tree(*s, root, m, {});
    // The position names the active pack and its durable length.
    auto size = fe.contents(s->pack_path(position_pack(position)))->size();
    CHECK(position_offset(position) == size);
    CHECK(position_pack(position) > 1);
    CHECK(s->durable_position() == position);
    auto st = s->stats();
    CHECK(st.nodes_written > 100);
    CHECK(st.pack_bytes_written < st.nodes_written * 4096);  // compression pays
  }
  auto s = must_open(fe, o, position);
  CHECK(s->recovery().bytes_cut == 0);
  CHECK(s->recovery().position == position);
  check_tree(*s, root, m, {});
  prolly_tree t(*s);
  CHECK_FALSE(must(t.get(root, "absent-key")).has_value());
  hash128 nowhere = hash128::of("not a node");
  auto r = s->read(nowhere);
  REQUIRE_FALSE(r.is_ok());
  CHECK(r.error().code() == status_code::not_found);
  CHECK(r.error().message().find(nowhere.to_hex()) != std::string::npos);
}

// The write buffer keeps nodes as stored bytes only: every read of one, by a
// cursor (read) or by a point get (leaf_get), expands them, compressed or not.
TEST_CASE("node_store: nodes still in the write buffer read back by cursor and by point get") {
  fault_env fe;
  std::mt19937_64 rng(7);
  node_store_options o = small_options();
  o.write_buffer_bytes = 64 << 20;  // nothing reaches the pack before the flush
  model m;
  for (int i = 0; i < 3000; ++i)  // a run of one letter compresses; value_of's letters less so
    m[key_of(static_cast<std::uint64_t>(i))] = i % 2 ? std::string(40, 'a' + i % 26) : value_of(rng);
  auto s = must_open(fe, o, std::nullopt);
  const std::uint64_t header = s->stats().pack_bytes_written;  // the new pack's
  prolly_tree t(*s, small_nodes);
  hash128 root = must(t.build(entries_of(m)));
  CHECK(s->stats().pack_bytes_written == header);
  check_tree(*s, root, m);
  auto c = must(t.seek(root, ""));
  std::size_t seen = 0;
  for (auto it = m.begin(); c.valid() && it != m.end(); ++it, ++seen) {
    auto e = c.current();
    if (e.key != it->first || e.value != it->second) break;
    must_ok(c.next());
  }
  CHECK(seen == m.size());
  CHECK(s->stats().pack_bytes_written == header);
  must(s->flush());
  CHECK(s->stats().pack_bytes_written > header);
  must(s->gc({&root, 1}));  // empties the caches: what the flush wrote reads back too
  check_tree(*s, root, m);
}

// A flush that finds the active pack past its target with bytes spilled
// since the last sync must not seal it (a second fdatasync): it appends and
// syncs once, and the next spill seals the pack, then durable, at no sync.
TEST_CASE("node_store: a flush finding a full pack with unsynced bytes still does one fdatasync") {
  fault_env fe;
  node_store_options o = small_options();
  o.write_buffer_bytes = 1024;
  auto s = must_open(fe, o, std::nullopt);
  std::mt19937_64 rng(3);
  std::uint64_t i = 0;
  auto write_one = [&] { must(s->write(leaf_of({{key_of(i++), value_of(rng) + value_of(rng) + "z"}}))); };
  std::uint64_t pack = position_pack(must(s->flush()));
  // Spills until the pack holds target_pack_bytes past its header: full, unsynced.
  auto before = fe.stats();
  for (std::uint64_t full = s->stats().pack_bytes_written + o.target_pack_bytes; s->stats().pack_bytes_written < full;)
    write_one();
  REQUIRE(fe.stats().file_syncs == before.file_syncs);  // no seal yet
  write_one();                                          // pending at the flush
  before = fe.stats();
  std::uint64_t p = must(s->flush());
  CHECK(fe.stats().file_syncs == before.file_syncs + 1);
  CHECK(position_pack(p) == pack);  // appended to the full pack
  // The next spill seals it, synced already: a new pack, no fdatasync.
  before = fe.stats();
  for (std::uint64_t w = s->stats().pack_bytes_written; s->stats().pack_bytes_written == w;) write_one();
  CHECK(fe.stats().file_syncs == before.file_syncs);
  p = must(s->flush());
  CHECK(position_pack(p) == pack + 1);
  CHECK(fe.stats().file_syncs == before.file_syncs + 1);
}

TEST_CASE("node_store: a flush does one fdatasync however many nodes it writes; rewrites are no-ops") {
  fault_env fe;
  node_store_options o = small_options();
  o.write_buffer_bytes = 2048;  // many spills before the flush
  auto s = must_open(fe, o, std::nullopt);
  prolly_tree t(*s, small_nodes);
  std::mt19937_64 rng(1);
  model m = random_model(rng, 3000, 100'000);
  auto before = fe.stats();
  hash128 root = must(t.build(entries_of(m)));
  // Writes were handed to the kernel as the buffer filled; the only syncs
  // they caused sealed full packs (one per target_pack_bytes, not per node).
  auto after_writes = fe.stats();
  CHECK(after_writes.writes > before.writes + 5);
  std::uint64_t written = s->stats().pack_bytes_written;
  CHECK(after_writes.file_syncs - before.file_syncs <= written / o.target_pack_bytes);
  CHECK(after_writes.file_syncs - before.file_syncs < s->stats().nodes_written / 10);
  std::uint64_t p1 = must(s->flush());
  CHECK(fe.stats().file_syncs == after_writes.file_syncs + 1);
  CHECK(s->stats().pack_syncs == fe.stats().file_syncs - before.file_syncs);

  // Nothing new: no sync at all, same position.
  before = fe.stats();
  CHECK(must(s->flush()) == p1);
  CHECK(fe.stats().file_syncs == before.file_syncs);

  // Writing the same tree again stores nothing.
  auto st = s->stats();
  CHECK(must(t.build(entries_of(m))) == root);
  CHECK(s->stats().nodes_written == st.nodes_written);
  CHECK(s->stats().writes_deduplicated > st.writes_deduplicated);
  CHECK(s->stats().pack_bytes_written == st.pack_bytes_written);
  CHECK(must(s->flush()) == p1);

  // Past the target size the next flush starts a pack: still one fdatasync
  // (plus one directory fsync for the new name).
  for (int round = 0; round < 6; ++round) {
    root = random_batch(t, root, m, rng, 100'000, 300);
    before = fe.stats();
    std::uint64_t p = must(s->flush());
    CHECK(fe.stats().file_syncs == before.file_syncs + 1);
    CHECK(fe.stats().dir_syncs <= before.dir_syncs + 1);
    CHECK(p > p1);
    p1 = p;
  }
  CHECK(position_pack(p1) > 2);
  check_tree(*s, root, m);
}

TEST_CASE("node_store: every flipped byte of a pack is caught, naming the hash and the location") {
  // The last round writes searchable leaves: their offsets are covered by the
  // payload checksum, their encoding by the hash.
  for (int form = 0; form < 3; ++form) {
    node_codec codec = form == 1 ? node_codec::zstd : node_codec::lz4;
    bool searchable = form == 2;
    CAPTURE(form);
    fault_env fe;
    node_store_options o;
    o.codec = codec;
    o.searchable_leaves = searchable;
    o.cache_bytes = 1;  // nothing fits: every read goes to the pack
    std::mt19937_64 rng(7);
    std::vector<node> nodes;
    for (int i = 0; i < 10; ++i) {
      std::vector<entry> es;
      for (int j = 0; j < 3; ++j) {
        std::string v = i % 2 ? std::string(200, static_cast<char>('a' + i))  // compressible
                              : value_of(rng);                                // not
        es.push_back({fmt::format("n{}k{}", i, j), v});
      }
      nodes.push_back(leaf_of(es));
    }
    std::vector<hash128> hashes;
    std::uint64_t position;
    std::string path;
    auto s = must_open(fe, o, std::nullopt);
    for (const auto& n : nodes) hashes.push_back(must(s->write(n)));
    position = must(s->flush());
    path = s->pack_path(1);
    std::uint64_t size = fe.contents(path)->size();
    REQUIRE(size == position_offset(position));

    int compressed = 0;
    std::vector<node_location> locs;
    for (const auto& h : hashes) {
      auto l = s->locate(h);
      REQUIRE(l);
      locs.push_back(*l);
      if (l->length < 36 + must(s->read(h))->encode().size()) ++compressed;
    }
    if (searchable) {
      CHECK(compressed == 0);
    } else {
      CHECK(compressed > 0);
      CHECK(compressed < 10);
    }

    int detected = 0;
    for (std::uint64_t b = 40; b < size; ++b) {
      int bit = static_cast<int>(b % 8);
      REQUIRE(fe.flip_bit(path, b, bit));
      for (std::size_t i = 0; i < nodes.size(); ++i) {
        auto r = s->read(hashes[i]);
        bool inside = b >= locs[i].offset && b < locs[i].offset + locs[i].length;
        if (inside) {
          REQUIRE_FALSE_MESSAGE(r.is_ok(), "byte " << b << " flipped in node " << i << " went unnoticed");
          CHECK(r.error().code() == status_code::corruption);
          std::string msg = r.error().message();
          CHECK_MESSAGE(msg.find(hashes[i].to_hex()) != std::string::npos, msg);
          CHECK(msg.find(path) != std::string::npos);
          CHECK(msg.find(fmt::format("offset {}", locs[i].offset)) != std::string::npos);
          ++detected;
        } else {
          REQUIRE_MESSAGE(r.is_ok(), r.error().to_string());
          CHECK((*r)->encode() == nodes[i].encode());
        }
      }
      REQUIRE(fe.flip_bit(path, b, bit));
    }
    CHECK(detected == static_cast<int>(size - 40));

    // The pack header is checked at open.
    s.reset();
    for (std::uint64_t b = 0; b < 40; ++b) {
      REQUIRE(fe.flip_bit(path, b, static_cast<int>(b % 8)));
      auto bad = node_store::open(fe, store_dir, o, position);
      REQUIRE_FALSE(bad.is_ok());
      CHECK(bad.error().message().find(path) != std::string::npos);
      CHECK((bad.error().code() == status_code::corruption || bad.error().code() == status_code::not_supported));
      REQUIRE(fe.flip_bit(path, b, static_cast<int>(b % 8)));
    }
    s = must_open(fe, o, position);
    for (std::size_t i = 0; i < nodes.size(); ++i) CHECK(must(s->read(hashes[i]))->encode() == nodes[i].encode());
  }
}

// Packs of version 3 hold searchable leaves without entry sums (flag bit
// 2): made here by rewriting a version-4 pack as a version-3 build wrote it
// (its index removed, so open rebuilds it from the records), they read, and
// a get searches them after checking the hash of the whole leaf.
TEST_CASE("node_store: searchable leaves of version-3 packs (no entry sums) read and are searched") {
  fault_env fe;
  node_store_options o;
  o.searchable_leaves = true;
  o.cache_bytes = 1;  // every read goes to the pack
  o.record_cache_share = 0;
  std::mt19937_64 rng(43);
  model m = random_model(rng, 600, 100'000);
  committed_tree c = commit_tree(fe, o, m);
  std::string path = fmt::format("{}/{}", store_dir, pack_file_name(1));
  std::string in = *fe.contents(path);
  REQUIRE(c.position == make_position(1, in.size()));  // one pack holds it all
  auto u32_at = [&](std::size_t at) {
    return decode_fixed32_le(reinterpret_cast<const std::uint8_t*>(in.data() + at));
  };
  std::uint64_t salt = decode_fixed64_le(reinterpret_cast<const std::uint8_t*>(in.data() + 24));
  std::string out = in.substr(0, 40);
  encode_fixed32_le(reinterpret_cast<std::uint8_t*>(out.data() + 8), 3);
  encode_fixed32_le(reinterpret_cast<std::uint8_t*>(out.data() + 36), checksum32(std::string_view(out).substr(0, 36)));
  std::size_t converted = 0;
  for (std::size_t at = 40; at < in.size();) {
    std::uint8_t flags = static_cast<std::uint8_t>(in[at + 4]);
    std::uint32_t stored = u32_at(at + 8), raw = u32_at(at + 12);
    hash128 h = hash128::from_bytes(reinterpret_cast<const std::uint8_t*>(in.data() + at + 20));
    std::string_view payload = std::string_view(in).substr(at + record_header_size, stored);
    if (flags == flag_searchable_summed) {
      std::size_t width = raw <= 0xffff ? 2 : 4;
      std::size_t count = (stored - raw) / (width + 4);
      encode_record(out, salt, h, flag_searchable_leaf, payload.substr(0, raw + width * count), raw);
      ++converted;
    } else {
      out.append(in, at, record_header_size + stored);
    }
    at += record_header_size + stored;
  }
  REQUIRE(converted > 10);
  rewrite_file(fe, path, out);
  must_ok(fe.remove(fmt::format("{}/{}", store_dir, pack_index_file_name(1))));
  auto s = must_open(fe, o, make_position(1, out.size()));
  check_tree(*s, c.root, m);
  CHECK(s->stats().leaf_lookups == m.size());
  CHECK(s->check(std::vector<hash128>{c.root}).problems.empty());
}

// Each record names its codec: a store reads what any codec wrote, whatever
// it writes itself, and packs written before LZ4 records existed (version 1).
TEST_CASE("node_store: records of every codec read back, whatever the store writes; version-1 packs too") {
  fault_env fe;
  std::mt19937_64 rng(3);
  auto u32_at = [](const std::string& b, std::size_t at) {
    return decode_fixed32_le(reinterpret_cast<const std::uint8_t*>(b.data() + at));
  };
  auto set_u32 = [](std::string& b, std::size_t at, std::uint32_t v) {
    encode_fixed32_le(reinterpret_cast<std::uint8_t*>(b.data() + at), v);
  };
  auto rewrite = [&](const std::string& path, const std::string& bytes) { rewrite_file(fe, path, bytes); };
  // The flags of every record on disk, in every pack.
  auto flags_on_disk = [&] {
    std::set<int> flags;
    for (std::uint32_t pack = 1; auto b = fe.contents(fmt::format("{}/{}", store_dir, pack_file_name(pack))); ++pack)
      for (std::size_t at = 40; at + record_header_size <= b->size(); at += record_header_size + u32_at(*b, at + 8))
        flags.insert(static_cast<unsigned char>((*b)[at + 4]));
    return flags;
  };
  std::vector<std::pair<hash128, std::string>> written;  // hash, encoding
  std::optional<std::uint64_t> position;
  // The last store writes its leaves searchable.
  const std::vector<std::set<int>> flags_after = {{0, flag_zstd},
                                                  {0, flag_zstd, flag_lz4},
                                                  {0, flag_zstd, flag_lz4},
                                                  {0, flag_zstd, flag_lz4, flag_searchable_summed}};
  const std::vector<node_codec> codecs = {node_codec::zstd, node_codec::lz4, node_codec::none, node_codec::lz4};
  for (std::size_t round = 0; round < codecs.size(); ++round) {
    node_codec codec = codecs[round];
    node_store_options o;
    o.codec = codec;
    o.searchable_leaves = round == 3;
    auto s = must_open(fe, o, position);
    for (int i = 0; i < 20; ++i) {
      std::vector<entry> es;
      for (int j = 0; j < 4; ++j)
        es.push_back({fmt::format("c{}n{}k{}", round, i, j),
                      i % 2 ? std::string(300, static_cast<char>('a' + j)) : value_of(rng)});
      node n = leaf_of(es);
      written.emplace_back(must(s->write(n)), std::string(n.encode()));
    }
    position = must(s->flush());
    for (const auto& [h, e] : written) CHECK(must(s->read(h))->encode() == e);
    CHECK(flags_on_disk() == flags_after[round]);  // each record says how it is stored
  }
  // A pack of format version 1 (what builds before LZ4 wrote) reads as before.
  std::string path = fmt::format("{}/{}", store_dir, pack_file_name(1));
  std::string b = *fe.contents(path);
  set_u32(b, 8, 1);
  set_u32(b, 36, checksum32(std::string_view(b).substr(0, 36)));
  rewrite(path, b);
  node_store_options cold;
  cold.cache_bytes = 1;  // every read goes to the pack
  {
    auto s = must_open(fe, cold, position);
    for (const auto& [h, e] : written) CHECK(must(s->read(h))->encode() == e);
  }
  // A record that claims both codecs is corruption, named.
  std::size_t at = 40;
  hash128 first = written.front().first;
  b[at + 4] = static_cast<char>(flag_zstd | flag_lz4);
  std::uint64_t salt = decode_fixed64_le(reinterpret_cast<const std::uint8_t*>(b.data() + 24));
  set_u32(b, at, checksum32(std::string_view(b).substr(at + 4, record_header_size - 4), salt));
  rewrite(path, b);
  auto s = must_open(fe, cold, position);
  auto r = s->read(first);
  REQUIRE_FALSE(r.is_ok());
  CHECK(r.error().code() == status_code::corruption);
  CHECK(r.error().message().find("two codecs") != std::string::npos);
}

TEST_CASE("node_store: a flipped byte of an index file costs a rescan, never a wrong answer") {
  fault_env fe;
  std::vector<hash128> hashes;
  std::vector<std::string> encodings;
  std::uint64_t position;
  {
    auto s = must_open(fe, {}, std::nullopt);
    for (int i = 0; i < 8; ++i) {
      node n = leaf_of({{fmt::format("k{}", i), std::string(50 + i, 'x')}});
      hashes.push_back(must(s->write(n)));
      encodings.emplace_back(n.encode());
    }
    position = must(s->flush());
  }
  std::string idx_path = path_join(store_dir, pack_index_file_name(1));
  const std::string original = *fe.contents(idx_path);
  REQUIRE(original.size() == 40 + 8 * 32);
  for (std::uint64_t b = 0; b < original.size(); ++b) {
    REQUIRE(fe.flip_bit(idx_path, b, static_cast<int>(b % 8)));
    auto s = must_open(fe, {}, position);
    std::uint64_t intact = b < 40 ? 0 : (b - 40) / 32;
    CHECK(s->recovery().index_entries_loaded == intact);
    CHECK(s->recovery().index_entries_rebuilt == 8 - intact);
    for (std::size_t i = 0; i < hashes.size(); ++i) {
      auto r = s->read(hashes[i]);
      REQUIRE_MESSAGE(r.is_ok(), r.error().to_string());
      CHECK((*r)->encode() == encodings[i]);
    }
    // Open repaired the index: put the original back for the next byte.
    CHECK(*fe.contents(idx_path) == original);
    s.reset();
  }
}

TEST_CASE("node_store: a torn tail past the committed position is cut at open; the store keeps working") {
  // a is flushed and committed; b is flushed and committed only when
  // `commit_b`; c is written (partly handed to the kernel) but never flushed.
  int cut_something = 0;
  for (bool commit_b : {false, true}) {
    for (auto mode : crash_modes) {
      for (std::uint64_t seed = 0; seed < 5; ++seed) {
        CAPTURE(commit_b);
        CAPTURE(static_cast<int>(mode));
        CAPTURE(seed);
        fault_env fe;
        std::mt19937_64 rng(seed);
        node_store_options o = small_options();
        model ma = random_model(rng, 1500, 50'000);
        model mb = ma, mc;
        hash128 a, b, c;
        std::uint64_t committed;
        {
          auto s = must_open(fe, o, std::nullopt);
          prolly_tree t(*s, small_nodes);
          a = must(t.build(entries_of(ma)));
          committed = must(s->flush());  // the owner commits (a, committed)
          b = random_batch(t, a, mb, rng, 50'000, 400);
          std::uint64_t pb = must(s->flush());
          if (commit_b) committed = pb;  // else the commit marker never made it
          mc = mb;
          c = random_batch(t, b, mc, rng, 50'000, 400);  // written, not flushed
          CHECK(s->stats().pack_bytes_written > position_offset(committed));
        }
        const hash128 kept = commit_b ? b : a;
        const model& kept_model = commit_b ? mb : ma;
        std::set<hash128> gone;  // nodes only the uncommitted roots reach
        {
          memory_nodes all;
          prolly_tree tm(all, small_nodes);
          CHECK(must(tm.build(entries_of(ma))) == a);
          CHECK(must(tm.build(entries_of(mb))) == b);
          CHECK(must(tm.build(entries_of(mc))) == c);
          std::set<hash128> keep = reachable(all, a);
          if (commit_b)
            for (auto x : reachable(all, b)) keep.insert(x);
          for (auto h : {b, c})
            for (auto x : reachable(all, h))
              if (!keep.count(x)) gone.insert(x);
        }
        REQUIRE_FALSE(gone.empty());
        if (mode == fault_env::unsynced::random && seed % 2) {
          fe.process_crash();  // the page cache survives: nothing was lost but the process
        } else {
          fe.crash(mode, seed);
        }
        auto s = must_open(fe, o, committed);
        if (s->recovery().bytes_cut > 0) {
          ++cut_something;
          CHECK_FALSE(s->recovery().cut_detail.empty());
        }
        CHECK(s->recovery().position == committed);
        check_tree(*s, a, ma);
        check_tree(*s, kept, kept_model);
        for (const auto& h : gone) {
          CHECK_FALSE(s->contains(h));
          auto r = s->read(h);
          REQUIRE_FALSE(r.is_ok());
          CHECK(r.error().code() == status_code::not_found);
        }
        // It keeps working: new writes land after the cut and survive a crash.
        prolly_tree t(*s, small_nodes);
        model md = kept_model;
        hash128 d = random_batch(t, kept, md, rng, 50'000, 300);
        std::uint64_t p = must(s->flush());
        CHECK(p > committed);
        s.reset();
        fe.crash(fault_env::unsynced::lose);
        s = must_open(fe, o, p);
        CHECK(s->recovery().bytes_cut == 0);
        check_tree(*s, d, md);
        check_tree(*s, kept, kept_model);
      }
    }
  }
  CHECK(cut_something > 20);
}

TEST_CASE("node_store: a write torn inside a record is cut at the committed position") {
  node_store_options o = small_options();
  o.target_pack_bytes = 1 << 20;  // one pack
  o.write_buffer_bytes = 1024;    // unflushed records reach the kernel in small writes
  std::mt19937_64 rng(4);
  model ma = random_model(rng, 500, 50'000);
  for (std::size_t keep : {std::size_t{1}, std::size_t{20}, std::size_t{35}, std::size_t{36}, std::size_t{37},
                           std::size_t{200}, std::size_t{700}}) {
    CAPTURE(keep);
    fault_env fe;
    hash128 a;
    std::uint64_t committed;
    std::vector<hash128> unflushed;
    std::string path;
    {
      auto s = must_open(fe, o, std::nullopt);
      prolly_tree t(*s, small_nodes);
      a = must(t.build(entries_of(ma)));
      committed = must(s->flush());
      for (int i = 0; i < 60; ++i)
        unflushed.push_back(must(s->write(leaf_of({{fmt::format("u{:03}", i), value_of(rng) + "0123456789"}}))));
      path = s->pack_path(position_pack(committed));
      REQUIRE(fe.contents(path)->size() > position_offset(committed) + 1024);
    }
    // Every handed-over write but the last reaches the disk; the last is torn.
    fe.crash_tearing_last_write(path, keep);
    std::uint64_t on_disk = fe.contents(path)->size();
    REQUIRE(on_disk > position_offset(committed));
    auto s = must_open(fe, o, committed);
    CHECK(s->recovery().bytes_cut == on_disk - position_offset(committed));
    CHECK(s->recovery().cut_detail.find(path) != std::string::npos);
    CHECK(fe.contents(path)->size() == position_offset(committed));
    check_tree(*s, a, ma);
    for (const auto& h : unflushed) CHECK(s->read(h).error().code() == status_code::not_found);
    // Written again, they land where the torn bytes were, and stay.
    for (int i = 0; i < 60; ++i) must(s->write(leaf_of({{fmt::format("v{:03}", i), "again"}})));
    std::uint64_t p = must(s->flush());
    s.reset();
    fe.crash(fault_env::unsynced::lose);
    s = must_open(fe, o, p);
    CHECK(s->recovery().bytes_cut == 0);
    for (int i = 0; i < 60; ++i)
      CHECK(s->read(hash128::of(leaf_of({{fmt::format("v{:03}", i), "again"}}).encode())).is_ok());
  }
}

TEST_CASE("node_store: random garbage in packs and indexes is refused or reported, never returned") {
  int refused_opens = 0, corrupt_reads = 0;
  for (std::uint64_t seed = 0; seed < 60; ++seed) {
    CAPTURE(seed);
    fault_env fe;
    std::mt19937_64 rng(seed);
    node_store_options o = small_options();
    o.cache_bytes = 1;
    std::map<hash128, std::string> stored;
    std::uint64_t position;
    {
      auto s = must_open(fe, o, std::nullopt);
      for (int i = 0; i < 40; ++i) {
        node n = leaf_of({{fmt::format("g{:03}", i), i % 3 ? std::string(80, 'q') : value_of(rng)}});
        stored[must(s->write(n))] = n.encode();
      }
      position = must(s->flush());
    }
    // Overwrite a random range of the pack or of its index with random bytes.
    std::string path = path_join(store_dir, seed % 2 ? pack_file_name(1) : pack_index_file_name(1));
    std::string bytes = *fe.contents(path);
    std::size_t at = rng() % bytes.size(), n = 1 + rng() % 64;
    for (std::size_t i = at; i < std::min(bytes.size(), at + n); ++i) bytes[i] = static_cast<char>(rng());
    auto f = must(fe.open(path, open_mode::create_truncate));
    must_ok(f->append(bytes));
    if (seed % 4 < 2) must_ok(fe.remove(path_join(store_dir, pack_index_file_name(1))));  // forces a scan
    auto s = node_store::open(fe, store_dir, o, position);
    if (!s.is_ok()) {
      ++refused_opens;
      CHECK((s.error().code() == status_code::corruption || s.error().code() == status_code::not_supported));
      CHECK(s.error().message().find(store_dir) != std::string::npos);
      continue;
    }
    for (const auto& [h, enc] : stored) {
      auto r = (*s)->read(h);
      if (r.is_ok()) {
        CHECK((*r)->encode() == enc);
      } else {
        ++corrupt_reads;
        CHECK((r.error().code() == status_code::corruption || r.error().code() == status_code::not_found));
        CHECK(r.error().message().find(h.to_hex()) != std::string::npos);
      }
    }
  }
  CHECK(refused_opens > 0);
  CHECK(corrupt_reads > 0);
}

TEST_CASE("node_store: reopening uses the persisted index instead of scanning packs") {
  fault_env fe;
  node_store_options o = small_options();
  std::mt19937_64 rng(3);
  model m = random_model(rng, 4000, 100'000);
  hash128 root;
  std::uint64_t position;
  std::size_t nodes;
  {
    auto s = must_open(fe, o, std::nullopt);
    prolly_tree t(*s, small_nodes);
    root = must(t.build(entries_of(m)));
    for (int i = 0; i < 4; ++i) {
      root = random_batch(t, root, m, rng, 100'000, 200);
      must(s->flush());
    }
    position = must(s->flush());
    nodes = s->stats().nodes_written;
  }
  std::uint64_t packs;
  {
    auto s = must_open(fe, o, position);
    packs = s->recovery().packs;
    REQUIRE(packs > 3);
    CHECK(s->recovery().index_entries_loaded == nodes);
    CHECK(s->recovery().index_entries_rebuilt == 0);
    CHECK(s->recovery().bytes_scanned == 0);
    CHECK(s->stats().pack_bytes_read == packs * 40);  // the pack headers, nothing else
    check_tree(*s, root, m);
  }
  // Without one pack's index, only that pack is scanned, and its index is
  // written back, so the next open scans nothing again.
  std::uint32_t victim = 2;
  std::uint64_t victim_size = fe.contents(path_join(store_dir, pack_file_name(victim)))->size();
  must_ok(fe.remove(path_join(store_dir, pack_index_file_name(victim))));
  {
    auto s = must_open(fe, o, position);
    CHECK(s->recovery().index_entries_rebuilt > 0);
    CHECK(s->recovery().index_entries_loaded + s->recovery().index_entries_rebuilt == nodes);
    CHECK(s->recovery().bytes_scanned == victim_size - 40);
    check_tree(*s, root, m);
  }
  {
    auto s = must_open(fe, o, position);
    CHECK(s->recovery().bytes_scanned == 0);
  }
  // Index entries are appended unsynced: a power cut loses them and the next
  // open rebuilds them, then makes them durable so it happens once.
  fe.crash(fault_env::unsynced::lose);
  {
    auto s = must_open(fe, o, position);
    CHECK(s->recovery().index_entries_rebuilt > 0);
    check_tree(*s, root, m);
  }
  fe.crash(fault_env::unsynced::lose);
  {
    auto s = must_open(fe, o, position);
    CHECK(s->recovery().bytes_scanned == 0);
    CHECK(s->recovery().index_entries_loaded == nodes);
  }
}

TEST_CASE("node_store: index entries for bytes cut at open never come back to hide newer records") {
  // The index of the active pack is appended without an fsync. Entries for
  // records that open cuts (past the committed position) must not survive a
  // later crash once other records sit at the same offsets.
  fault_env fe;
  node_store_options o = small_options();
  o.target_pack_bytes = 1 << 20;  // one pack throughout
  auto leaves = [](std::string_view tag, int n, std::size_t value_bytes) {
    std::vector<node> out;
    for (int i = 0; i < n; ++i)
      out.push_back(leaf_of({{fmt::format("{}{:04}", tag, i), std::string(value_bytes, 'v')}}));
    return out;
  };
  auto a = leaves("a", 20, 40), b = leaves("b", 20, 40), c = leaves("c", 30, 40);
  std::uint64_t p1, p3;
  {
    auto s = must_open(fe, o, std::nullopt);
    for (const auto& n : a) must(s->write(n));
    p1 = must(s->flush());  // committed
    for (const auto& n : b) must(s->write(n));
    must(s->flush());  // never committed
  }
  fe.crash(fault_env::unsynced::keep);  // the index entries for b reached the disk
  {
    auto s = must_open(fe, o, p1);
    CHECK(s->recovery().bytes_cut > 0);
    for (const auto& n : c) must(s->write(n));  // where b was
    p3 = must(s->flush());
  }
  fe.crash(fault_env::unsynced::lose);  // c's index entries are lost
  auto s = must_open(fe, o, p3);
  for (const auto& n : a) CHECK(must(s->read(hash128::of(n.encode())))->encode() == n.encode());
  for (const auto& n : c) {
    auto r = s->read(hash128::of(n.encode()));
    REQUIRE_MESSAGE(r.is_ok(), r.error().to_string());
    CHECK((*r)->encode() == n.encode());
  }
  for (const auto& n : b) CHECK_FALSE(s->contains(hash128::of(n.encode())));
}

TEST_CASE("node_store: the cache stays within its byte bound and counts hits and misses") {
  for (std::size_t bound : {std::size_t{24} << 10, std::size_t{4} << 20}) {
    CAPTURE(bound);
    fault_env fe;
    node_store_options o = small_options();
    o.cache_bytes = bound;
    std::mt19937_64 rng(5);
    model m = random_model(rng, 6000, 100'000);
    auto [root, position] = commit_tree(fe, o, m);
    auto s = must_open(fe, o, position);
    prolly_tree t(*s, small_nodes);
    std::uint64_t max_seen = 0;
    int i = 0;
    auto held = [&] {
      auto st = s->stats();
      return st.cache_bytes + st.record_cache_bytes;  // both caches share the bound
    };
    for (const auto& [k, v] : m) {
      CHECK(must(t.get(root, k)) == v);
      if (++i % 50 == 0) max_seen = std::max(max_seen, held());
    }
    auto st = s->stats();
    max_seen = std::max(max_seen, held());
    CHECK(max_seen <= bound);
    if (bound < (4u << 20)) CHECK(max_seen > bound / 2);  // it is used, not just bounded
    CHECK(st.cache_entries > 0);
    CHECK(st.cache_hits > 0);  // the root and upper levels stay
    CHECK(st.cache_misses > 0);
    // A second pass over the same keys: only the big cache holds the whole tree.
    std::uint64_t read_before = st.pack_bytes_read;
    for (const auto& [k, v] : m) CHECK(must(t.get(root, k)) == v);
    if (bound >= (4u << 20))
      CHECK(s->stats().pack_bytes_read == read_before);
    else
      CHECK(s->stats().pack_bytes_read > read_before);
    CHECK(held() <= bound);
  }
}

TEST_CASE("node_store: the cache's bound holds its slot table too, through small nodes then big ones") {
  fault_env fe;
  node_store_options o = small_options();
  o.cache_bytes = 256 << 10;
  std::mt19937_64 rng(8);
  model small_m, big_m;
  for (int i = 0; i < 20000; ++i) small_m.emplace(fmt::format("s{:08}", i), std::string(1, 'v'));
  for (int i = 0; i < 40; ++i) big_m[fmt::format("b{:08}", i)] = std::string(20000, 'x');  // one a node
  const chunk_policy big_nodes{8192, 2048, 16384};
  hash128 small_root, big_root;
  std::uint64_t position;
  {
    auto s = must_open(fe, o, std::nullopt);
    small_root = must(prolly_tree(*s, small_nodes).build(entries_of(small_m)));
    big_root = must(prolly_tree(*s, big_nodes).build(entries_of(big_m)));
    position = must(s->flush());
  }
  auto s = must_open(fe, o, position);
  std::uint64_t max_seen = 0;
  int i = 0;
  prolly_tree ts(*s, small_nodes), tb(*s, big_nodes);
  // Read twice, so that leaves kept as records at first are decoded too.
  auto held = [&] {
    auto st = s->stats();
    return st.cache_bytes + st.record_cache_bytes;
  };
  for (int pass = 0; pass < 2; ++pass)
    for (const auto& [k, v] : small_m) {  // many small nodes: the table grows
      CHECK(must(ts.get(small_root, k)) == v);
      if (++i % 100 == 0) max_seen = std::max(max_seen, held());
    }
  std::uint64_t entries_small = s->stats().cache_entries;
  for (int pass = 0; pass < 2; ++pass)
    for (const auto& [k, v] : big_m) {  // then few big ones: the table must shrink
      CHECK(must(tb.get(big_root, k)) == v);
      if (++i % 20 == 0) max_seen = std::max(max_seen, held());
    }
  max_seen = std::max(max_seen, held());
  CHECK(max_seen <= o.cache_bytes);
  auto st = s->stats();
  CHECK(st.cache_entries < entries_small);
  // The table shrank with the entries: at most 4 slots an entry, or its minimum.
  CHECK(st.cache_table_bytes <= std::max<std::uint64_t>(64, 4 * st.cache_entries) * 64);
  CHECK(st.cache_bytes > o.cache_bytes / 4);  // still used for the big nodes
}

TEST_CASE("node_store: a leaf that compresses well is kept as its record until in demand; others decode at once") {
  // Values of one repeated letter compress far more than 4x; random bytes not at all.
  auto run = [](bool compressible, double share) {
    CAPTURE(compressible);
    CAPTURE(share);
    fault_env fe;
    node_store_options o = small_options();
    o.cache_bytes = 4u << 20;
    o.record_cache_share = share;
    std::mt19937_64 rng(3);
    model m;
    for (int i = 0; i < 2000; ++i) {
      std::string v(200, static_cast<char>('a' + i % 3));
      if (!compressible)
        for (auto& c : v) c = static_cast<char>(rng());
      m[key_of(static_cast<std::uint64_t>(i))] = v;
    }
    auto [root, position] = commit_tree(fe, o, m);
    auto s = must_open(fe, o, position);
    prolly_tree t(*s, small_nodes);
    std::size_t depth = must(t.depth(root));
    REQUIRE(depth >= 2);
    const std::string& key = m.begin()->first;
    auto get = [&] {
      CHECK(must(t.get(root, key)) == m.begin()->second);
      return s->stats();
    };
    bool as_record = compressible && share > 0;
    auto first = get();  // cold: every node on the path is read from its pack
    CHECK(first.pack_bytes_read > 0);
    CHECK(first.record_cache_entries == (as_record ? 1u : 0u));
    CHECK(first.cache_entries == (as_record ? depth - 1 : depth));
    auto second = get();  // the leaf again: no pack read
    CHECK(second.pack_bytes_read == first.pack_bytes_read);
    CHECK(second.record_cache_hits == (as_record ? 1u : 0u));
    CHECK(second.cache_entries == first.cache_entries);  // hit once: searched where it lies
    auto third = get();                                  // hit again since the clock passed it: now decoded
    CHECK(third.pack_bytes_read == first.pack_bytes_read);
    CHECK(third.record_cache_hits == (as_record ? 2u : 0u));
    CHECK(third.cache_entries == depth);
    auto fourth = get();  // a node cache hit (the tree keeps the nodes above)
    CHECK(fourth.record_cache_hits == third.record_cache_hits);
    CHECK(fourth.cache_hits == third.cache_hits + 1);
    CHECK(fourth.cache_misses == third.cache_misses);
  };
  run(true, 0.5);
  run(false, 0.5);
  run(true, 0);
}

TEST_CASE("clock_cache: the bound covers values and the table; a smaller capacity evicts at once") {
  struct value {
    int v = 0;
    explicit operator bool() const noexcept { return v != 0; }
  };
  clock_cache<value> c(1u << 20);
  auto key = [](std::uint64_t i) { return hash128{i * 0x9e3779b97f4a7c15ULL, i}; };
  for (std::uint64_t i = 1; i <= 4000; ++i) c.put(key(i), value{static_cast<int>(i)}, 1000);
  std::uint64_t bytes = 0, entries = 0, table = 0;
  c.usage(bytes, entries, table);
  CHECK(bytes <= (1u << 20));
  CHECK(bytes > (1u << 19));
  CHECK(table > 0);
  CHECK(c.charged() == bytes);  // kept without locks, agrees with the locked sum
  std::uint64_t found = 0;
  for (std::uint64_t i = 1; i <= 4000; ++i)
    c.with_hit(key(i), [&](const value& v) { found += v.v == static_cast<int>(i); });
  CHECK(found == entries);
  // A value hit twice says so the second time, not the first.
  std::uint64_t cached = 0;
  for (std::uint64_t i = 1; i <= 4000 && cached == 0; ++i)
    if (c.with_hit(key(i), [](const value&) {})) cached = i;
  REQUIRE(cached != 0);
  c.clear();
  c.put(key(cached), value{1}, 1000);
  std::vector<bool> again;
  for (int i = 0; i < 2; ++i) c.with_hit_seen(key(cached), [&](const value&, bool a) { again.push_back(a); });
  CHECK(again == std::vector<bool>{false, true});
  for (std::uint64_t i = 1; i <= 4000; ++i) c.put(key(i), value{static_cast<int>(i)}, 1000);
  c.set_capacity(256u << 10);
  c.usage(bytes, entries, table);
  CHECK(bytes <= (256u << 10));
  CHECK(bytes > (64u << 10));
  CHECK(c.charged() == bytes);
  c.clear();
  CHECK(c.charged() == 0);
}

TEST_CASE("clock_cache: resident values outlive a flood while they take at most half the budget") {
  struct value {
    int v = 0;
    explicit operator bool() const noexcept { return v != 0; }
  };
  auto key = [](std::uint64_t i) { return hash128{i * 0x9e3779b97f4a7c15ULL, i}; };
  auto held = [&](clock_cache<value>& c, std::uint64_t from, std::uint64_t to) {
    std::uint64_t n = 0;
    for (std::uint64_t i = from; i < to; ++i) n += c.with_hit(key(i), [](const value&) {});
    return n;
  };
  clock_cache<value> c(1u << 20);  // one shard
  // 100 residents, 100 KB, never hit: plain CLOCK would evict them first.
  for (std::uint64_t i = 1; i <= 100; ++i) c.put(key(i), value{1}, 1000, /*resident=*/true);
  for (std::uint64_t i = 1000; i < 20000; ++i) c.put(key(i), value{1}, 1000);
  CHECK(held(c, 1, 101) == 100);
  std::uint64_t bytes = 0, entries = 0, table = 0, resident = 0;
  c.usage(bytes, entries, table, &resident);
  CHECK(resident == 100 * 1000);
  CHECK(bytes <= (1u << 20));
  // The same without the flag: the flood takes them.
  c.clear();
  for (std::uint64_t i = 1; i <= 100; ++i) c.put(key(i), value{1}, 1000);
  for (std::uint64_t i = 1000; i < 20000; ++i) c.put(key(i), value{1}, 1000);
  CHECK(held(c, 1, 101) == 0);
  // Residents beyond half the budget are evicted as any value, down to half.
  c.clear();
  for (std::uint64_t i = 1; i <= 800; ++i) c.put(key(i), value{1}, 1000, true);
  for (std::uint64_t i = 1000; i < 20000; ++i) c.put(key(i), value{1}, 1000);
  c.usage(bytes, entries, table, &resident);
  CHECK(resident <= (1u << 19));
  CHECK(resident + 1000 > (1u << 19) - table);
  // A value that needs room a shard of residents alone can give: the sweep
  // ends, residents go, the value is kept.
  c.clear();
  for (std::uint64_t i = 1; i <= 500; ++i) c.put(key(i), value{1}, 1000, true);
  c.put(key(99999), value{1}, 700'000);
  CHECK(held(c, 99999, 100000) == 1);
  c.usage(bytes, entries, table, &resident);
  CHECK(bytes <= (1u << 20));
  CHECK(c.charged() == bytes);
}

// A get past the cache reads its leaf and nothing above it: internal nodes
// read once stay in the node cache however many leaves go through it.
TEST_CASE("node_store: internal nodes stay cached through a flood of leaves") {
  fault_env fe;
  node_store_options o = small_options();
  o.record_cache_share = 0;
  std::mt19937_64 rng(45);
  model m = random_model(rng, 8000, 1'000'000);
  for (auto& [k, v] : m) v = std::string(1000, k.back());  // leaves far larger than the nodes above them
  committed_tree c = commit_tree(fe, o, m);
  std::vector<hash128> internal, leaves;
  std::uint64_t internal_bytes = 0;
  {
    auto s = must_open(fe, o, c.position);
    for (const auto& h : reachable(*s, c.root)) (must(s->read(h))->is_leaf() ? leaves : internal).push_back(h);
    s.reset();
    node_store_options roomy = o;
    roomy.cache_bytes = 64 << 20;  // what they are charged, all of them held
    s = must_open(fe, roomy, c.position);
    for (const auto& h : internal) must(s->read(h));
    auto st = s->stats();
    internal_bytes = st.cache_bytes - st.cache_table_bytes;
  }
  REQUIRE(internal.size() > 3);
  REQUIRE(internal_bytes > 0);
  o.cache_bytes = std::max<std::size_t>(4 * internal_bytes, 32 << 10);
  auto s = must_open(fe, o, c.position);
  for (const auto& h : internal) must(s->read(h));
  // Leaves at least four times the cache, each read once.
  std::uint64_t leaf_bytes = 0;
  for (const auto& h : leaves) leaf_bytes += must(s->read(h))->encode().size();
  REQUIRE(leaf_bytes > 4 * o.cache_bytes);
  auto before = s->stats();
  CHECK(before.cache_resident_bytes == internal_bytes);
  for (const auto& h : internal) must(s->read(h));
  auto after = s->stats();
  CHECK(after.record_reads == before.record_reads);  // every internal node was a hit
  CHECK(after.cache_hits == before.cache_hits + internal.size());
  CHECK(after.cache_bytes <= o.cache_bytes);
}

TEST_CASE("node_store: concurrent readers with a small cache all read the right values") {
  // Random values, and values that compress well (their leaves go through the
  // record cache, which takes its bytes from the node cache's share).
  for (bool compressible : {false, true}) {
    CAPTURE(compressible);
    fault_env fe;
    node_store_options o = small_options();
    o.cache_bytes = compressible ? 64 << 10 : 32 << 10;
    std::mt19937_64 rng(11);
    model m = random_model(rng, 5000, 100'000);
    if (compressible)
      for (auto& [k, v] : m) v = std::string(120, k.back());
    std::vector<std::pair<std::string, std::string>> kv(m.begin(), m.end());
    auto s = must_open(fe, o, std::nullopt);
    hash128 root = must(prolly_tree(*s, small_nodes).build(entries_of(m)));
    must(s->flush());
    std::atomic<int> wrong{0}, done{0};
    std::vector<std::thread> readers;
    for (int r = 0; r < 4; ++r)
      readers.emplace_back([&, r] {
        prolly_tree t(*s, small_nodes);
        std::mt19937_64 local(r);
        for (int i = 0; i < 3000; ++i) {
          auto& [k, v] = kv[local() % kv.size()];
          auto got = t.get(root, k);
          if (!got.is_ok() || !*got || **got != v) ++wrong;
          ++done;
        }
      });
    for (auto& th : readers) th.join();
    CHECK(wrong == 0);
    CHECK(done == 12000);
    auto st = s->stats();
    CHECK(st.cache_bytes + st.record_cache_bytes <= o.cache_bytes + (4u << 10));  // give or take a record
    if (compressible) CHECK(st.record_cache_hits > 0);
  }
}

TEST_CASE("node_store: gc keeps what the kept roots reach, drops the rest, and reclaims the space") {
  fault_env fe;
  node_store_options o = small_options();
  std::mt19937_64 rng(21);
  model ma = random_model(rng, 3000, 100'000), mb = ma;
  hash128 a, b;
  std::uint64_t before_gc;
  gc_result g;
  std::set<hash128> only_a;
  {
    auto s = must_open(fe, o, std::nullopt);
    prolly_tree t(*s, small_nodes);
    a = must(t.build(entries_of(ma)));
    must(s->flush());
    b = a;
    for (int i = 0; i < 8; ++i) {
      b = random_batch(t, b, mb, rng, 100'000, 300);
      must(s->flush());
    }
    before_gc = must(s->flush());
    auto in_b = reachable(*s, b);
    for (auto h : reachable(*s, a))
      if (!in_b.count(h)) only_a.insert(h);
    REQUIRE_FALSE(only_a.empty());
    std::uint32_t old_last = position_pack(before_gc);

    // A pending (unflushed) node reachable from a kept root is kept too.
    model mc = mb;
    hash128 c = random_batch(t, b, mc, rng, 100'000, 50);
    std::size_t old_packs = 0;
    for (const auto& name : must(fe.list(store_dir))) old_packs += name.ends_with(".pack");
    REQUIRE(old_packs >= old_last);
    std::vector<hash128> roots{b, c};
    g = must(s->gc(roots));
    CHECK(g.position > before_gc);
    CHECK(position_pack(g.position) > old_last);
    CHECK(g.bytes_reclaimed > 0);
    CHECK(g.bytes_removed > g.bytes_kept);
    CHECK(g.packs_removed == old_packs);
    CHECK(g.nodes_kept == reachable(*s, b).size() + [&] {
      std::size_t extra = 0;
      auto in_b2 = reachable(*s, b);
      for (auto h : reachable(*s, c)) extra += !in_b2.count(h);
      return extra;
    }());
    for (std::uint32_t p = 1; p <= old_packs; ++p) CHECK_FALSE(file_exists(fe, s->pack_path(p)));
    CHECK(file_exists(fe, path_join(store_dir, manifest_file_name)));
    check_tree(*s, b, mb);
    check_tree(*s, c, mc);
    for (auto h : only_a) CHECK(s->read(h).error().code() == status_code::not_found);
    // Writes go on after gc, and dropped nodes can be written again.
    a = must(t.build(entries_of(ma)));
    CHECK(must(s->flush()) > g.position);
  }
  // Reopened with gc's position, or with the position before gc (the owner
  // crashed before recording gc's): the manifest's floor keeps gc's output.
  for (std::optional<std::uint64_t> committed :
       {std::optional<std::uint64_t>(g.position), std::optional<std::uint64_t>(before_gc),
        std::optional<std::uint64_t>()}) {
    auto s = must_open(fe, o, committed);
    CHECK(s->recovery().gc_floor_used == (committed != g.position));
    CHECK(s->recovery().position == g.position);
    check_tree(*s, b, mb);
    for (auto h : only_a) CHECK_FALSE(s->contains(h));  // rewritten after gc, never committed
  }
}

TEST_CASE("node_store: readers of a kept root keep working while gc runs") {
  fault_env fe;
  node_store_options o = small_options();
  o.cache_bytes = 16 << 10;  // most reads go to the packs gc is replacing
  std::mt19937_64 rng(31);
  model mk = random_model(rng, 4000, 100'000);
  std::vector<std::pair<std::string, std::string>> kv(mk.begin(), mk.end());
  auto s = must_open(fe, o, std::nullopt);
  prolly_tree t(*s, small_nodes);
  hash128 kept = must(t.build(entries_of(mk)));
  must(s->flush());

  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> reads{0}, wrong{0};
  std::mutex first_error_mu;
  std::string first_error;
  std::vector<std::thread> readers;
  for (int r = 0; r < 3; ++r)
    readers.emplace_back([&, r] {
      prolly_tree rt(*s, small_nodes);
      std::mt19937_64 local(100 + r);
      while (!stop) {
        auto& [k, v] = kv[local() % kv.size()];
        auto got = rt.get(kept, k);
        ++reads;
        if (!got.is_ok() || !*got || **got != v) {
          ++wrong;
          std::lock_guard lk(first_error_mu);
          if (first_error.empty()) first_error = got.is_ok() ? "wrong value for " + k : got.error().to_string();
        }
      }
    });
  std::uint64_t reclaimed = 0;
  for (int round = 0; round < 8; ++round) {
    // Garbage to collect: a tree that is dropped.
    model junk = random_model(rng, 1000, 100'000);
    must(t.build(entries_of(junk)));
    must(s->flush());
    std::vector<hash128> roots{kept};
    std::uint64_t reads_before = reads;
    auto g = must(s->gc(roots));
    reclaimed += g.bytes_reclaimed;
    // Let the readers make progress between rounds.
    while (reads < reads_before + 200) std::this_thread::yield();
  }
  stop = true;
  for (auto& th : readers) th.join();
  CHECK_MESSAGE(wrong == 0, first_error);
  CHECK(reads > 1600);
  CHECK(reclaimed > 0);
  CHECK(s->stats().gc_runs == 8);
  check_tree(*s, kept, mk);
}

// A store job that rewrites packs (gc, a reclamation cycle), run with the
// process dying after the job's k-th mutating env operation, or the flush's
// after it (never for k = 0). The job runs on a store that holds root a (of
// ma), then b (of mb) built by `build`, all flushed; if it finished, 50 new
// entries are applied to b and flushed (recorded when k % 3 == 0). The disk
// then keeps what crash_modes[k % 4] says. Reopened with the position the
// owner had recorded, b must be whole, and a too while the manifest has not
// switched; then the store must keep working (`more` runs on it after a new
// batch). Returns the operations the job and the flush after it performed.
struct repack_crash {
  node_store_options options;
  model ma, mb;
  // Builds b on s (a is built already); returns it. Runs before the flush.
  std::function<hash128(node_store& s, prolly_tree& t)> build;
  // Runs after the flush, before the crash point is armed.
  std::function<void(node_store& s)> after_flush = [](node_store&) {};
  // Runs the job; true if it finished. A position it sets is what the owner
  // records when k is odd and the process is still alive.
  std::function<bool(node_store& s, const hash128& b, std::optional<std::uint64_t>& position)> job;
  // Checks on the reopened store (job_ok: whether the job finished).
  std::function<void(node_store& s, bool job_ok, bool switched)> after_reopen = [](node_store&, bool, bool) {};
  // Runs on the reopened store after a new batch made root c.
  std::function<void(node_store& s, const hash128& c)> more = [](node_store&, const hash128&) {};

  std::uint64_t run(std::uint64_t k) const {
    CAPTURE(k);
    fault_env fe;
    dying_env de(fe);
    hash128 a, b;
    std::uint64_t committed, ops;
    bool ok;
    {
      auto s = must_open(de, options, std::nullopt);
      prolly_tree t(*s, small_nodes);
      a = must(t.build(entries_of(ma)));
      b = build(*s, t);
      committed = must(s->flush());
      after_flush(*s);
      std::uint64_t ops_before = de.ops();
      if (k) de.arm(k);
      std::optional<std::uint64_t> position;
      ok = job(*s, b, position);
      if (ok && !de.dead()) {
        if (position && k % 2) committed = *position;
        std::vector<edit> edits;
        for (std::uint64_t i = 0; i < 50; ++i) edits.push_back({key_of(60'000 + i), "after"});
        if (t.apply(b, edits).is_ok()) {  // may die on the way
          auto p = s->flush();
          if (p.is_ok() && k % 3 == 0) committed = *p;
        }
      } else if (!ok) {
        CHECK(de.dead());
      }
      ops = de.ops() - ops_before;
    }
    if (!k) {
      REQUIRE(ok);
      return ops;
    }
    auto mode = crash_modes[k % 4];
    CAPTURE(static_cast<int>(mode));
    fe.crash(mode, k);
    auto s = must_open(fe, options, committed);
    check_tree(*s, b, mb);
    bool switched = file_exists(fe, path_join(store_dir, manifest_file_name));
    if (!switched) check_tree(*s, a, ma);  // nothing was dropped yet
    after_reopen(*s, ok, switched);
    // And it keeps working.
    prolly_tree t(*s, small_nodes);
    model mc = mb;
    std::mt19937_64 r(k);
    hash128 c = random_batch(t, b, mc, r, 50'000, 100);
    std::uint64_t p = must(s->flush());
    more(*s, c);
    s.reset();
    fe.crash(fault_env::unsynced::lose);
    s = must_open(fe, options, p);
    check_tree(*s, c, mc);
    return ops;
  }

  // Every k with each crash mode (k + 4j cycles through them).
  void run_all(std::string_view what) const {
    std::uint64_t total = run(0);
    REQUIRE(total > 20);
    MESSAGE(what << " and the flush after it perform " << total << " mutating env operations");
    for (std::uint64_t k = 1; k <= 4 * (total + 2); ++k) run(k);
  }
};

TEST_CASE("node_store: a crash after any env operation of gc loses nothing the kept roots reach") {
  repack_crash c;
  c.options = small_options();
  c.options.target_pack_bytes = 8 << 10;  // gc writes several packs
  std::mt19937_64 rng(99);
  c.ma = random_model(rng, 800, 50'000), c.mb = c.ma;
  model junk = random_model(rng, 200, 50'000);
  {
    memory_nodes scratch;
    prolly_tree t(scratch, small_nodes);
    random_batch(t, must(t.build(entries_of(c.ma))), c.mb, rng, 50'000, 300);
  }
  c.build = [&](node_store&, prolly_tree& t) { return must(t.build(entries_of(c.mb))); };
  c.after_flush = [&](node_store& s) {
    must(prolly_tree(s, small_nodes).build(entries_of(junk)));  // garbage, pending: gc drops it
  };
  c.job = [](node_store& s, const hash128& b, std::optional<std::uint64_t>& position) {
    std::vector<hash128> roots{b};
    auto g = s.gc(roots);
    if (g.is_ok()) position = g->position;
    return g.is_ok();
  };
  c.after_reopen = [](node_store& s, bool ok, bool switched) {
    if (!ok && switched) CHECK(s.recovery().gc_floor_used);
  };
  c.run_all("gc");
}

TEST_CASE("node_store: a crash during open's own repairs loses nothing committed") {
  // The store to recover has a torn, uncommitted tail, uncommitted newer packs
  // and leftovers of a gc; open dies after each of its operations in turn.
  node_store_options o = small_options();
  o.target_pack_bytes = 8 << 10;
  std::mt19937_64 rng(17);
  model ma = random_model(rng, 800, 50'000), mb = ma;
  hash128 a;
  std::uint64_t committed;
  fault_env base;
  {
    auto s = must_open(base, o, std::nullopt);
    prolly_tree t(*s, small_nodes);
    must(t.build(entries_of(random_model(rng, 500, 50'000))));  // garbage
    must(s->flush());
    a = must(t.build(entries_of(ma)));
    std::vector<hash128> roots{a};
    committed = must(s->gc(roots)).position;   // packs older than gc's are left over
    random_batch(t, a, mb, rng, 50'000, 400);  // uncommitted: newer packs
    must(s->flush());
    random_batch(t, a, mb, rng, 50'000, 50);  // and an unflushed tail
  }
  base.crash(fault_env::unsynced::keep);
  // Put back a pack older than the manifest's first, as a gc that died while
  // removing would leave it.
  {
    auto f = must(base.open(path_join(store_dir, pack_file_name(1)), open_mode::create_truncate));
    must_ok(f->append(std::string(100, 'x')));
    must_ok(f->sync());
    must_ok(base.sync_dir(store_dir));
  }
  for (std::uint64_t k = 1;; ++k) {
    CAPTURE(k);
    fault_env fe;
    // A copy of the damaged directory: replay it through the env API.
    for (const auto& name : must(base.list(store_dir))) {
      std::string path = path_join(store_dir, name);
      must_ok(fe.create_dir(store_dir));
      auto f = must(fe.open(path, open_mode::create_truncate));
      must_ok(f->append(*base.contents(path)));
      must_ok(f->sync());
    }
    must_ok(fe.sync_dir(store_dir));
    dying_env de(fe);
    de.arm(k);
    auto s = node_store::open(de, store_dir, o, committed);
    bool finished = s.is_ok() && !de.dead();
    s = result<std::unique_ptr<node_store>>(status::io_error("dropped"));
    fe.crash(crash_modes[k % 4], k);
    auto r = must_open(fe, o, committed);
    check_tree(*r, a, ma);
    CHECK(r->recovery().position == committed);
    if (finished) {
      // The open that ran to the end had all of this to repair.
      CHECK(k > 5);
      break;
    }
    if (k == 1) {
      CHECK(r->recovery().bytes_cut > 0);
      CHECK(r->recovery().packs_removed >= 2);  // a newer one and the leftover
    }
  }
}

TEST_CASE("node_store: after a failed fdatasync the store is fail-stop; reopening recovers") {
  fault_env fe;
  node_store_options o = small_options();
  std::mt19937_64 rng(8);
  model ma = random_model(rng, 1000, 50'000), mb = ma;
  hash128 a, b;
  std::uint64_t committed;
  {
    auto s = must_open(fe, o, std::nullopt);
    prolly_tree t(*s, small_nodes);
    a = must(t.build(entries_of(ma)));
    committed = must(s->flush());
    b = random_batch(t, a, mb, rng, 50'000, 300);
    fe.fail_sync(1);
    auto f = s->flush();
    REQUIRE_FALSE(f.is_ok());
    CHECK(f.error().code() == status_code::io_error);
    CHECK(f.error().category() == status_category::ambiguous);
    CHECK(f.error().message().find(".pack") != std::string::npos);
    // Stopped: no write, flush or gc is attempted any more.
    auto w = s->write(leaf_of({{"x", "y"}}));
    REQUIRE_FALSE(w.is_ok());
    CHECK(w.error().code() == status_code::failed);
    CHECK(w.error().category() == status_category::permanent);
    CHECK(s->flush().error().code() == status_code::failed);
    std::vector<hash128> roots{a};
    CHECK(s->gc(roots).error().code() == status_code::failed);
    CHECK(s->failure().code() == status_code::io_error);
    // Reads still work.
    check_tree(*s, a, ma);
  }
  fe.crash(fault_env::unsynced::random, 3);
  auto s = must_open(fe, o, committed);
  check_tree(*s, a, ma);
  prolly_tree t(*s, small_nodes);
  model mc = ma;
  hash128 c = random_batch(t, a, mc, rng, 50'000, 300);
  std::uint64_t p = must(s->flush());
  s.reset();
  s = must_open(fe, o, p);
  check_tree(*s, c, mc);
}

TEST_CASE("node_store: a failed write (ENOSPC) stops the store; what was committed survives") {
  fault_env fe;
  node_store_options o = small_options();
  o.write_buffer_bytes = 1024;
  std::mt19937_64 rng(9);
  model ma = random_model(rng, 1000, 50'000), mb = ma;
  hash128 a;
  std::uint64_t committed;
  {
    auto s = must_open(fe, o, std::nullopt);
    prolly_tree t(*s, small_nodes);
    a = must(t.build(entries_of(ma)));
    committed = must(s->flush());
    fe.fail_write(2, status_code::no_space, 100);
    std::vector<edit> edits;
    for (int i = 0; i < 400; ++i) edits.push_back({key_of(100'000 + i), std::string(100, 'z')});
    auto r = t.apply(a, edits);
    REQUIRE_FALSE(r.is_ok());
    CHECK(r.error().code() == status_code::no_space);
    CHECK(s->flush().error().code() == status_code::failed);
  }
  fe.clear_faults();
  fe.crash(fault_env::unsynced::keep);
  auto s = must_open(fe, o, committed);
  check_tree(*s, a, ma);
}

TEST_CASE("node_store: committed bytes that are missing are corruption naming the file; nothing is modified") {
  fault_env fe;
  node_store_options o = small_options();
  std::mt19937_64 rng(12);
  model m = random_model(rng, 3000, 100'000);
  std::uint64_t position;
  {
    auto s = must_open(fe, o, std::nullopt);
    must(prolly_tree(*s, small_nodes).build(entries_of(m)));
    position = must(s->flush());
  }
  REQUIRE(position_pack(position) >= 3);
  std::string p2 = path_join(store_dir, pack_file_name(2));
  std::string saved = *fe.contents(p2);
  must_ok(fe.remove(p2));
  auto s = node_store::open(fe, store_dir, o, position);
  REQUIRE_FALSE(s.is_ok());
  CHECK(s.error().code() == status_code::corruption);
  CHECK(s.error().message().find(pack_file_name(2)) != std::string::npos);
  CHECK(file_exists(fe, path_join(store_dir, pack_file_name(position_pack(position)))));  // nothing removed

  // A committed position past the end of the pack.
  auto f = must(fe.open(p2, open_mode::create_new));
  must_ok(f->append(saved));
  s = node_store::open(fe, store_dir, o, position + 1000);
  REQUIRE_FALSE(s.is_ok());
  CHECK(s.error().code() == status_code::corruption);
  CHECK(s.error().message().find(pack_file_name(position_pack(position))) != std::string::npos);
  // A committed position in the middle of a record (with the index gone, the
  // scan meets it).
  must_ok(fe.remove(path_join(store_dir, pack_index_file_name(position_pack(position)))));
  s = node_store::open(fe, store_dir, o, position - 1);
  REQUIRE_FALSE(s.is_ok());
  CHECK(s.error().code() == status_code::corruption);
  CHECK(s.error().message().find("offset") != std::string::npos);
  CHECK(node_store::open(fe, store_dir, o, position).is_ok());
}

TEST_CASE("node_store: random workload of writes, flushes, gcs and crashes never loses a committed root") {
  int crashes = 0, gcs = 0;
  for (std::uint64_t seed = 0; seed < 30; ++seed) {
    CAPTURE(seed);
    fault_env fe;
    std::mt19937_64 rng(seed);
    node_store_options o = small_options();
    o.target_pack_bytes = 8 << 10;
    o.codec = static_cast<node_codec>(seed % 3);  // none, LZ4, zstd
    std::optional<std::uint64_t> committed;
    model committed_model;
    hash128 committed_root;
    auto s = must_open(fe, o, committed);
    hash128 root = must(prolly_tree(*s, small_nodes).empty_root());
    committed_root = root;
    committed = must(s->flush());
    model m;
    for (int step = 0; step < 40; ++step) {
      prolly_tree t(*s, small_nodes);
      root = random_batch(t, root, m, rng, 20'000, 1 + static_cast<int>(rng() % 200));
      switch (rng() % 6) {
        case 0:
        case 1: {  // flush and commit
          committed = must(s->flush());
          committed_root = root;
          committed_model = m;
          break;
        }
        case 2:  // flush, no commit
          must(s->flush());
          break;
        case 3: {  // gc keeping the committed root and the current one
          std::vector<hash128> roots{committed_root, root};
          auto g = must(s->gc(roots));
          ++gcs;
          if (rng() % 2) committed = g.position;  // recorded (same root)
          break;
        }
        case 4: {  // crash
          s.reset();
          fe.crash(crash_modes[rng() % 4], rng());
          ++crashes;
          s = must_open(fe, o, committed);
          check_tree(*s, committed_root, committed_model);
          root = committed_root;
          m = committed_model;
          break;
        }
        default:
          break;
      }
    }
    s.reset();
    fe.crash(fault_env::unsynced::random, seed);
    s = must_open(fe, o, committed);
    check_tree(*s, committed_root, committed_model);
  }
  CHECK(crashes > 30);
  CHECK(gcs > 30);
}

TEST_CASE("node_store: on the POSIX env, flush, reopen, gc and reopen again") {
  testing::temp_dir dir("nodestore");
  std::string path = dir / "nodes";
  node_store_options o = small_options();
  std::mt19937_64 rng(77);
  model ma = random_model(rng, 5000, 100'000), mb = ma;
  hash128 a, b;
  std::uint64_t p1, p2;
  {
    auto s = must_open(env::posix(), o, std::nullopt, path);
    prolly_tree t(*s, small_nodes);
    a = must(t.build(entries_of(ma)));
    p1 = must(s->flush());
    // A second handle on the same directory is refused.
    auto second = node_store::open(env::posix(), path, o, p1);
    REQUIRE_FALSE(second.is_ok());
    CHECK(second.error().code() == status_code::busy);
  }
  {
    auto s = must_open(env::posix(), o, p1, path);
    CHECK(s->recovery().bytes_scanned == 0);
    check_tree(*s, a, ma);
    prolly_tree t(*s, small_nodes);
    b = random_batch(t, a, mb, rng, 100'000, 2000);
    must(s->flush());
    std::vector<hash128> roots{b};
    auto g = must(s->gc(roots));
    CHECK(g.bytes_reclaimed > 0);
    p2 = g.position;
    check_tree(*s, b, mb);
  }
  auto s = must_open(env::posix(), o, p2, path);
  check_tree(*s, b, mb);
  CHECK(s->recovery().bytes_scanned == 0);
  CHECK(s->recovery().packs_removed == 0);
}

TEST_CASE("node_store: a retired store frees its directory and keeps reading what it held, never wrong bytes") {
  // The views of a crashed shard may outlive it: the store they read must
  // let the restarted shard open the directory, cut it, write and gc it.
  // With mapped packs the cut pack was sealed and mapped in the old store:
  // reading what was cut through the mapping would end the process
  // (SIGBUS), so retire() drops the mappings.
  for (bool mapped : {false, true}) {
    CAPTURE(mapped);
    testing::temp_dir dir("noderetire");
    std::string path = dir / "nodes";
    node_store_options o = small_options();
    o.map_packs = mapped;
    // One pack: the new store cuts and rewrites the bytes the old one read.
    // Mapped: small packs, so that the one the cut lands in is sealed.
    o.target_pack_bytes = mapped ? 16 << 10 : 64 << 20;
    if (mapped) {
      o.cache_bytes = 1;  // every read of the old store after the cut goes to its packs
      o.record_cache_share = 0;
    }
    std::mt19937_64 rng(57);
    model ma = random_model(rng, 3000, 100'000), mx = ma, mc = ma;
    auto old = must_open(env::posix(), o, std::nullopt, path);
    prolly_tree t(*old, small_nodes);
    hash128 a = must(t.build(entries_of(ma)));
    std::uint64_t p1 = must(old->flush());
    hash128 x = random_batch(t, a, mx, rng, 100'000, 800);
    must(old->flush());  // flushed, never committed: the next open cuts it
    std::set<hash128> only_x;
    auto in_a = reachable(*old, a);
    for (auto h : reachable(*old, x))
      if (!in_a.count(h)) only_x.insert(h);
    REQUIRE_FALSE(only_x.empty());

    CHECK(node_store::open(env::posix(), path, o, p1).error().code() == status_code::busy);
    old->retire();
    auto fresh = must_open(env::posix(), o, p1, path);
    CHECK(fresh->recovery().bytes_cut > 0);
    // Right after the cut, before anything is written where the cut bytes
    // were: what the old store reads there is gone (an error), or the node.
    for (auto h : only_x) {
      auto r = old->read(h);
      if (r.is_ok()) CHECK(hash128::of(r.value()->encode()) == h);
    }
    prolly_tree tf(*fresh, small_nodes);
    hash128 c = random_batch(tf, a, mc, rng, 100'000, 800);
    must(fresh->flush());
    std::vector<hash128> keep{c};
    CHECK(must(fresh->gc(keep)).packs_removed > 0);  // the pack the old store has open is gone

    check_tree(*old, a, ma);
    std::size_t refused = 0;
    for (auto h : only_x) {
      auto r = old->read(h);
      if (r.is_ok())
        CHECK(hash128::of(r.value()->encode()) == h);
      else
        ++refused;
    }
    if (!mapped) CHECK(refused > 0);  // the cut bytes were written again with other records
    if (mapped) CHECK(old->stats().mapped_reads > 0);
    CHECK(old->write(leaf_of({{"k", "v"}})).error().code() == status_code::failed);
    CHECK(old->flush().error().code() == status_code::failed);
    check_tree(*fresh, c, mc);
  }
}

TEST_CASE("node_store: on the POSIX env, sealed packs are read through mappings, checked as pread reads are") {
  for (bool searchable : {false, true}) {
    CAPTURE(searchable);
    testing::temp_dir dir("nodemap");
    std::string path = dir / "nodes";
    node_store_options o = small_options();  // 16 KiB packs: most are sealed
    o.searchable_leaves = searchable;
    o.map_packs = true;
    o.cache_bytes = 1;  // nothing is cached: every read goes to a pack
    o.record_cache_share = 0;
    std::mt19937_64 rng(91);
    model m = random_model(rng, 4000, 100'000);
    committed_tree c;
    {
      auto w = must_open(env::posix(), o, std::nullopt, path);
      c.root = must(prolly_tree(*w, small_nodes).build(entries_of(m)));
      c.position = must(w->flush());
    }
    auto s = must_open(env::posix(), o, c.position, path);
    check_tree(*s, c.root, m);
    auto st = s->stats();
    CHECK(st.mapped_reads > 0);
    CHECK(st.mapped_reads < st.record_reads);  // the active pack is read by pread
    CHECK(st.leaf_lookups == m.size());
    // A byte flipped in a mapped record shows through the mapping and is
    // caught as corruption naming the record; put back, it reads again.
    hash128 victim;
    node_location loc;
    for (auto h : reachable(*s, c.root)) {
      auto l = s->locate(h);
      if (l && l->pack == 1) {
        victim = h;
        loc = *l;
        break;
      }
    }
    REQUIRE(loc.pack == 1);
    std::string pack1 = s->pack_path(1);
    auto flip = [&] {
      std::fstream f(pack1, std::ios::in | std::ios::out | std::ios::binary);
      f.seekg(static_cast<std::streamoff>(loc.offset + loc.length - 1));
      char ch = 0;
      f.read(&ch, 1);
      ch = static_cast<char>(ch ^ 0x10);
      f.seekp(static_cast<std::streamoff>(loc.offset + loc.length - 1));
      f.write(&ch, 1);
    };
    std::uint64_t mapped_before = s->stats().mapped_reads;
    flip();
    auto r = s->read(victim);
    REQUIRE_FALSE(r.is_ok());
    CHECK(r.error().code() == status_code::corruption);
    CHECK(r.error().message().find(pack1) != std::string::npos);
    CHECK(s->stats().mapped_reads > mapped_before);
    flip();
    CHECK(must(s->read(victim))->encode().size() > 0);
    if (!searchable) continue;
    // A get searches a mapped leaf where it lies without hashing all of it:
    // a byte flipped in an entry's value is found by the sum of the entry
    // the search ends on, never returned; a get that does not read that
    // entry answers; a read of the whole node finds it by the hash.
    hash128 leaf;
    node_ptr before;
    for (auto h : reachable(*s, c.root)) {
      auto l = s->locate(h);
      if (!l || l->pack != 1) continue;
      auto n = must(s->read(h));
      if (n->is_leaf() && n->entries().size() >= 4 && !n->entries().back().value.empty()) {
        leaf = h, loc = *l, before = n;
        break;
      }
    }
    REQUIRE(before);
    // The last entry: every search probes the middle first, and a get of
    // the first key never reaches the last.
    auto entries = before->entries();
    const std::size_t j = entries.size() - 1;
    std::size_t value_at = entries[j].value.data() - before->encode().data();
    auto flip_value = [&] {
      std::fstream f(pack1, std::ios::in | std::ios::out | std::ios::binary);
      auto at = static_cast<std::streamoff>(loc.offset + record_header_size + value_at);
      f.seekg(at);
      char ch = 0;
      f.read(&ch, 1);
      ch = static_cast<char>(ch ^ 0x01);
      f.seekp(at);
      f.write(&ch, 1);
    };
    flip_value();
    std::string value;
    auto damaged = s->leaf_get(leaf, entries[j].key, value);
    REQUIRE_FALSE(damaged.is_ok());
    CHECK(damaged.error().code() == status_code::corruption);
    CHECK(damaged.error().message().find("does not match its sum") != std::string::npos);
    std::size_t answered = 0;
    for (std::size_t i = 0; i < entries.size(); ++i) {
      if (i == j) continue;
      auto got = s->leaf_get(leaf, entries[i].key, value);
      if (!got.is_ok()) continue;  // its search passed through entry j
      CHECK(*got);
      CHECK(value == entries[i].value);
      ++answered;
    }
    CHECK(answered > 0);
    auto whole = s->read(leaf);
    REQUIRE_FALSE(whole.is_ok());
    CHECK(whole.error().message().find("does not match its hash") != std::string::npos);
    flip_value();
    REQUIRE(must(s->leaf_get(leaf, entries[j].key, value)));
    CHECK(value == entries[j].value);
  }
}

TEST_CASE("node_store: copy_out and copy_in move records between stores as stored; a copy that lies is refused") {
  fault_env fe;
  node_store_options o = small_options();
  std::mt19937_64 rng(31);
  model m = random_model(rng, 2000, 100'000);
  auto from = must_open(fe, o, std::nullopt, "/from");
  prolly_tree t(*from, small_nodes);
  hash128 root = must(t.build(entries_of(m)));
  must(from->flush());
  auto to = must_open(fe, o, std::nullopt, "/to");
  // Every node, children first: the copies read back as the tree.
  std::vector<hash128> order;
  for (auto h : reachable(*from, root)) order.push_back(h);
  const auto written_before = to->stats().pack_bytes_written;
  for (auto h : order) {
    auto r = from->copy_out(h);
    REQUIRE(r.is_ok());
    CHECK(hash128::of(r->raw) == h);
    must_ok(to->copy_in(*r));
    must_ok(to->copy_in(*r));  // again: deduplicated
  }
  must(to->flush());
  check_tree(*to, root, m);
  CHECK(to->stats().nodes_written == order.size());
  // As stored: the same record bytes.
  for (auto h : order) CHECK(must(to->copy_out(h)).payload == must(from->copy_out(h)).payload);
  CHECK(to->stats().pack_bytes_written > written_before);

  auto liar = must(from->copy_out(root));
  liar.raw[liar.raw.size() / 2] ^= 1;
  CHECK(to->copy_in(liar).code() == status_code::corruption);
  liar.raw.pop_back();
  CHECK(to->copy_in(liar).code() == status_code::invalid_argument);
  CHECK(from->copy_out(hash128::of(std::string_view("not stored"))).error().code() == status_code::not_found);
}

TEST_CASE("node_store: searchable leaves are searched where they lie; copies take the form their store writes") {
  fault_env fe;
  node_store_options searchable = small_options();
  searchable.searchable_leaves = true;
  searchable.cache_bytes = 8 << 20;  // everything fits: what is cached shows how it was read
  node_store_options compressed = searchable;
  compressed.searchable_leaves = false;
  std::mt19937_64 rng(41);
  model m = random_model(rng, 3000, 100'000);
  committed_tree c = commit_tree(fe, searchable, m);

  std::size_t internal = 0, leaves = 0;
  {
    auto s = must_open(fe, searchable, c.position);
    for (const auto& h : reachable(*s, c.root)) (must(s->read(h))->is_leaf() ? leaves : internal)++;
  }
  REQUIRE(leaves > 10);
  {
    // Cold: each get reads its leaf's record once and keeps it as stored;
    // no leaf is decoded into the node cache.
    auto s = must_open(fe, searchable, c.position);
    prolly_tree t(*s, small_nodes);
    for (int round = 0; round < 3; ++round)
      for (const auto& [k, v] : m) REQUIRE(must(t.get(c.root, k)) == v);
    for (const std::string& k : {std::string("absent"), key_of(100'001)}) CHECK_FALSE(must(t.get(c.root, k)));
    auto st = s->stats();
    CHECK(st.record_cache_entries == leaves);
    CHECK(st.cache_entries <= internal);
    CHECK(s->check(std::vector<hash128>{c.root}).problems.empty());
  }
  // A store that writes compressed leaves reads the searchable ones.
  auto s = must_open(fe, compressed, c.position);
  check_tree(*s, c.root, m);
  // Copies: into a store writing compressed leaves they are compressed, and
  // back into one writing searchable leaves they are searchable again.
  auto to = must_open(fe, compressed, std::nullopt, "/to");
  auto back = must_open(fe, searchable, std::nullopt, "/back");
  std::vector<hash128> order;  // children before parents, as copy_in wants
  for (auto h : reachable(*s, c.root)) order.push_back(h);
  std::sort(order.begin(), order.end(),
            [&](const hash128& a, const hash128& b) { return must(s->read(a))->level() < must(s->read(b))->level(); });
  for (auto h : order) must_ok(to->copy_in(must(s->copy_out(h))));
  for (auto h : order) must_ok(back->copy_in(must(to->copy_out(h))));
  must(to->flush());
  must(back->flush());
  check_tree(*to, c.root, m);
  check_tree(*back, c.root, m);
  for (auto h : order) {
    bool leaf = must(s->read(h))->is_leaf();
    auto in_to = must(to->copy_out(h)), in_back = must(back->copy_out(h));
    CHECK((in_to.flags & searchable_flags) == 0);
    CHECK(static_cast<bool>(in_back.flags & flag_searchable_summed) == leaf);
    if (leaf) CHECK(in_back.payload == must(s->copy_out(h)).payload);
  }
}

TEST_CASE("node_store: on the POSIX env, writes after open cut an uncommitted tail land where the index says") {
  // open() truncates the active pack; the next records must go to the new end
  // (a descriptor offset left at the old end once wrote them past a zero hole).
  testing::temp_dir dir("nodecut");
  std::string path = dir / "nodes";
  node_store_options o = small_options();
  o.target_pack_bytes = 64 << 20;  // everything in one pack
  std::mt19937_64 rng(91);
  model ma = random_model(rng, 2000, 100'000), mb = ma, mc;
  hash128 a, c;
  std::uint64_t p1;
  {
    auto s = must_open(env::posix(), o, std::nullopt, path);
    prolly_tree t(*s, small_nodes);
    a = must(t.build(entries_of(ma)));
    p1 = must(s->flush());
    random_batch(t, a, mb, rng, 100'000, 500);
    must(s->flush());  // flushed but never committed: cut at the next open
  }
  std::uint64_t p3;
  {
    auto s = must_open(env::posix(), o, p1, path);
    CHECK(s->recovery().bytes_cut > 0);
    prolly_tree t(*s, small_nodes);
    mc = ma;
    c = random_batch(t, a, mc, rng, 100'000, 500);
    p3 = must(s->flush());
    check_tree(*s, c, mc);
  }
  auto s = must_open(env::posix(), o, p3, path);
  CHECK(s->recovery().bytes_cut == 0);
  check_tree(*s, c, mc);
  check_tree(*s, a, ma);
}

TEST_CASE("node_store: after gc drops a root, reading it is not_found, even on a thread that read it before") {
  fault_env fe;
  std::mt19937_64 rng(12);
  model m1 = random_model(rng, 3000, 100'000), m2 = m1;
  auto s = must_open(fe, small_options(), std::nullopt);
  prolly_tree t(*s, small_nodes);
  hash128 r1 = must(t.build(entries_of(m1)));
  hash128 r2 = random_batch(t, r1, m2, rng, 100'000, 3000);
  must(s->flush());
  REQUIRE(t.depth(r1).value() >= 2);
  CHECK(t.count(r1).value() == m1.size());  // its upper nodes are now cached by this thread
  std::vector<hash128> keep{r2};
  must(s->gc(keep));
  CHECK(t.count(r1).error().code() == status_code::not_found);
  check_tree(*s, r2, m2);
}

TEST_CASE("node_store: a cold point read counts one cache miss per node it loads") {
  fault_env fe;
  node_store_options o = small_options();
  o.cache_bytes = 64u << 20;
  std::mt19937_64 rng(8);
  model m = random_model(rng, 2000, 100'000);
  auto [root, position] = commit_tree(fe, o, m);
  auto s = must_open(fe, o, position);
  prolly_tree t(*s, small_nodes);
  for (auto& [k, v] : m) {
    auto before = s->stats();
    CHECK(must(t.get(root, k)) == v);
    auto after = s->stats();
    // Each node loaded from a pack is cached once, decoded or as its record:
    // misses and new entries agree.
    CHECK(after.cache_misses - before.cache_misses ==
          after.cache_entries + after.record_cache_entries - before.cache_entries - before.record_cache_entries);
  }
}

TEST_CASE("node_store: check reads every reachable node from disk, past the cache, and names damage") {
  fault_env fe;
  node_store_options o = small_options();
  o.cache_bytes = 64 << 20;  // everything cached: check must still read the packs
  std::mt19937_64 rng(11);
  model m = random_model(rng, 3000, 100000);
  auto s = must_open(fe, o, std::nullopt);
  prolly_tree t(*s, small_nodes);
  hash128 root = must(t.build(entries_of(m)));
  model m2 = m;
  hash128 root2 = random_batch(t, root, m2, rng, 100000, 50);
  must(s->flush());
  auto all = reachable(*s, root);
  auto all2 = reachable(*s, root2);
  std::set<hash128> both = all;
  both.insert(all2.begin(), all2.end());
  check_tree(*s, root, m);  // warms the cache

  auto clean = s->check(std::vector<hash128>{root, root2});
  CHECK(clean.problems.empty());
  CHECK(clean.nodes == both.size());
  CHECK(clean.bytes > 0);
  CHECK(must(s->pack_bytes()) >= clean.bytes);

  // A flipped bit inside one node's record: found though the node is cached,
  // named with its pack and offset, and its subtree is not walked.
  hash128 victim = *std::next(all.begin(), static_cast<long>(all.size() / 2));
  auto loc = s->locate(victim);
  REQUIRE(loc);
  std::string path = s->pack_path(loc->pack);
  REQUIRE(fe.flip_bit(path, loc->offset + loc->length - 3, 2));
  auto damaged = s->check(std::vector<hash128>{root});
  REQUIRE(damaged.problems.size() == 1);
  CHECK(damaged.problems[0].find(victim.to_hex()) != std::string::npos);
  CHECK(damaged.problems[0].find(fmt::format("{}, offset {}", path, loc->offset)) != std::string::npos);
  CHECK(damaged.nodes < all.size());
  REQUIRE(fe.flip_bit(path, loc->offset + loc->length - 3, 2));

  // A root the store does not hold is reported as missing; max_problems bounds the list.
  hash128 stranger = hash128::of(std::string_view("not a node"));
  auto missing = s->check(std::vector<hash128>{stranger, root});
  REQUIRE(missing.problems.size() == 1);
  CHECK(missing.problems[0].find("root node " + stranger.to_hex() + " is not stored") != std::string::npos);
  CHECK(missing.nodes == all.size());
  std::vector<hash128> strangers;
  for (int i = 0; i < 10; ++i) strangers.push_back(hash128::of(fmt::format("stranger {}", i)));
  CHECK(s->check(strangers, 3).problems.size() == 3);
}

TEST_CASE("node_store: check reads the MANIFEST again and reports damage done to it after open") {
  fault_env fe;
  node_store_options o = small_options();
  std::mt19937_64 rng(12);
  model m = random_model(rng, 500, 100000);
  auto s = must_open(fe, o, std::nullopt);
  prolly_tree t(*s, small_nodes);
  hash128 root = must(t.build(entries_of(m)));
  must(s->flush());
  std::vector<hash128> roots{root};
  CHECK(s->check(roots).problems.empty());  // no MANIFEST before the first gc: none expected
  must(s->gc(roots));
  CHECK(s->check(roots).problems.empty());
  std::string manifest = std::string(store_dir) + "/MANIFEST";
  REQUIRE(fe.contents(manifest));

  REQUIRE(fe.flip_bit(manifest, 17, 1));  // inside its header's first-pack field
  auto damaged = s->check(roots);
  REQUIRE(damaged.problems.size() == 1);
  CHECK(damaged.problems[0].find(manifest) != std::string::npos);
  REQUIRE(fe.flip_bit(manifest, 17, 1));
  CHECK(s->check(roots).problems.empty());

  REQUIRE(fe.remove(manifest).is_ok());
  auto missing = s->check(roots);
  REQUIRE(missing.problems.size() == 1);
  CHECK(missing.problems[0].find(manifest + ": missing") != std::string::npos);
  check_tree(*s, root, m);  // the open store still reads everything
}

// ---- incremental reclamation -------------------------------------------------------

namespace {

// Runs the cycle begun on s to its end in steps of `budget` bytes; the steps.
std::size_t reclaim_all(node_store& s, std::size_t budget) {
  std::size_t steps = 0;
  while (true) {
    ++steps;
    REQUIRE(steps < 1'000'000);
    if (must(s.reclaim_step(budget))) return steps;
  }
}

// Every record of every live pack, summed: what the store takes on disk.
std::uint64_t pack_total(node_store& s) { return must(s.pack_bytes()); }

}  // namespace

TEST_CASE("node_store: reclamation keeps what the roots reach, drops the rest, and bounds the space") {
  fault_env fe;
  node_store_options o = small_options();
  std::mt19937_64 rng(31);
  model ma = random_model(rng, 3000, 100'000), mb = ma;
  hash128 a, b;
  std::uint64_t committed = 0;
  std::set<hash128> only_a;
  reclaim_stats rs;
  {
    auto s = must_open(fe, o, std::nullopt);
    prolly_tree t(*s, small_nodes);
    a = must(t.build(entries_of(ma)));
    must(s->flush());
    b = a;
    for (int i = 0; i < 10; ++i) {
      b = random_batch(t, b, mb, rng, 100'000, 400);
      committed = must(s->flush());
    }
    auto in_b = reachable(*s, b);
    for (auto h : reachable(*s, a))
      if (!in_b.count(h)) only_a.insert(h);
    REQUIRE_FALSE(only_a.empty());
    CHECK(s->reclaim_due(1.5, 0));  // no cycle yet: due past the minimum
    CHECK_FALSE(s->reclaim_due(1.5, pack_total(*s) + 1));
    std::uint64_t before = pack_total(*s);

    std::vector<hash128> roots{b};
    must_ok(s->begin_reclaim(roots, 1.5));
    CHECK(s->reclaiming());
    std::size_t steps = reclaim_all(*s, 4 << 10);
    CHECK(steps > 10);  // small budgets really do split the work
    CHECK_FALSE(s->reclaiming());
    rs = s->reclamation();
    REQUIRE(rs.live_bytes);
    std::uint64_t after = pack_total(*s);
    CAPTURE(before);
    CAPTURE(after);
    CAPTURE(*rs.live_bytes);
    CHECK(rs.cycles == 1);
    CHECK(rs.packs_dropped > 0);
    CHECK(rs.bytes_reclaimed > 0);
    CHECK(after < before);
    // Reclaimed: the victims less what was copied out of them (the headers of
    // the packs the copies went to aside).
    CHECK(before - after <= rs.bytes_reclaimed);
    CHECK(before - after + 40 * 16 >= rs.bytes_reclaimed);
    // The space amplification is within the policy, and the live bytes the
    // cycle found are what the kept root's records take (and pack headers).
    CHECK(static_cast<double>(after) <= 1.5 * static_cast<double>(*rs.live_bytes));
    std::uint64_t records = 0;
    for (auto h : reachable(*s, b)) records += s->locate(h)->length;
    CHECK(*rs.live_bytes >= records);
    CHECK_FALSE(s->reclaim_due(1.5, 0));
    check_tree(*s, b, mb);
    for (auto h : only_a) CHECK_FALSE(s->contains(h));
    CHECK(file_exists(fe, path_join(store_dir, manifest_file_name)));
    // The store goes on: writes, flushes, and a nodes dropped can come back.
    a = must(t.build(entries_of(ma)));
    committed = must(s->flush());
    check_tree(*s, a, ma);
  }
  // Reopened (cleanly, then after a power cut) with the owner's last position.
  for (int round = 0; round < 2; ++round) {
    if (round) fe.crash(fault_env::unsynced::lose);
    auto s = must_open(fe, o, committed);
    check_tree(*s, a, ma);
    check_tree(*s, b, mb);
    CHECK(s->check(std::vector<hash128>{a, b}).problems.empty());
  }
}

TEST_CASE("node_store: nodes a tree needs again during a cycle are kept, whatever the phase") {
  // Tree a is garbage when the cycle begins (only b is kept). At step k of the
  // cycle a is built again: every node it shares with its old self is found
  // stored (deduplicated) in a pack the cycle may drop. The write barrier must
  // keep each of them, in marking, after the victims are chosen, or while
  // copying; without it a's tree comes back with holes.
  node_store_options o = small_options();
  std::mt19937_64 rng(32);
  model ma = random_model(rng, 1500, 100'000), mb;
  for (const auto& [k, v] : random_model(rng, 1500, 100'000)) mb[k + "b"] = v;
  std::size_t total_steps = 0;
  for (std::size_t k = 0;; ++k) {
    CAPTURE(k);
    fault_env fe;
    auto s = must_open(fe, o, std::nullopt);
    prolly_tree t(*s, small_nodes);
    must(t.build(entries_of(ma)));
    must(s->flush());
    hash128 b = must(t.build(entries_of(mb)));
    must(s->flush());
    std::vector<hash128> roots{b};
    must_ok(s->begin_reclaim(roots, 1.1));
    std::size_t steps = 0;
    bool done = false;
    for (; steps < k && !done; ++steps) done = must(s->reclaim_step(2 << 10));
    hash128 a = must(t.build(entries_of(ma)));  // during the cycle (or just after it)
    if (!done) steps += reclaim_all(*s, 2 << 10);
    std::uint64_t p = must(s->flush());
    check_tree(*s, a, ma);
    check_tree(*s, b, mb);
    s.reset();
    fe.crash(fault_env::unsynced::lose);
    s = must_open(fe, o, p);
    check_tree(*s, a, ma);
    if (k == 0) {
      total_steps = steps;
      REQUIRE(total_steps > 5);
      REQUIRE(s->reclamation().cycles == 0);  // reopened: counters start again
    }
    if (k > total_steps + 1) break;
  }
}

TEST_CASE("node_store: a crash after any env operation of a reclamation cycle loses nothing the roots reach") {
  repack_crash c;
  c.options = small_options();
  c.options.target_pack_bytes = 8 << 10;
  std::mt19937_64 rng(33);
  c.ma = random_model(rng, 800, 50'000), c.mb = c.ma;
  std::vector<model> rounds;
  {
    memory_nodes scratch;
    prolly_tree t(scratch, small_nodes);
    hash128 r = must(t.build(entries_of(c.ma)));
    for (int i = 0; i < 4; ++i) {
      r = random_batch(t, r, c.mb, rng, 50'000, 200);
      rounds.push_back(c.mb);
    }
  }
  c.build = [&](node_store&, prolly_tree& t) {
    hash128 b;
    for (const auto& m : rounds) b = must(t.build(entries_of(m)));
    return b;
  };
  c.job = [](node_store& s, const hash128& b, std::optional<std::uint64_t>&) {
    std::vector<hash128> roots{b};
    if (!s.begin_reclaim(roots, 1.2).is_ok()) return false;
    for (;;) {
      auto r = s.reclaim_step(1 << 10);
      if (!r) return false;
      if (*r) return true;
    }
  };
  c.more = [](node_store& s, const hash128& root) {  // a new cycle included
    std::vector<hash128> roots{root};
    must_ok(s.begin_reclaim(roots, 1.2));
    reclaim_all(s, 64 << 10);
  };
  c.run_all("a reclamation cycle");
}

TEST_CASE("node_store: a damaged dropped-pack list in the manifest is corruption; nothing is modified") {
  fault_env fe;
  node_store_options o = small_options();
  std::mt19937_64 rng(34);
  model ma = random_model(rng, 2000, 100'000), mb = ma;
  std::uint64_t committed;
  hash128 b;
  {
    auto s = must_open(fe, o, std::nullopt);
    prolly_tree t(*s, small_nodes);
    b = must(t.build(entries_of(ma)));
    for (int i = 0; i < 6; ++i) b = random_batch(t, b, mb, rng, 100'000, 400);
    must(s->flush());
    std::vector<hash128> roots{b};
    must_ok(s->begin_reclaim(roots, 1.5));
    reclaim_all(*s, 1 << 20);
    committed = must(s->flush());
  }
  std::string path = path_join(store_dir, manifest_file_name);
  auto bytes = fe.contents(path);
  REQUIRE(bytes);
  REQUIRE(bytes->size() > 48);  // the header and a list: version 2
  for (std::size_t at : {std::size_t{8}, std::size_t{40}, std::size_t{44}, bytes->size() - 1}) {
    CAPTURE(at);
    REQUIRE(fe.flip_bit(path, at, 4));
    auto s = node_store::open(fe, store_dir, o, committed);
    REQUIRE_FALSE(s.is_ok());
    CHECK((s.error().code() == status_code::corruption || s.error().code() == status_code::not_supported));
    CHECK(s.error().message().find("MANIFEST") != std::string::npos);
    REQUIRE(fe.flip_bit(path, at, 4));
  }
  auto s = must_open(fe, o, committed);
  check_tree(*s, b, mb);
}
