// summing_env over the in-memory fault_env: a file's streamed sum is
// file_sum's, and every way the file can stop being "exactly what was
// appended" forgets it.
#include <doctest/doctest.h>

#include <string>

#include "core/fault_env.h"
#include "core/file_sum.h"
#include "core/summing_env.h"

using namespace magnetite;

namespace {

std::unique_ptr<file> must_open(env& e, const std::string& path, open_mode mode) {
  auto f = e.open(path, mode);
  REQUIRE_MESSAGE(f.is_ok(), f.error().to_string());
  return std::move(*f);
}

// A file of `parts` appends of different sizes and bytes, through `e`.
std::uint64_t write_parts(env& e, const std::string& path, int parts) {
  auto f = must_open(e, path, open_mode::create_truncate);
  std::uint64_t n = 0;
  for (int i = 0; i < parts; ++i) {
    std::string part(static_cast<std::size_t>(1 + i * 977 % 5000), static_cast<char>('a' + i % 26));
    REQUIRE(f->append(part).is_ok());
    n += part.size();
  }
  return n;
}

}  // namespace

TEST_CASE("summing_env: the sum of what was appended is file_sum's, and only for exactly those bytes") {
  fault_env base;
  REQUIRE(base.create_dir("/d").is_ok());
  summing_env e(base, ".pack");
  const std::uint64_t n = write_parts(e, "/d/1.pack", 40);
  auto sum = e.sum_of("/d/1.pack", n);
  REQUIRE(sum.has_value());
  CHECK(*sum == file_sum(base, "/d/1.pack", n).value());
  CHECK_FALSE(e.sum_of("/d/1.pack", n - 1).has_value());  // a prefix is not summed
  CHECK_FALSE(e.sum_of("/d/1.pack", n + 1).has_value());
  // The sum outlives the file object (the store closed it).
  CHECK(e.sum_of("/d/1.pack", n) == sum);
  // Another suffix is not summed; nor is a file opened without being created afresh.
  const std::uint64_t m = write_parts(e, "/d/1.idx", 3);
  CHECK_FALSE(e.sum_of("/d/1.idx", m).has_value());
  {
    auto f = must_open(base, "/d/2.pack", open_mode::create_truncate);
    REQUIRE(f->append("abc").is_ok());
  }
  auto existing = must_open(e, "/d/2.pack", open_mode::open_existing);
  REQUIRE(existing->append("def").is_ok());
  CHECK_FALSE(e.sum_of("/d/2.pack", 6).has_value());
  CHECK_FALSE(e.sum_of("/d/2.pack", 3).has_value());
}

TEST_CASE("summing_env: a write in place, a truncate, a reservation, a reopen, a removal or a rename forgets it") {
  fault_env base;
  REQUIRE(base.create_dir("/d").is_ok());
  summing_env e(base, ".pack");
  auto f = must_open(e, "/d/a.pack", open_mode::create_new);
  REQUIRE(f->append("0123456789").is_ok());
  REQUIRE(e.sum_of("/d/a.pack", 10).has_value());

  SUBCASE("write_at") { REQUIRE(f->write_at(2, "x").is_ok()); }
  SUBCASE("truncate") { REQUIRE(f->truncate(10).is_ok()); }
  SUBCASE("preallocate") {
    (void)f->preallocate(4096);  // forgets whether or not the env can reserve
  }
  SUBCASE("reopened") { must_open(e, "/d/a.pack", open_mode::open_or_create); }
  SUBCASE("removed") {
    f.reset();
    REQUIRE(e.remove("/d/a.pack").is_ok());
  }
  SUBCASE("renamed over") {
    write_parts(e, "/d/b.pack", 2);
    REQUIRE(e.rename("/d/b.pack", "/d/a.pack").is_ok());
    CHECK_FALSE(e.sum_of("/d/b.pack", 1).has_value());
  }
  CHECK_FALSE(e.sum_of("/d/a.pack", 10).has_value());
  if (f) {
    // Appends after the sum was forgotten do not bring it back.
    REQUIRE(f->append("more").is_ok());
    CHECK_FALSE(e.sum_of("/d/a.pack", 14).has_value());
  }
}

TEST_CASE("summing_env: an append that fails (a full disk) forgets the sum: part of it may be in the file") {
  fault_env base;
  REQUIRE(base.create_dir("/d").is_ok());
  summing_env e(base, ".pack");
  auto f = must_open(e, "/d/a.pack", open_mode::create_new);
  REQUIRE(f->append("0123456789").is_ok());
  base.fail_write(1, status_code::no_space, 3);
  CHECK_FALSE(f->append("abcdef").is_ok());
  CHECK_FALSE(e.sum_of("/d/a.pack", 10).has_value());
  CHECK_FALSE(e.sum_of("/d/a.pack", 13).has_value());
}
