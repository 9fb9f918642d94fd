// The env contract, checked against both implementations, plus what only the
// POSIX one can show (a lock held by another process).
#include <doctest/doctest.h>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include "core/env.h"
#include "core/fault_env.h"
#include "tests/support/temp_dir.h"

using namespace magnetite;

namespace {

struct posix_fixture {
  testing::temp_dir dir{"env"};
  env& e = env::posix();
  std::string root() const { return dir.path(); }
};

struct fault_fixture {
  fault_env e;
  fault_fixture() { REQUIRE(e.create_dir("/db").is_ok()); }
  std::string root() const { return "/db"; }
};

template <class F>
void check_env_contract() {
  F fx;
  env& e = fx.e;
  std::string a = path_join(fx.root(), "a");
  std::string b = path_join(fx.root(), "b");

  CHECK(e.open(a, open_mode::open_existing).error().code() == status_code::not_found);
  auto f = e.open(a, open_mode::create_new);
  REQUIRE(f.is_ok());
  CHECK_FALSE(e.open(a, open_mode::create_new).is_ok());
  REQUIRE((*f)->append("hello").is_ok());
  REQUIRE((*f)->append(" world").is_ok());
  REQUIRE((*f)->write_at(0, "J").is_ok());
  CHECK((*f)->size().value() == 11);
  char buf[32];
  CHECK((*f)->read_at(0, sizeof buf, buf).value() == 11);
  CHECK(std::string(buf, 11) == "Jello world");
  CHECK((*f)->read_at(6, 3, buf).value() == 3);
  CHECK(std::string(buf, 3) == "wor");
  CHECK((*f)->read_at(100, 3, buf).value() == 0);
  REQUIRE((*f)->truncate(5).is_ok());
  CHECK((*f)->size().value() == 5);
  REQUIRE((*f)->sync().is_ok());
  // write_at past the end extends the file with zeros.
  REQUIRE((*f)->write_at(7, "!").is_ok());
  CHECK((*f)->size().value() == 8);
  CHECK(read_whole_file(e, a).value() == std::string("Jello\0\0!", 8));
  (*f).reset();  // close

  // Reopening appends at the end.
  auto g = e.open(a, open_mode::open_or_create);
  REQUIRE(g.is_ok());
  REQUIRE((*g)->append("?").is_ok());
  CHECK(read_whole_file(e, a).value().back() == '?');
  auto t = e.open(a, open_mode::create_truncate);
  REQUIRE(t.is_ok());
  CHECK((*t)->size().value() == 0);

  // append writes at the CURRENT end: after a truncate, and after a write_at
  // that extended the file.
  REQUIRE((*t)->append("abcdef").is_ok());
  REQUIRE((*t)->truncate(2).is_ok());
  REQUIRE((*t)->append("XY").is_ok());
  CHECK(read_whole_file(e, a).value() == "abXY");
  REQUIRE((*t)->write_at(6, "!").is_ok());
  REQUIRE((*t)->append("Z").is_ok());
  CHECK(read_whole_file(e, a).value() == std::string("abXY\0\0!Z", 8));
  // preallocate: the file grows to the size asked, reading zeros; written
  // bytes inside it stay; it never shrinks; append goes after the reserved end.
  REQUIRE((*t)->preallocate(4096).is_ok());
  CHECK((*t)->size().value() == 4096);
  std::string reserved = read_whole_file(e, a).value();
  CHECK(reserved.substr(0, 8) == std::string("abXY\0\0!Z", 8));
  CHECK(reserved.find_first_not_of('\0', 8) == std::string::npos);
  REQUIRE((*t)->preallocate(100).is_ok());
  CHECK((*t)->size().value() == 4096);
  REQUIRE((*t)->write_at(8, "in").is_ok());
  CHECK((*t)->size().value() == 4096);
  REQUIRE((*t)->sync().is_ok());
  REQUIRE((*t)->truncate(10).is_ok());
  CHECK(read_whole_file(e, a).value() == std::string("abXY\0\0!Zin", 10));
  (*t).reset();
  (*g).reset();

  REQUIRE(e.rename(a, b).is_ok());
  CHECK_FALSE(e.exists(a).value());
  CHECK(e.exists(b).value());
  CHECK(e.rename(a, b).code() == status_code::not_found);
  REQUIRE(e.create_dir(path_join(fx.root(), "sub")).is_ok());
  REQUIRE(e.create_dir(path_join(fx.root(), "sub")).is_ok());  // idempotent
  CHECK(e.is_directory(path_join(fx.root(), "sub")).value());
  CHECK_FALSE(e.is_directory(b).value());
  CHECK(e.create_dir(b).code() == status_code::invalid_argument);
  REQUIRE(e.sync_dir(fx.root()).is_ok());
  auto names = e.list(fx.root());
  REQUIRE(names.is_ok());
  CHECK(*names == std::vector<std::string>{"b", "sub"});
  REQUIRE(e.remove(b).is_ok());
  CHECK(e.remove(b).code() == status_code::not_found);
  CHECK(e.list(path_join(fx.root(), "missing")).error().code() == status_code::not_found);

  // Locks are exclusive, even within one process, and released on destruction.
  std::string lock_path = path_join(fx.root(), "LOCK");
  {
    auto l1 = e.lock(lock_path);
    REQUIRE(l1.is_ok());
    auto l2 = e.lock(lock_path);
    REQUIRE_FALSE(l2.is_ok());
    CHECK(l2.error().code() == status_code::busy);
    CHECK(l2.error().message().find("in use") != std::string::npos);
  }
  CHECK(e.lock(lock_path).is_ok());
}

}  // namespace

TEST_CASE("env contract: posix") { check_env_contract<posix_fixture>(); }
TEST_CASE("env contract: fault_env") { check_env_contract<fault_fixture>(); }

TEST_CASE("posix env: a lock held by another process is refused with busy") {
  testing::temp_dir dir("lock");
  std::string lock_path = dir / "LOCK";
  auto mine = env::posix().lock(lock_path);
  REQUIRE(mine.is_ok());
  pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    auto theirs = env::posix().lock(lock_path);
    ::_exit(!theirs.is_ok() && theirs.error().code() == status_code::busy ? 0 : 1);
  }
  int wstatus = 0;
  REQUIRE(::waitpid(child, &wstatus, 0) == child);
  CHECK(WIFEXITED(wstatus));
  CHECK(WEXITSTATUS(wstatus) == 0);

  (*mine).reset();  // release
  child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) ::_exit(env::posix().lock(lock_path).is_ok() ? 0 : 1);
  REQUIRE(::waitpid(child, &wstatus, 0) == child);
  CHECK(WEXITSTATUS(wstatus) == 0);
}

TEST_CASE("posix env: errors name the path") {
  auto r = env::posix().open("/nonexistent-dir-for-magnetite/x", open_mode::open_or_create);
  REQUIRE_FALSE(r.is_ok());
  CHECK(r.error().code() == status_code::not_found);
  CHECK(r.error().message().find("/nonexistent-dir-for-magnetite/x") != std::string::npos);
}

namespace {
// Runs `body` with the process umask set to `mask`, and restores it.
template <class F>
void with_umask(mode_t mask, F body) {
  mode_t old = ::umask(mask);
  body();
  ::umask(old);
}
}  // namespace

TEST_CASE("posix env: what it creates is private (0600, 0700) whatever the umask; what exists keeps its mode") {
  for (mode_t mask : {mode_t{0}, mode_t{022}, mode_t{0277}}) {
    CAPTURE(mask);
    posix_fixture fx;
    with_umask(mask, [&] {
      std::string dir = path_join(fx.root(), "d");
      REQUIRE(fx.e.create_dir(dir).is_ok());
      CHECK(fx.e.permissions(dir).value() == 0700);
      int n = 0;
      for (auto mode : {open_mode::create_new, open_mode::open_or_create, open_mode::create_truncate}) {
        std::string p = path_join(dir, fmt::format("f{}", n++));
        auto f = fx.e.open(p, mode);
        REQUIRE_MESSAGE(f.is_ok(), f.error().to_string());
        CHECK(fx.e.permissions(p).value() == 0600);
      }
      {
        auto l = fx.e.lock(path_join(dir, "LOCK"));
        REQUIRE(l.is_ok());
        CHECK(fx.e.permissions(path_join(dir, "LOCK")).value() == 0600);
      }
      // A file someone else made, or chmod-ed on purpose, is not touched by a reopen.
      std::string shared = path_join(dir, "shared");
      REQUIRE(fx.e.open(shared, open_mode::create_new).is_ok());
      REQUIRE(::chmod(shared.c_str(), 0640) == 0);
      REQUIRE(fx.e.open(shared, open_mode::open_or_create).is_ok());
      REQUIRE(fx.e.open(shared, open_mode::open_existing).is_ok());
      CHECK(fx.e.permissions(shared).value() == 0640);
    });
  }
}

TEST_CASE("env: permissions are not_supported where the layer has none (fault_env)") {
  fault_fixture fx;
  auto p = fx.e.permissions("/db");
  REQUIRE_FALSE(p.is_ok());
  CHECK(p.error().code() == status_code::not_supported);
}
