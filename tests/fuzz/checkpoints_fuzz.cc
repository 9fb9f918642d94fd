// checkpoints: checkpoint_log::open on a CHECKPOINTS file made of the input
// (engine/checkpoint_log.cc, docs/formats/checkpoints.md), in an in-memory env,
// then an append, a repair and reopens.
//
// Input: u8 s (the database has 1 + s % 8 shards) | the file's bytes.
// Invariants: open never fails on any bytes; it cuts a torn last line (the file
// becomes the input up to its last newline) and keeps at most 16 checkpoints,
// each with one root a shard and a combined root that matches them; a reopen
// finds the same; an append is found after them; a repair drops the damage.
#include <vector>

#include "core/fault_env.h"
#include "engine/checkpoint_log.h"
#include "tests/fuzz/fuzz_target.h"

using namespace magnetite;
using namespace magnetite::fuzz;

namespace {

const std::string dir = "/db";

bool same(const checkpoint& a, const checkpoint& b) { return a.combined == b.combined && a.roots == b.roots; }

bool same(const std::deque<checkpoint>& a, const std::deque<checkpoint>& b) {
  return a.size() == b.size() &&
         std::equal(a.begin(), a.end(), b.begin(), [](const checkpoint& x, const checkpoint& y) { return same(x, y); });
}

checkpoint_log reopen(fault_env& e, std::size_t shards) {
  auto log = checkpoint_log::open(e, dir, shards);
  FUZZ_CHECK(log.is_ok());
  return std::move(*log);
}

}  // namespace

MAGNETITE_FUZZ_TARGET(checkpoints) {
  control c(as_view(data, size));
  std::size_t shards = 1 + c.u8() % 8;
  std::string_view text = c.rest();
  fault_env e;
  FUZZ_CHECK(e.create_dir(dir).is_ok());
  const std::string path = path_join(dir, checkpoint_log::file_name);
  put_file(e, path, text);

  checkpoint_log log = reopen(e, shards);
  FUZZ_CHECK(log.entries().size() <= checkpoint_log::default_retained);
  for (const auto& cp : log.entries()) {
    FUZZ_CHECK(cp.roots.size() == shards);
    FUZZ_CHECK(checkpoint_log::combine(cp.roots) == cp.combined);
    FUZZ_CHECK(log.find(cp.combined) != nullptr);
  }
  for (std::size_t s = 0; s < shards; ++s) FUZZ_CHECK(log.roots_of(s).size() == log.entries().size());
  std::size_t last_nl = text.rfind('\n');
  FUZZ_CHECK(e.contents(path) == text.substr(0, last_nl == std::string_view::npos ? 0 : last_nl + 1));

  checkpoint_log again = reopen(e, shards);
  FUZZ_CHECK(same(again.entries(), log.entries()));
  FUZZ_CHECK(again.damage().size() == log.damage().size());

  checkpoint next;
  for (std::size_t s = 0; s < shards; ++s) next.roots.push_back(hash128{s, text.size()});
  next.combined = checkpoint_log::combine(next.roots);
  FUZZ_CHECK(again.append(next).is_ok());
  std::deque<checkpoint> want = log.entries();
  want.push_back(next);
  while (want.size() > checkpoint_log::default_retained) want.pop_front();
  FUZZ_CHECK(same(again.entries(), want));
  checkpoint_log third = reopen(e, shards);
  FUZZ_CHECK(same(third.entries(), want));

  FUZZ_CHECK(third.repair().is_ok());
  FUZZ_CHECK(third.damage().empty());
  checkpoint_log fourth = reopen(e, shards);
  FUZZ_CHECK(same(fourth.entries(), want));
  FUZZ_CHECK(fourth.damage().empty());
  return 0;
}
