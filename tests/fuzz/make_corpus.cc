// make_corpus: writes the seed corpus of every fuzz target (tests/fuzz/corpus/),
// valid inputs made by the library's own writers and encoders, plus a few
// damaged ones. Its output is kept in the tree; run it again only to renew the
// seeds after a format change (docs/fuzzing.md):
//
//   ninja -C build tests/fuzz/fuzz_make_corpus && build/tests/fuzz/fuzz_make_corpus tests/fuzz/corpus
//
// Salts are random, so each run writes other bytes with the same meaning.
// Targets named after the directory get their seeds alone:
//
//   build/tests/fuzz/fuzz_make_corpus tests/fuzz/corpus frame_guard basp_payload
#include "actors/caf_headers.h"  // before any other CAF header

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "core/coding.h"
#include "core/fault_env.h"
#include "engine/checkpoint_log.h"
#include "replication/frame_guard.h"
#include "replication/node.h"
#include "replication/replica_interface.h"
#include "tree/node.h"
#include "tree/node_store.h"
#include "ttl/envelope.h"
#include "wal/frame.h"
#include "wal/log_writer.h"
#include "wal/record.h"
#include "wal/recovery.h"

using namespace magnetite;
namespace fs = std::filesystem;

namespace {

fs::path out_dir;
std::set<std::string> only;  // empty: every target
int written = 0;

void must(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "make_corpus: %s failed\n", what);
    std::exit(1);
  }
}
#define MUST(x) must(static_cast<bool>(x), #x)

void seed(const std::string& target, const std::string& name, std::string_view bytes) {
  if (!only.empty() && !only.count(target)) return;
  fs::create_directories(out_dir / target);
  std::ofstream f(out_dir / target / name, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  MUST(f.good());
  ++written;
}

std::string u64le(std::uint64_t v) {
  std::string s;
  put_fixed64_le(s, v);
  return s;
}

// Every file of `dir` whose name passes `keep`, concatenated in name order.
std::string concat(fault_env& e, const std::string& dir, bool (*keep)(const std::string&)) {
  auto names = e.list(dir);
  MUST(names.is_ok());
  std::string out;
  for (const auto& n : *names)
    if (keep(n)) out += *e.contents(path_join(dir, n));
  return out;
}

bool is_segment(const std::string& n) { return wal::parse_segment_file_name(n).has_value(); }

// ---- WAL -----------------------------------------------------------------------------

struct wal_log {
  fault_env env;
  std::unique_ptr<wal::log_writer> w;
  explicit wal_log(std::uint64_t preallocate = 0, wal::fsync_policy policy = wal::fsync_policy::always) {
    MUST(env.create_dir("/wal").is_ok());
    auto r = wal::recover(env, "/wal");
    MUST(r.is_ok());
    wal::writer_options o;
    o.preallocate = preallocate;
    o.policy = policy;
    auto w0 = wal::log_writer::open(env, "/wal", o, *r);
    MUST(w0.is_ok());
    w = std::move(*w0);
  }
  void puts(int from, int n) {
    for (int i = from; i < from + n; ++i) {
      MUST(w->append_put("key/" + std::to_string(i), "value-" + std::to_string(i)).is_ok());
      MUST(w->sync().is_ok());
    }
  }
  std::string segments() { return concat(env, "/wal", is_segment); }
  std::string segment(std::uint64_t n) { return *env.contents(path_join("/wal", wal::segment_file_name(n))); }
};

std::string recovery_input(std::uint8_t mode, std::uint8_t skip, std::string_view segments) {
  std::string s;
  s.push_back(static_cast<char>(mode));
  s.push_back(static_cast<char>(skip));
  s.append(segments);
  return s;
}

void wal_seeds() {
  // A log of puts, a delete and a batch, each group synced.
  wal_log a;
  a.puts(0, 3);
  MUST(a.w->append_delete("key/1").is_ok());
  wal::mutation_view batch[] = {{wal::mutation_kind::put, "b/1", "one"},
                                {wal::mutation_kind::del, "b/2", ""},
                                {wal::mutation_kind::put, "b/3", ""}};
  MUST(a.w->append_batch(batch).is_ok());
  MUST(a.w->sync().is_ok());
  std::string seg1 = a.segments();
  seed("wal_recovery", "puts-del-batch", recovery_input(0, 0, seg1));
  seed("wal_recovery", "puts-del-batch-report-only", recovery_input(2, 0, seg1));
  seed("wal_recovery", "puts-del-batch-fixed-then-write", recovery_input(1 | 32, 0, seg1));
  seed("wal_recovery", "damage-before-synced-frame", recovery_input(1, 2, seg1));
  seed("wal_recovery", "torn-last-frame", recovery_input(0, 0, seg1.substr(0, seg1.size() - 5)));
  seed("wal_recovery", "tmp-leftover", recovery_input(4 | 32, 0, seg1));

  auto sh = wal::check_segment_header(seg1, 1, "seed");
  MUST(sh.is_ok());
  std::string salt = u64le(sh->salt);
  seed("wal_frame", "segment", salt + '\x04' + seg1);
  seed("wal_frame", "segment-fixed", salt + '\x07' + seg1);
  seed("wal_frame", "frames", salt + '\x00' + seg1.substr(wal::segment_header_size));
  seed("wal_frame", "first-frame-fixed", salt + '\x01' + seg1.substr(wal::segment_header_size, 40));

  // A checkpoint: segment 2 starts with the commit marker; segment 1 (kept
  // from before the checkpoint) is superseded.
  MUST(a.w->append_replication_state("promise:ballot=3").is_ok());
  MUST(a.w->sync().is_ok());
  std::string before = a.segment(1);
  wal::commit_record marker{hash128::of("root"), tree::make_position(1, 4096)};
  MUST(a.w->commit(marker).is_ok());
  a.puts(10, 2);
  std::string seg2 = a.segment(2);
  seed("wal_recovery", "after-checkpoint", recovery_input(16, 0, seg2));
  seed("wal_recovery", "superseded-and-checkpoint", recovery_input(0, 0, before + seg2));
  seed("wal_recovery", "gap-before-checkpoint", recovery_input(1 | 8 | 32, 0, before + seg2));
  auto sh2 = wal::check_segment_header(seg2, 2, "seed");
  MUST(sh2.is_ok());
  seed("wal_frame", "commit-segment", u64le(sh2->salt) + '\x04' + seg2);

  // A checkpoint in two steps (format version 3): segment 3 begins with the
  // carried state, the writes made while the tree was written, then the
  // marker covering segment 2; and the same log before the marker.
  MUST(a.w->begin_checkpoint().is_ok());
  a.puts(20, 3);
  MUST(a.w->sync().is_ok());
  std::string begun = a.segment(2) + a.segment(3);
  seed("wal_recovery", "two-step-before-marker", recovery_input(0, 0, begun));
  MUST(a.w->commit({hash128::of("root-2"), tree::make_position(1, 8192)}).is_ok());
  a.puts(30, 2);
  std::string seg3 = a.segment(3);
  seed("wal_recovery", "two-step-checkpoint", recovery_input(16, 0, seg3));
  seed("wal_recovery", "two-step-checkpoint-fixed", recovery_input(1 | 16 | 32, 0, seg3));

  // A two-step checkpoint whose marker names sorted runs (format version 4).
  MUST(a.w->begin_checkpoint().is_ok());
  a.puts(40, 2);
  MUST(a.w->sync().is_ok());
  wal::commit_record with_runs{hash128::of("root-3"), tree::make_position(1, 12288)};
  with_runs.runs = {hash128::of("run-2"), hash128::of("run-1")};
  MUST(a.w->commit(with_runs).is_ok());
  std::string seg4 = a.segment(3) + a.segment(4);
  seed("wal_recovery", "checkpoint-with-runs", recovery_input(0, 0, seg4));

  // Reserved space after the last frame, and several groups between syncs.
  wal_log b(512, wal::fsync_policy::commit_only);
  for (int i = 0; i < 4; ++i) {
    MUST(b.w->append_put("k" + std::to_string(i), std::string(20, 'v')).is_ok());
    MUST(b.w->sync().is_ok());
  }
  MUST(b.w->sync_durable().is_ok());
  seed("wal_recovery", "reserved-tail", recovery_input(0, 0, b.segments()));
  seed("wal_recovery", "reserved-tail-fixed-skip-3", recovery_input(1, 3, b.segments()));

  // Payloads.
  auto rec = [](wal::record_type t, std::string payload) { return std::string(1, static_cast<char>(t)) + payload; };
  std::string p;
  wal::encode_put(p, "user/42", "alice");
  seed("wal_record", "put", rec(wal::record_type::put, p));
  p.clear();
  wal::encode_put(p, "k", "");
  seed("wal_record", "put-empty-value", rec(wal::record_type::put, p));
  p.clear();
  wal::encode_del(p, "user/42");
  seed("wal_record", "del", rec(wal::record_type::del, p));
  p.clear();
  wal::encode_batch(p, batch);
  seed("wal_record", "batch", rec(wal::record_type::batch, p));
  p.clear();
  wal::encode_commit(p, marker);
  seed("wal_record", "commit", rec(wal::record_type::commit, p));
  p.clear();
  wal::commit_record runs_marker = marker;
  runs_marker.covered_sequence = 3;
  runs_marker.runs = {hash128::of("run-2"), hash128::of("run-1")};
  wal::encode_commit(p, runs_marker);
  seed("wal_record", "commit-runs", rec(wal::record_type::commit_runs, p));
  seed("wal_record", "replication-state", rec(wal::record_type::replication_state, "promise:ballot=3"));
  seed("wal_record", "unknown-type", rec(static_cast<wal::record_type>(9), "future"));
}

// ---- tree nodes and the node store -----------------------------------------------------

tree::node leaf(int from, int n, std::size_t value_bytes) {
  std::vector<tree::entry> es;
  for (int i = from; i < from + n; ++i) {
    char key[32];
    std::snprintf(key, sizeof key, "user/%06d", i);
    es.push_back({key, std::string(value_bytes, static_cast<char>('a' + i % 26))});
  }
  return tree::node(0, es);
}

tree::node parent(std::uint8_t level, const std::vector<tree::node>& children) {
  std::vector<tree::entry> es;
  for (const auto& c : children)
    es.push_back({std::string(c.last_key()), tree::child_ref{hash128::of(c.encode()), c.count()}.encode()});
  return tree::node(level, es);
}

void tree_seeds() {
  seed("tree_node", "empty-leaf", tree::node().encode());
  tree::node l1 = leaf(0, 6, 8), l2 = leaf(6, 4, 3);
  seed("tree_node", "leaf", l1.encode());
  std::vector<tree::entry> bin = {{std::string("\0", 1), "zero"}, {std::string("\0\xff", 2), ""},
                                  {"a", std::string(40, 'x')},    {"abcdefghijk", "long shared prefix"},
                                  {"abcdefghijkl", "y"},          {std::string(3, '\xff'), "top"}};
  seed("tree_node", "leaf-binary-keys", tree::node(0, bin).encode());
  tree::node inner = parent(1, {l1, l2});
  seed("tree_node", "internal", inner.encode());
  seed("tree_node", "child-ref", tree::child_ref{hash128::of("x"), 300}.encode());

  // A store: a few leaves (compressible ones stored as zstd frames), their
  // parent, two packs (a small target size), an index for each.
  fault_env e;
  tree::node_store_options o;
  o.target_pack_bytes = 4096;
  o.codec = tree::node_codec::zstd;
  auto s = tree::node_store::open(e, "/store", o, std::nullopt);
  MUST(s.is_ok());
  std::vector<tree::node> leaves = {leaf(0, 5, 100), leaf(5, 3, 7), leaf(8, 2, 900)};
  for (const auto& n : leaves) MUST((*s)->write(n).is_ok());
  MUST((*s)->write(parent(1, leaves)).is_ok());
  auto pos = (*s)->flush();
  MUST(pos.is_ok());
  MUST((*s)->write(leaf(20, 4, 1200)).is_ok());
  auto pos2 = (*s)->flush();
  MUST(pos2.is_ok());
  auto store_files = [&](bool with_index) {
    return concat(
        e, "/store",
        with_index
            ? +[](const std::string& n) { return n.ends_with(".pack") || n.ends_with(".idx") || n == "MANIFEST"; }
            : +[](const std::string& n) { return n.ends_with(".pack") || n == "MANIFEST"; });
  };
  auto store_input = [](std::uint8_t mode, std::uint64_t x, const std::string& files) {
    return std::string(1, static_cast<char>(mode)) + u64le(x) + files;
  };
  std::string files = store_files(true);
  seed("node_store", "packs-at-end", store_input(1, 0, files));
  seed("node_store", "packs-write-reopen", store_input(1 | 8, 0, files));
  seed("node_store", "packs-gc", store_input(1 | 16, 0, files));
  seed("node_store", "packs-fixed", store_input(1 | 4, 0, files));
  seed("node_store", "packs-first-flush-position", store_input(2, *pos, files));
  seed("node_store", "packs-cut-inside", store_input(3 | 4, 300, files));
  seed("node_store", "packs-no-index", store_input(1, 0, store_files(false)));
  seed("node_store", "nothing-committed", store_input(0, 0, files));
  // After gc: a MANIFEST names the first live pack and gc's position.
  hash128 root = hash128::of(parent(1, leaves).encode());
  auto g = (*s)->gc(std::span(&root, 1));
  MUST(g.is_ok());
  seed("node_store", "after-gc-manifest", store_input(0, 0, store_files(true)));
  seed("node_store", "after-gc-write", store_input(1 | 8, 0, store_files(true)));

  // The same leaves as LZ4 blocks (pack format version 2), the default codec.
  fault_env e4;
  tree::node_store_options o4;
  o4.target_pack_bytes = 4096;
  auto s4 = tree::node_store::open(e4, "/store", o4, std::nullopt);
  MUST(s4.is_ok());
  for (const auto& n : leaves) MUST((*s4)->write(n).is_ok());
  MUST((*s4)->write(parent(1, leaves)).is_ok());
  MUST((*s4)->flush().is_ok());
  std::string lz4_files = concat(
      e4, "/store", +[](const std::string& n) { return n.ends_with(".pack") || n.ends_with(".idx"); });
  seed("node_store", "packs-lz4", store_input(1, 0, lz4_files));
  seed("node_store", "packs-lz4-fixed", store_input(1 | 4, 0, lz4_files));
}

// ---- database files ---------------------------------------------------------------------

void database_seeds() {
  seed("db_manifest", "4-shards", "magnetite-manifest 1\nshards 4\n");
  seed("db_manifest", "1-shard", "magnetite-manifest 1\nshards 1\n");
  seed("db_manifest", "4096-shards", "magnetite-manifest 1\nshards 4096\n");
  seed("db_manifest", "version-2", "magnetite-manifest 2\nshards 4\n");
  seed("db_manifest", "leading-zero", "magnetite-manifest 1\nshards 04\n");

  for (std::size_t shards : {1u, 2u, 3u}) {
    fault_env e;
    MUST(e.create_dir("/db").is_ok());
    auto log = checkpoint_log::open(e, "/db", shards);
    MUST(log.is_ok());
    int lines = shards == 1 ? 20 : 3;
    for (int i = 0; i < lines; ++i) {
      checkpoint c;
      for (std::size_t s = 0; s < shards; ++s) c.roots.push_back(hash128::of(fmt::format("root {} {}", i, s)));
      c.combined = checkpoint_log::combine(c.roots);
      MUST(log->append(c).is_ok());
    }
    std::string text = *e.contents("/db/CHECKPOINTS");
    std::string head(1, static_cast<char>(shards - 1));
    std::string name = fmt::format("{}-shards-{}-lines", shards, lines);
    seed("checkpoints", name, head + text);
    if (shards == 2) {
      seed("checkpoints", name + "-torn", head + text.substr(0, text.size() - 10));
      std::string damaged = text;
      damaged[5] = damaged[5] == 'a' ? 'b' : 'a';
      seed("checkpoints", name + "-damaged", head + damaged);
      seed("checkpoints", name + "-wrong-shards", std::string(1, '\x02') + text);
    }
  }
}

void small_seeds() {
  seed("ttl_envelope", "plain", ttl::wrap("value", std::nullopt));
  seed("ttl_envelope", "expiring", ttl::wrap("value", 1'700'000'000'000'000'000ull));
  seed("ttl_envelope", "expiring-empty", ttl::wrap("", 5));
  seed("ttl_envelope", "stamped", ttl::wrap_stamped(stamp{{3, 1}, 42}, "value", std::nullopt));
  seed("ttl_envelope", "stamped-expiring", ttl::wrap_stamped(stamp{{3, 1}, 42}, "value", 1'700'000'000'000'000'000ull));
  seed("ttl_envelope", "stamped-tombstone", ttl::wrap_stamped(stamp{{3, 1}, 43}, std::nullopt, 86'400'000'000'000ull));
  seed("ttl_envelope", "newer-format", "\x02value");
  seed("ttl_envelope", "truncated-expiry", "\x01\x02\x03");

  // state_value (docs/formats/state.md): revision u64 LE, type, body.
  auto state_value = [](std::uint64_t revision, std::string_view body) {
    std::string v;
    put_fixed64_le(v, revision);
    return v.append(body);
  };
  auto two = [](std::uint64_t a, std::uint64_t b) {
    std::string v;
    put_fixed64_le(v, a);
    put_fixed64_le(v, b);
    return v;
  };
  std::string next_seq;
  put_fixed64_le(next_seq, 42);
  // replication_message: selector byte, then CAF's binary serialization.
  auto caf_bytes = [](std::uint8_t selector, auto&&... xs) {
    std::vector<char> buf;
    caf::binary_serializer sink{nullptr, buf};
    MUST(!sink(xs...));
    return std::string(1, static_cast<char>(selector)) + std::string(buf.begin(), buf.end());
  };
  {
    ballot b{3, 1};
    std::vector<stamped_op> ops{{"key", stamp{{3, 1}, 7}, true, "value", false, 0},
                                {"gone", stamp{{3, 1}, 8}, false, "", true, 1'700'000'000'000'000'000ull}};
    seed("replication_message", "rwrite", caf_bytes(0, b, std::uint64_t{17}, ops));
    replication::promise_reply pr{true, {4, 2}, {3, 1}, hash128::of(std::string_view("root"))};
    seed("replication_message", "promise-reply", caf_bytes(1, pr));
    replication::vote wr{false, {5, 3}};
    seed("replication_message", "vote", caf_bytes(2, wr));
    merge_report mr{12, 9};
    seed("replication_message", "merge-report", caf_bytes(3, mr));
    std::vector<hash128> hs{hash128::of(std::string_view("a")), hash128::of(std::string_view("b"))};
    seed("replication_message", "fetch", caf_bytes(4, hs));
    std::vector<std::string> enc{std::string("\x00\x00", 2), "node bytes"};
    seed("replication_message", "fetch-reply", caf_bytes(5, enc));
    seed("replication_message", "hello",
         caf_bytes(6, std::uint32_t{2}, hash128::of(std::string_view("cluster")), std::uint32_t{1}));
    seed("replication_message", "sync", caf_bytes(7, hash128::of(std::string_view("root")), std::uint32_t{3}));
    replication::replica_info ri{2, 2, {6, 2}, {6, 2}, hash128::of(std::string_view("root")), 1250, 7'039'637, 1000};
    seed("replication_message", "info", caf_bytes(8, ri));
    seed("replication_message", "beat", caf_bytes(9, std::uint64_t{0x9e3779b97f4a7c15ULL}));
    seed("replication_message", "rvote", caf_bytes(10, std::uint64_t{17}, replication::vote{true, {3, 1}}));
  }
  seed("state_value", "json-object", state_value(17, "\x01{\"a\":1,\"b\":[true,\"x\"]}"));
  seed("state_value", "raw-bytes", state_value(3, std::string("\0\0\xffraw", 6)));
  seed("state_value", "deque-meta",
       state_value(9, std::string("\x11") + two((std::uint64_t{1} << 63) - 2, (std::uint64_t{1} << 63) + 5)));
  seed("state_value", "deque-meta-inverted", state_value(9, std::string("\x11") + two(10, 2)));
  seed("state_value", "stream-meta", state_value(2, std::string("\x12") + next_seq));
  seed("state_value", "revision-zero", state_value(0, "\x01{}"));
  seed("state_value", "json-null", state_value(5, "\x01null"));
  seed("state_value", "bad-type", state_value(5, "\x07junk"));
  seed("state_value", "short", "\x01\x02\x03");

  seed("cli_text", "duration-ms", "250ms");
  seed("cli_text", "duration-h", "1h");
  seed("cli_text", "duration-huge", "9223372036854775807ns");
  seed("cli_text", "escaped", "key\\x00\\xffend\\x5c");
  seed("cli_text", "bad-escape", "\\x4");
  seed("cli_text", "scan-bounds", std::string("user/a\0user/z\0user/", 19));
  seed("cli_text", "prefix-ff", std::string("\0\0a\xff\xff", 5));
}

}  // namespace

// What a node's connection carries: frames (frame_guard) and payloads
// (basp_payload), made by CAF's own serializer.
void network_seeds() {
  using replication::frame_guard;
  auto header = [](std::uint8_t op, std::uint32_t length, std::uint64_t dest = 0) {
    std::string h{static_cast<char>(op), 0, 0, 0};
    for (int i = 3; i >= 0; --i) h.push_back(static_cast<char>(length >> (8 * i)));
    for (int i = 0; i < 8; ++i) h.push_back(0);  // operation data
    for (int i = 0; i < 8; ++i) h.push_back(0);  // source actor
    for (int i = 7; i >= 0; --i) h.push_back(static_cast<char>(dest >> (8 * i)));
    return h;
  };
  caf::actor_system_config cfg;
  replication::add_message_types(cfg);
  cfg.set("scheduler.max-threads", 1);
  caf::actor_system sys{cfg};
  auto bytes_of = [&](auto&&... xs) {
    std::vector<char> out;
    caf::binary_serializer sink{sys, out};
    MUST(!sink(xs...));
    return std::string(out.begin(), out.end());
  };
  auto message = [&](caf::message m) { return bytes_of(std::vector<caf::strong_actor_ptr>{}, m); };
  std::string node = bytes_of(sys.node());
  // frame_guard: mode byte, piece seed, stream.
  std::string hello = header(frame_guard::client_handshake, static_cast<std::uint32_t>(node.size())) + node;
  std::string put = message(caf::make_message(put_atom::value, std::string("k"), std::string("v"), std::int64_t{0}));
  seed("frame_guard", "handshake-put-heartbeat",
       std::string("\x00\x07") + hello + header(2, static_cast<std::uint32_t>(put.size()), 3) + put + header(6, 0));
  seed("frame_guard", "server-side", std::string("\x01\x03") + header(0, 8) + std::string(8, '\x01') + header(6, 0));
  seed("frame_guard", "claims-4gib", std::string("\x00\x05") + header(1, 0xfffffff0u));
  seed("frame_guard", "direct-first", std::string("\x02\x09") + header(2, 5, 1) + "abcde");
  // basp_payload: operation byte, payload.
  seed("basp_payload", "client-handshake", std::string("\x01") + node);
  seed("basp_payload", "server-handshake",
       std::string("\x00") + bytes_of(sys.node(), std::vector<std::string>{"generic-caf-app"}, caf::actor_id{7},
                                      std::set<std::string>{"caf::replies_to<@atom>::with<bool>"}));
  seed("basp_payload", "put", "\x02" + put);
  seed("basp_payload", "del", "\x02" + message(caf::make_message(del_atom::value, std::string("k"))));
  seed("basp_payload", "cas",
       "\x02" + message(caf::make_message(cas_atom::value, std::string("k"), true, std::string("old"), true,
                                          std::string("new"), std::int64_t{0}, replication::request_id{9, 3})));
  seed("basp_payload", "get", "\x02" + message(caf::make_message(get_atom::value, std::string("k"))));
  seed(
      "basp_payload", "apply",
      "\x02" + message(caf::make_message(apply_atom::value, std::vector<state_check>{{"s/k", 4}},
                                         std::vector<batch_op>{{"s/k", true, "v", 0}}, replication::request_id{1, 2})));
  seed("basp_payload", "srange",
       "\x02" + message(caf::make_message(replication::srange_atom::value, std::string("a"), std::string(""),
                                          std::uint64_t{10}, false)));
  seed("basp_payload", "peers",
       "\x02" + message(caf::make_message(replication::peers_atom::value, std::vector<std::uint32_t>{1, 2},
                                          std::vector<caf::actor>{caf::actor{}, caf::actor{}})));
  seed("basp_payload", "hello",
       "\x02" + message(caf::make_message(replication::hello_atom::value, std::uint32_t{0},
                                          hash128::of(std::string_view("cluster")), replication::protocol_version)));
  std::vector<stamped_op> ops{{"key", stamp{{3, 1}, 7}, true, "value", false, 0}};
  seed("basp_payload", "rwrite",
       "\x02" + message(caf::make_message(replication::rwrite_atom::value, ballot{3, 1}, std::uint64_t{17}, ops)));
  seed("basp_payload", "error-reply",
       "\x02" + message(caf::make_message(caf::make_error(caf::sec::runtime_error, std::string("why")))));
  std::string charbuf = message(caf::make_message(std::vector<char>(4, 'c')));
  charbuf.resize(charbuf.size() - 5);
  charbuf += std::string("\xf0\xff\xff\xff\x0f") + std::string(4, 'c');  // claims 4 GiB
  seed("basp_payload", "charbuf-claims-4gib", "\x02" + charbuf);
  seed("basp_payload", "down",
       std::string("\x05") + bytes_of(sys.node(), sys.node(), caf::make_error(caf::sec::runtime_error)));
}

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR [TARGET...]   (tests/fuzz/corpus)\n", argv[0]);
    return 2;
  }
  out_dir = argv[1];
  for (int i = 2; i < argc; ++i) only.insert(argv[i]);
  network_seeds();
  wal_seeds();
  tree_seeds();
  database_seeds();
  small_seeds();
  std::printf("make_corpus: %d seeds written under %s\n", written, out_dir.c_str());
  return 0;
}
