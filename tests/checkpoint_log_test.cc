// checkpoint_log: the combined roots database::commit keeps, on fault_env.
#include <doctest/doctest.h>

#include <algorithm>

#include "core/fault_env.h"
#include "engine/checkpoint_log.h"
#include "tests/support/made_checkpoint.h"

using namespace magnetite;

namespace {

const std::string dir = "/db";
const std::string path = "/db/CHECKPOINTS";

checkpoint make(int i, std::size_t shards = 3) { return testing::made_checkpoint(i, shards); }

checkpoint_log must_open(env& e, std::size_t shards = 3) {
  auto l = checkpoint_log::open(e, dir, shards);
  REQUIRE_MESSAGE(l.is_ok(), l.error().to_string());
  return std::move(*l);
}

bool same(const checkpoint& a, const checkpoint& b) { return a.combined == b.combined && a.roots == b.roots; }

}  // namespace

TEST_CASE("checkpoint_log: appends survive a reopen; a mismatched checkpoint is refused") {
  fault_env fe;
  REQUIRE(fe.create_dir(dir).is_ok());
  auto log = must_open(fe);
  CHECK(log.entries().empty());
  for (int i = 0; i < 3; ++i) REQUIRE(log.append(make(i)).is_ok());
  checkpoint wrong = make(9);
  wrong.combined = make(8).combined;
  CHECK(log.append(wrong).code() == status_code::invalid_argument);
  CHECK(log.append(make(9, 2)).code() == status_code::invalid_argument);
  fe.crash();  // only what was synced remains
  auto again = must_open(fe);
  REQUIRE(again.entries().size() == 3);
  for (int i = 0; i < 3; ++i) CHECK(same(again.entries()[i], make(i)));
  CHECK(again.find(make(1).combined) != nullptr);
  CHECK(again.find(make(7).combined) == nullptr);
  CHECK(again.roots_of(2) == std::vector<hash128>{make(0).roots[2], make(1).roots[2], make(2).roots[2]});
  CHECK(again.damage().empty());
}

TEST_CASE("checkpoint_log: a torn last line is cut; a damaged complete line is skipped and reported") {
  fault_env fe;
  REQUIRE(fe.create_dir(dir).is_ok());
  {
    auto log = must_open(fe);
    for (int i = 0; i < 3; ++i) REQUIRE(log.append(make(i)).is_ok());
  }
  std::uint64_t whole = fe.contents(path)->size();
  {
    auto f = fe.open(path, open_mode::open_existing);
    REQUIRE(f.is_ok());
    REQUIRE((*f)->append(make(3).combined.to_hex() + " 12ab").is_ok());  // a crash mid-append
    REQUIRE((*f)->sync().is_ok());
  }
  auto log = must_open(fe);
  CHECK(log.entries().size() == 3);
  CHECK(log.damage().empty());
  CHECK(fe.contents(path)->size() == whole);
  REQUIRE(log.append(make(4)).is_ok());
  CHECK(must_open(fe).entries().size() == 4);

  // Line 2 (offset = one line's length) loses a bit: skipped, reported with its offset.
  std::uint64_t line = whole / 3;
  REQUIRE(fe.flip_bit(path, line + 5, 0));
  auto damaged = must_open(fe);
  CHECK(damaged.entries().size() == 3);
  CHECK_FALSE(damaged.find(make(1).combined));
  REQUIRE(damaged.damage().size() == 1);
  CHECK(damaged.damage()[0].find(fmt::format("{}, offset {}", path, line)) != std::string::npos);
}

TEST_CASE("checkpoint_log: it keeps the newest `retained` checkpoints, rewriting the file as it grows") {
  fault_env fe;
  REQUIRE(fe.create_dir(dir).is_ok());
  const int n = 3 * static_cast<int>(checkpoint_log::default_retained) + 5;
  auto log = must_open(fe);
  for (int i = 0; i < n; ++i) {
    REQUIRE(log.append(make(i)).is_ok());
    std::string text = *fe.contents(path);
    CHECK(std::count(text.begin(), text.end(), '\n') < static_cast<long>(2 * checkpoint_log::default_retained));
  }
  REQUIRE(log.entries().size() == checkpoint_log::default_retained);
  CHECK(same(log.entries().back(), make(n - 1)));
  CHECK(same(log.entries().front(), make(n - static_cast<int>(checkpoint_log::default_retained))));
  fe.crash();
  auto again = must_open(fe);
  REQUIRE(again.entries().size() == checkpoint_log::default_retained);
  CHECK(same(again.entries().back(), make(n - 1)));
}

TEST_CASE("checkpoint_log: a failed append retains nothing and leaves no fragment for the next line to complete") {
  for (int mode = 0; mode < 3; ++mode) {
    CAPTURE(mode);
    fault_env fe;
    REQUIRE(fe.create_dir(dir).is_ok());
    auto log = must_open(fe);
    for (int i = 0; i < 3; ++i) REQUIRE(log.append(make(i)).is_ok());
    if (mode == 0) fe.fail_write(1, status_code::no_space, 20);  // a torn line, the disk full
    if (mode == 1) fe.fail_sync(1);                              // the line may never reach the disk
    if (mode == 2) fe.fail_write(1, status_code::io_error, 0);
    CHECK_FALSE(log.append(make(3)).is_ok());
    CHECK_FALSE(log.find(make(3).combined));
    CHECK(log.entries().size() == 3);
    REQUIRE(log.append(make(4)).is_ok());
    REQUIRE(log.append(make(5)).is_ok());
    fe.crash();
    auto again = must_open(fe);
    CHECK(again.damage().empty());
    REQUIRE(again.entries().size() == 5);
    CHECK(same(again.entries()[3], make(4)));
    CHECK(same(again.entries()[4], make(5)));
    CHECK_FALSE(again.find(make(3).combined));
  }
}

TEST_CASE("checkpoint_log: repair drops damaged lines and keeps the good ones") {
  fault_env fe;
  REQUIRE(fe.create_dir(dir).is_ok());
  {
    auto log = must_open(fe);
    for (int i = 0; i < 4; ++i) REQUIRE(log.append(make(i)).is_ok());
  }
  REQUIRE(fe.flip_bit(path, 3, 1));  // the first line
  auto log = must_open(fe);
  CHECK(log.damage().size() == 1);
  REQUIRE(log.repair().is_ok());
  CHECK(log.damage().empty());
  fe.crash();
  auto again = must_open(fe);
  CHECK(again.damage().empty());
  REQUIRE(again.entries().size() == 3);
  CHECK(same(again.entries()[0], make(1)));
}

TEST_CASE("checkpoint_log: check_file reads the file again and reports damage done after open") {
  fault_env fe;
  REQUIRE(fe.create_dir(dir).is_ok());
  auto log = must_open(fe);
  CHECK(log.check_file().empty());  // no file yet, nothing retained
  for (int i = 0; i < 3; ++i) REQUIRE(log.append(make(i)).is_ok());
  CHECK(log.check_file().empty());
  std::string good = *fe.contents(path);
  std::size_t second = good.find('\n') + 1;

  // A hex digit of the second line flipped on disk, under the open log.
  REQUIRE(fe.flip_bit(path, second + 5, 0));
  auto found = log.check_file();
  REQUIRE(found.size() == 2);  // the damaged line, and a retained checkpoint the file no longer holds
  CHECK(found[0].find(fmt::format("{}, offset {}", path, second)) != std::string::npos);
  CHECK(found[1].find("holds 2 intact checkpoints where the database retains 3") != std::string::npos);
  REQUIRE(fe.flip_bit(path, second + 5, 0));
  CHECK(log.check_file().empty());

  // The file cut short (a lost tail): a fragment, and a checkpoint missing.
  {
    auto f = fe.open(path, open_mode::open_existing);
    REQUIRE(f.is_ok());
    REQUIRE((*f)->truncate(good.size() - 10).is_ok());
  }
  auto cut = log.check_file();
  REQUIRE(cut.size() == 2);
  CHECK(cut[0].find("a line without its newline") != std::string::npos);
  CHECK(cut[1].find("holds 2 intact checkpoints") != std::string::npos);
  CHECK(log.entries().size() == 3);  // check_file changes nothing
  CHECK(fe.contents(path)->size() == good.size() - 10);
}
