// node_store: tree::node_store::open on a store directory made of the input
// (pack files, their index files, MANIFEST), in an in-memory env, then reads of
// every node the packs name, check(), and optionally a write, a gc and a reopen.
//
// Input: u8 mode | u64 x | files back to back, cut before each "MGNTPACK",
// "MGNTPIDX" or "MGNTPMAN" (at most 8 files).
//   A pack or index file is named by the number in its header (bytes 16..23)
//   when that is 1..99, else by its place (1, 2, ...); a manifest is MANIFEST;
//   bytes before the first magic, if any, become MANIFEST.tmp.
//   mode bits 0-1: the committed position given to open: 0 none; 1 the end of
//               the highest-numbered pack; 2 x; 3 an offset x modulo its size + 1
//               in that pack.
//   mode bit 2: make every checksum hold: each header's (a pack's or index's
//               number the file's); each record's (stored length clamped to the
//               file, raw length and hash from the payload, decompressed if it
//               says zstd); each index entry's, with the salt of its pack (and
//               the index header given that salt).
//   mode bit 3: after a successful open, write a node, flush, reopen at the new
//               position and read the node back.
//   mode bit 4: after a successful open, gc keeping every node that reads back,
//               reopen at gc's position and read them again.
// Invariants: open returns ok or a clean error (corruption, not_supported,
// invalid_argument), and on an error no file changes; reads return the node
// whose encoding hashes to the name asked, or an error; check() reports and
// returns; a flush or gc position reopens.
#include <lz4.h>
#include <xxhash.h>
#include <zstd.h>

#include <algorithm>
#include <set>
#include <vector>

#include "core/coding.h"
#include "core/fault_env.h"
#include "tests/fuzz/fuzz_target.h"
#include "tree/node_store.h"

using namespace magnetite;
using namespace magnetite::fuzz;
using namespace magnetite::tree;

namespace {

const std::string dir = "/store";
constexpr std::size_t header_size = 40;
constexpr std::size_t record_header_size = 36;
constexpr std::size_t index_entry_size = 32;
const std::string_view pack_magic = "MGNTPACK", index_magic = "MGNTPIDX", manifest_magic = "MGNTPMAN";

std::uint8_t* at(std::string& s, std::size_t i) { return reinterpret_cast<std::uint8_t*>(s.data() + i); }
std::uint32_t sum32(std::string_view b, std::uint64_t seed = 0) {
  return static_cast<std::uint32_t>(XXH3_64bits_withSeed(b.data(), b.size(), seed));
}
void fix_header(std::string& b) {
  if (b.size() >= header_size) encode_fixed32_le(at(b, 36), sum32(std::string_view(b).substr(0, 36)));
}

struct store_file {
  std::string name;
  std::string bytes;
  char kind;  // 'p' pack, 'i' index, 'm' manifest, 't' MANIFEST.tmp
  std::uint32_t number = 0;
};

// Fixes the records of pack `b` and collects the hashes they name.
void walk_pack(std::string& b, std::uint64_t salt, bool fix, std::vector<hash128>& hashes) {
  std::size_t off = header_size;
  for (int n = 0; n < 4096 && b.size() - off >= record_header_size; ++n) {
    std::uint32_t stored = decode_fixed32_le(at(b, off + 8));
    std::size_t room = b.size() - off - record_header_size;
    if (fix) {
      if (stored > room) {
        stored = static_cast<std::uint32_t>(room);
        encode_fixed32_le(at(b, off + 8), stored);
      }
      std::string_view payload = std::string_view(b).substr(off + record_header_size, stored);
      std::string raw(payload);
      if (b[off + 4] & 2) {
        // An LZ4 block does not say its size: the header's raw length does.
        std::uint32_t want = decode_fixed32_le(at(b, off + 12));
        if (want <= (1u << 20)) {
          raw.assign(want, '\0');
          int got =
              LZ4_decompress_safe(payload.data(), raw.data(), static_cast<int>(payload.size()), static_cast<int>(want));
          if (got < 0)
            raw.assign(payload);
          else
            raw.resize(static_cast<std::size_t>(got));
        }
      } else if (b[off + 4] & 1) {
        auto want = ZSTD_getFrameContentSize(payload.data(), payload.size());
        if (want != ZSTD_CONTENTSIZE_ERROR && want != ZSTD_CONTENTSIZE_UNKNOWN && want <= (1u << 20)) {
          raw.assign(static_cast<std::size_t>(want), '\0');
          auto got = ZSTD_decompress(raw.data(), raw.size(), payload.data(), payload.size());
          if (ZSTD_isError(got))
            raw.assign(payload);
          else
            raw.resize(got);
        }
      }
      encode_fixed32_le(at(b, off + 12), static_cast<std::uint32_t>(raw.size()));
      auto hb = hash128::of(raw).to_bytes();
      std::copy(hb.begin(), hb.end(), at(b, off + 20));
      encode_fixed32_le(at(b, off + 16), sum32(payload, salt));
      encode_fixed32_le(at(b, off), sum32(std::string_view(b).substr(off + 4, record_header_size - 4), salt));
    }
    hashes.push_back(hash128::from_bytes(at(b, off + 20)));
    if (stored > room) break;
    off += record_header_size + stored;
  }
}

}  // namespace

MAGNETITE_FUZZ_TARGET(node_store) {
  control c(as_view(data, size));
  std::uint8_t mode = c.u8();
  std::uint64_t x = c.u64();
  bool fix = mode & 4;
  const std::string_view magics[] = {pack_magic, index_magic, manifest_magic};
  auto pieces = split_at_magics(c.rest(), magics, 8);

  std::vector<store_file> files;
  for (std::size_t i = 0; i < pieces.size(); ++i) {
    store_file f;
    f.bytes = std::string(pieces[i]);
    std::string_view head = std::string_view(f.bytes).substr(0, 8);
    f.kind = head == pack_magic ? 'p' : head == index_magic ? 'i' : head == manifest_magic ? 'm' : 't';
    if (f.kind == 'p' || f.kind == 'i') {
      std::uint64_t n = f.bytes.size() >= 24 ? decode_fixed64_le(at(f.bytes, 16)) : 0;
      f.number = n >= 1 && n <= 99 ? static_cast<std::uint32_t>(n) : static_cast<std::uint32_t>(i + 1);
      f.name = f.kind == 'p' ? pack_file_name(f.number) : pack_index_file_name(f.number);
      if (fix && f.bytes.size() >= 24) encode_fixed64_le(at(f.bytes, 16), f.number);
    } else {
      f.name = f.kind == 'm' ? "MANIFEST" : "MANIFEST.tmp";
    }
    if (fix && f.kind != 't') fix_header(f.bytes);
    files.push_back(std::move(f));
  }

  // Salts of the packs, records fixed, hashes collected; then the indexes.
  std::vector<hash128> hashes;
  std::map<std::uint32_t, std::uint64_t> salts;
  std::map<std::uint32_t, std::uint64_t> pack_sizes;
  for (auto& f : files) {
    if (f.kind != 'p' || f.bytes.size() < header_size) continue;
    std::uint64_t salt = decode_fixed64_le(at(f.bytes, 24));
    salts[f.number] = salt;
    walk_pack(f.bytes, salt, fix, hashes);
  }
  for (auto& f : files) {
    if (f.kind != 'i' || f.bytes.size() < header_size) continue;
    if (fix && salts.count(f.number)) {
      std::uint64_t salt = salts[f.number];
      encode_fixed64_le(at(f.bytes, 24), salt);
      fix_header(f.bytes);
      for (std::size_t off = header_size; f.bytes.size() - off >= index_entry_size; off += index_entry_size)
        encode_fixed32_le(at(f.bytes, off + 28), sum32(std::string_view(f.bytes).substr(off, 28), salt));
    }
    for (std::size_t off = header_size; f.bytes.size() - off >= index_entry_size; off += index_entry_size)
      hashes.push_back(hash128::from_bytes(at(f.bytes, off)));
  }

  fault_env e;
  FUZZ_CHECK(e.create_dir(dir).is_ok());
  for (const auto& f : files) {
    put_file(e, path_join(dir, f.name), f.bytes);
    if (f.kind == 'p') pack_sizes[f.number] = f.bytes.size();
  }
  FUZZ_CHECK(e.sync_dir(dir).is_ok());

  std::optional<std::uint64_t> committed;
  std::uint32_t top = pack_sizes.empty() ? 0 : pack_sizes.rbegin()->first;
  switch (mode & 3) {
    case 1:
      if (top) committed = make_position(top, pack_sizes[top]);
      break;
    case 2:
      committed = x;
      break;
    case 3:
      if (top) committed = make_position(top, x % (pack_sizes[top] + 1));
      break;
  }

  node_store_options options;
  options.cache_bytes = 1 << 20;
  options.write_buffer_bytes = 1 << 16;
  options.target_pack_bytes = 4096;
  auto before = snapshot(e, dir);
  auto opened = node_store::open(e, dir, options, committed);
  if (!opened) {
    auto code = opened.error().code();
    FUZZ_CHECK(code == status_code::corruption || code == status_code::not_supported ||
               code == status_code::invalid_argument);
    auto now = snapshot(e, dir);
    now.erase("LOCK");
    FUZZ_CHECK(now == before);  // checks come first: nothing modified
    return 0;
  }
  auto& store = **opened;
  std::sort(hashes.begin(), hashes.end());
  hashes.erase(std::unique(hashes.begin(), hashes.end()), hashes.end());
  if (hashes.size() > 64) hashes.resize(64);
  std::vector<hash128> readable;
  for (const auto& h : hashes) {
    auto r = store.read(h);
    if (r) {
      FUZZ_CHECK(hash128::of((*r)->encode()) == h);
      FUZZ_CHECK(store.contains(h));
      readable.push_back(h);
      std::string value;
      (void)store.leaf_get(h, "k", value);
      // A second read is served by the cache: the same node.
      auto again = store.read(h);
      FUZZ_CHECK(again.is_ok() && (*again)->encode() == (*r)->encode());
    } else {
      auto code = r.error().code();
      FUZZ_CHECK(code == status_code::corruption || code == status_code::not_found);
      if (code == status_code::not_found) FUZZ_CHECK(!store.locate(h));
    }
  }
  auto report = store.check(hashes, 16);
  FUZZ_CHECK(report.problems.size() <= 16);

  if (mode & 8) {
    tree::entry kv{"fuzz-key", "fuzz-value"};
    node n(0, std::span(&kv, 1));
    auto h = store.write(n);
    FUZZ_CHECK(h.is_ok());
    auto pos = store.flush();
    FUZZ_CHECK(pos.is_ok());
    opened->reset();
    auto re = node_store::open(e, dir, options, *pos);
    FUZZ_CHECK(re.is_ok());
    auto back = (*re)->read(*h);
    FUZZ_CHECK(back.is_ok() && (*back)->encode() == n.encode());
    for (const auto& r : readable) FUZZ_CHECK((*re)->read(r).is_ok());
    return 0;
  }
  if (mode & 16) {
    auto g = store.gc(readable);
    if (!g) return 0;  // a node below a kept root is missing or damaged: gc refuses
    opened->reset();
    auto re = node_store::open(e, dir, options, g->position);
    FUZZ_CHECK(re.is_ok());
    for (const auto& r : readable) FUZZ_CHECK((*re)->read(r).is_ok());
  }
  return 0;
}
