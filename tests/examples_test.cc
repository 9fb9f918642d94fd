// The examples/ programs and the installed library, checked as a user meets them:
// the README's embedding example is examples/readme_example.cc byte for byte
// and runs; examples/host_program runs its own actor system and checks itself;
// `meson install` into a scratch DESTDIR holds the library, the public headers
// (include/magnetite/, and none of the engine's), the tool and the .pc files
// (and no test or benchmark); a program outside the tree builds against it
// with `pkg-config --cflags --libs magnetite` and runs, pulls in no CAF header
// through <magnetite/database.h> and <magnetite/state.h>, and is stopped with
// a clear error below C++20; a host that includes <magnetite/caf.h> builds with
// magnetite-caf; a CMake project (find_package) and a meson project
// (dependency) build the README's program; the library exports its API and
// hides the engine.
//
// Paths come from meson at configure time (tests/meson.build). In a sanitized
// build the installed library needs the sanitizer's runtime, so the program
// outside the tree is compiled with the same -fsanitize flags.
#include <doctest/doctest.h>

#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tests/support/temp_dir.h"

namespace fs = std::filesystem;

namespace {

const std::string source_root = MAGNETITE_SOURCE_ROOT;
const std::string build_root = MAGNETITE_BUILD_ROOT;

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

struct run_result {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// Runs a shell command line, capturing its stdout and stderr.
run_result run(const std::string& command) {
  magnetite::testing::temp_dir scratch("examples-out");
  std::string out = scratch / "out", err = scratch / "err";
  int rc = std::system((command + " >" + quote(out) + " 2>" + quote(err)).c_str());
  run_result r;
  r.exit_code = rc != -1 && WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  r.out = read_file(out);
  r.err = read_file(err);
  return r;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// "root " and 32 lowercase hex digits.
bool is_root_line(const std::string& line) {
  if (line.size() != 37 || !line.starts_with("root ")) return false;
  return std::all_of(line.begin() + 5, line.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

// What readme_example prints: the same on every run (its root hash is checked for its form only).
void check_readme_output(const run_result& r) {
  INFO("stdout:\n" << r.out << "stderr:\n" << r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.err.empty());
  auto lines = lines_of(r.out);
  REQUIRE(lines.size() == 5);
  CHECK(lines[0] == "apple is red");
  CHECK(lines[1] == "fruit/apple = red");
  CHECK(lines[2] == "fruit/kiwi = green");
  CHECK(lines[3] == "session/42 expired");
  CHECK(is_root_line(lines[4]));
}

// The first ```cpp block of README.md's "## Embedding" section, or "" if there is none.
std::string readme_embedding_block(const std::string& readme) {
  auto section = readme.find("\n## Embedding\n");
  if (section == std::string::npos) return "";
  auto open = readme.find("\n```cpp\n", section);
  auto next_section = readme.find("\n## ", section + 1);
  if (open == std::string::npos || (next_section != std::string::npos && open > next_section)) return "";
  auto begin = open + 8;
  auto close = readme.find("\n```\n", begin - 1);
  if (close == std::string::npos) return "";
  return readme.substr(begin, close + 1 - begin);
}

// Every public header, as "magnetite/name.h": what a host includes and what
// `meson install` installs, all of include/magnetite/.
std::vector<std::string> public_headers() {
  std::vector<std::string> out;
  fs::path include = fs::path(source_root) / "include";
  for (auto& e : fs::recursive_directory_iterator(include / "magnetite"))
    if (e.path().extension() == ".h") out.push_back(fs::relative(e.path(), include).string());
  std::sort(out.begin(), out.end());
  return out;
}

// One `meson install` of this build into a scratch DESTDIR, made by the first
// test that needs it and removed when the process ends.
struct installed_tree {
  magnetite::testing::temp_dir dir{"examples-install"};
  std::string destdir = dir / "root";
  run_result install = run(quote(MAGNETITE_MESON) + " install -C " + quote(build_root) + " --no-rebuild --destdir " +
                           quote(destdir));

  fs::path at(const std::string& absolute) const { return fs::path(destdir + absolute); }
  fs::path libdir() const { return at(MAGNETITE_INSTALL_LIBDIR); }
  fs::path includedir() const { return at(MAGNETITE_INSTALL_INCLUDEDIR); }
  fs::path bindir() const { return at(MAGNETITE_INSTALL_BINDIR); }
  // `pkg-config ARGS module` against the installed .pc files, as they are:
  // they locate the tree from where they are (relocatable), so a DESTDIR
  // needs no --define-prefix or --define-variable.
  run_result pkg_config(const std::string& args, const std::string& module = "magnetite") const {
    return run("PKG_CONFIG_PATH=" + quote((libdir() / "pkgconfig").string()) + " pkg-config " + args + " " + module);
  }
  // The first line of `pkg-config --cflags --libs module`.
  std::string flags(const std::string& module = "magnetite") const {
    auto r = pkg_config("--cflags --libs", module);
    REQUIRE_MESSAGE(r.exit_code == 0, "pkg-config " << module << ": " << r.out << r.err);
    return r.out.substr(0, r.out.find('\n'));
  }
  // Is `p` one of the files a host needs: the library, a header, the .pc, the tool?
  bool expected(const fs::path& p) const {
    if (p.parent_path() == bindir()) return p.filename() == "magnetite";
    if (p.parent_path() == libdir()) return p.filename().string().starts_with("libmagnetite.so");
    if (p == libdir() / "pkgconfig" / "magnetite.pc" || p == libdir() / "pkgconfig" / "magnetite-caf.pc") return true;
    if (p == libdir() / "cmake" / "magnetite" / "magnetiteConfig.cmake" ||
        p == libdir() / "cmake" / "magnetite" / "magnetiteConfigVersion.cmake")
      return true;
    return p.string().starts_with((includedir() / "magnetite").string() + "/") && p.extension() == ".h";
  }
};

const installed_tree& installed() {
  static installed_tree t;
  return t;
}

std::string joined(const std::vector<std::string>& xs) {
  std::string out;
  for (const auto& x : xs) out += (out.empty() ? "" : ", ") + x;
  return out;
}

// The compiler and sanitizer flags this build uses, for a program outside the tree.
std::string compiler() {
  std::string cxx = MAGNETITE_CXX;
  std::string sanitize = MAGNETITE_SANITIZE;
  if (sanitize != "none") cxx += " -fsanitize=" + sanitize + " -fno-omit-frame-pointer";
  return cxx;
}

}  // namespace

TEST_CASE("readme: the Embedding section's code is examples/readme_example.cc, byte for byte") {
  std::string readme = read_file(fs::path(source_root) / "README.md");
  std::string example = read_file(fs::path(source_root) / "examples" / "readme_example.cc");
  REQUIRE(!example.empty());
  std::string block = readme_embedding_block(readme);
  REQUIRE_MESSAGE(!block.empty(), "README.md has no ```cpp block in a section '## Embedding'");
  // On a difference, say where (not both texts whole).
  auto a = lines_of(block), b = lines_of(example);
  std::size_t i = 0;
  while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
  bool same = block == example;
  CHECK_MESSAGE(same, "README.md's block and examples/readme_example.cc differ first at line "
                          << i + 1 << ":\n  README:  " << (i < a.size() ? a[i] : "<end>")
                          << "\n  example: " << (i < b.size() ? b[i] : "<end>")
                          << std::string(i == a.size() && i == b.size() ? " (the lines agree: a final newline differs)" : ""));
  // "About 20 lines": what a new user reads before the links.
  CHECK(lines_of(example).size() <= 40);
}

TEST_CASE("readme example: the built program prints what the README promises, on a new and a reopened directory") {
  REQUIRE(fs::exists(MAGNETITE_README_EXAMPLE));
  magnetite::testing::temp_dir d("readme-example");
  std::string cmd = quote(MAGNETITE_README_EXAMPLE) + " " + quote(d / "db");
  check_readme_output(run(cmd));
  CHECK(fs::exists(fs::path(d / "db") / "MANIFEST"));
  check_readme_output(run(cmd));  // reopened: same output
}

TEST_CASE("host program: its own actor system, typed messages and the C++ API agree, twice on one directory") {
  REQUIRE(fs::exists(MAGNETITE_HOST_PROGRAM));
  magnetite::testing::temp_dir d("host-program");
  for (int round = 0; round < 2; ++round) {
    auto r = run(quote(MAGNETITE_HOST_PROGRAM) + " " + quote(d / "db"));
    INFO("round " << round << "\nstdout:\n" << r.out << "stderr:\n" << r.err);
    CHECK(r.exit_code == 0);
    CHECK(r.err.empty());
    auto lines = lines_of(r.out);
    REQUIRE(!lines.empty());
    CHECK(lines.back() == "host_program: ok");
    for (const char* step : {"put by message, db.get: user/ada = lovelace", "db.put, get by message: user/bob = babbage",
                             "cas by message: user/ada = king", "empty key refused: invalid argument",
                             "host actor: 200 async puts acknowledged", "commit by message: shard",
                             "ttl by message: token/1 expired"})
      CHECK_MESSAGE(r.out.find(step) != std::string::npos, step);
  }
}

TEST_CASE("install: the library, the public headers and none of the engine's, the .pc files and the tool") {
  const auto& t = installed();
  REQUIRE_MESSAGE(t.install.exit_code == 0, "meson install:\n" << t.install.out << t.install.err);

  CHECK(fs::exists(t.libdir() / "libmagnetite.so"));
  CHECK(fs::exists(t.libdir() / "libmagnetite.so.0"));  // the SONAME's link
  CHECK(fs::exists(t.libdir() / "pkgconfig" / "magnetite.pc"));
  CHECK(fs::exists(t.libdir() / "pkgconfig" / "magnetite-caf.pc"));
  CHECK(fs::exists(t.libdir() / "cmake" / "magnetite" / "magnetiteConfig.cmake"));
  CHECK(fs::exists(t.bindir() / "magnetite"));
  auto headers = public_headers();
  REQUIRE(std::find(headers.begin(), headers.end(), "magnetite/database.h") != headers.end());
  std::vector<std::string> installed_headers;
  for (auto& e : fs::recursive_directory_iterator(t.includedir()))
    if (!e.is_directory()) installed_headers.push_back(fs::relative(e.path(), t.includedir()).string());
  std::sort(installed_headers.begin(), installed_headers.end());
  CHECK_MESSAGE(installed_headers == headers, "installed: " << joined(installed_headers) << "\npublic: " << joined(headers));

  // Nothing but the library, headers, the .pc files and the tool.
  std::vector<std::string> unexpected;
  for (auto& e : fs::recursive_directory_iterator(t.destdir))
    if (!e.is_directory() && !t.expected(e.path())) unexpected.push_back(e.path().string().substr(t.destdir.size()));
  CHECK_MESSAGE(unexpected.empty(), "installed but should not be: " << joined(unexpected));
}

TEST_CASE("install: a program outside the tree builds with `pkg-config --cflags --libs magnetite` and runs") {
  const auto& t = installed();
  REQUIRE_MESSAGE(t.install.exit_code == 0, "meson install:\n" << t.install.out << t.install.err);

  std::string pc = t.flags();
  INFO("pkg-config: " << pc);
  CHECK(pc.find("-lmagnetite") != std::string::npos);
  CHECK(pc.find("-std=c++20") != std::string::npos);
  // The -I names the installed include directory (written relative to the
  // .pc file's own place, so compare the directories, not the spellings).
  bool include_dir_found = false;
  std::istringstream words(pc);
  for (std::string w; words >> w;)
    if (w.starts_with("-I") && fs::exists(w.substr(2)) && fs::equivalent(w.substr(2), t.includedir()))
      include_dir_found = true;
  CHECK(include_dir_found);
  // The engine's libraries are the shared library's own: a dynamic link
  // names none of them (Libs.private has them for a static one).
  CHECK(pc.find("-lcaf_core") == std::string::npos);
  CHECK(pc.find("-lzstd") == std::string::npos);
  // Only the installed tree: nothing of the source or the build directory.
  CHECK(pc.find(source_root + "/") == std::string::npos);
  CHECK(pc.find(build_root + "/") == std::string::npos);

  // The README's program, copied out of the tree, plus one file that includes
  // every installed header (their own includes must resolve in the install).
  magnetite::testing::temp_dir work("examples-outside");
  fs::copy_file(fs::path(source_root) / "examples" / "readme_example.cc", work / "app.cc");
  {
    std::ofstream all(work / "all_headers.cc");
    for (const auto& h : public_headers()) all << "#include <" << h << ">\n";
  }
  auto syntax = run("cd " + quote(work.path()) + " && " + compiler() + " -fsyntax-only all_headers.cc " + pc);
  INFO("all headers: " << syntax.err);
  CHECK(syntax.exit_code == 0);

  // The compiler is told nothing but what pkg-config says (C++20 included).
  auto build = run("cd " + quote(work.path()) + " && " + compiler() + " -O0 app.cc -o app " + pc + " -Wl,-rpath," +
                   quote(t.libdir().string()));
  INFO("compiler: " << build.out << build.err);
  REQUIRE(build.exit_code == 0);
  auto linked = run("ldd " + quote(work / "app"));
  CHECK(linked.out.find((t.libdir() / "libmagnetite.so.0").string()) != std::string::npos);
  check_readme_output(run(quote(work / "app") + " " + quote(work / "db")));
}

TEST_CASE("install: <magnetite/database.h> and <magnetite/state.h> pull in no CAF header; <magnetite/caf.h> does") {
  const auto& t = installed();
  REQUIRE_MESSAGE(t.install.exit_code == 0, "meson install:\n" << t.install.out << t.install.err);
  magnetite::testing::temp_dir work("examples-includes");
  auto dependencies = [&](const std::string& includes) {
    { std::ofstream(work / "host.cc") << includes; }
    auto r = run("cd " + quote(work.path()) + " && " + compiler() + " -M host.cc " + t.flags());
    INFO("compiler: " << r.err);
    REQUIRE(r.exit_code == 0);
    return r.out;
  };
  auto plain = dependencies("#include <magnetite/database.h>\n#include <magnetite/state.h>\n");
  CHECK(plain.find("magnetite/database.h") != std::string::npos);
  CHECK_MESSAGE(plain.find("/caf/") == std::string::npos, "CAF headers reached:\n" << plain);
  // The same check sees CAF where it is.
  CHECK(dependencies("#include <magnetite/caf.h>\n").find("/caf/") != std::string::npos);
}

TEST_CASE("install: below C++20 a public header stops with an error that says C++20 is needed") {
  const auto& t = installed();
  REQUIRE_MESSAGE(t.install.exit_code == 0, "meson install:\n" << t.install.out << t.install.err);
  magnetite::testing::temp_dir work("examples-cxx17");
  { std::ofstream(work / "old.cc") << "#include <magnetite/database.h>\nint main() {}\n"; }
  // -std=c++17 after pkg-config's -std=c++20: the last one counts.
  auto r = run("cd " + quote(work.path()) + " && " + compiler() + " -fsyntax-only old.cc " + t.flags() + " -std=c++17");
  CHECK(r.exit_code != 0);
  CHECK_MESSAGE(r.err.find("magnetite needs C++20") != std::string::npos, r.err);
}

TEST_CASE("install: a host with its own actor system builds host_program with magnetite-caf, and it runs") {
  const auto& t = installed();
  REQUIRE_MESSAGE(t.install.exit_code == 0, "meson install:\n" << t.install.out << t.install.err);
  std::string pc = t.flags("magnetite-caf");
  INFO("pkg-config: " << pc);
  CHECK(pc.find("-lcaf_core") != std::string::npos);
  CHECK(pc.find("-lmagnetite") != std::string::npos);
  magnetite::testing::temp_dir work("examples-caf");
  fs::copy_file(fs::path(source_root) / "examples" / "host_program.cc", work / "host.cc");
  auto build = run("cd " + quote(work.path()) + " && " + compiler() + " -O0 host.cc -o host " + pc + " -Wl,-rpath," +
                   quote(t.libdir().string()));
  INFO("compiler: " << build.out << build.err);
  REQUIRE(build.exit_code == 0);
  auto r = run(quote(work / "host") + " " + quote(work / "db"));
  INFO("stdout:\n" << r.out << "stderr:\n" << r.err);
  CHECK(r.exit_code == 0);
  CHECK(lines_of(r.out).back() == "host_program: ok");
}

TEST_CASE("install: the library exports the public API and hides the engine") {
  const auto& t = installed();
  REQUIRE_MESSAGE(t.install.exit_code == 0, "meson install:\n" << t.install.out << t.install.err);
  auto soname = run("objdump -p " + quote((t.libdir() / "libmagnetite.so").string()));
  CHECK(soname.out.find("SONAME               libmagnetite.so.0") != std::string::npos);
  auto symbols = run("nm -D --defined-only -C " + quote((t.libdir() / "libmagnetite.so").string()));
  REQUIRE(symbols.exit_code == 0);
  for (const char* api : {"magnetite::database::open(", "magnetite::version()", "magnetite::state::records::begin(",
                          "magnetite::open_database(caf::actor_system&"})
    CHECK_MESSAGE(symbols.out.find(api) != std::string::npos, "not exported: " << api);
  for (const char* engine : {"magnetite::database_core::", "magnetite::shard::", "magnetite::tree::", "magnetite::wal::",
                             "magnetite::replication::", "magnetite::layer::", "magnetite::read_view::"})
    CHECK_MESSAGE(symbols.out.find(engine) == std::string::npos, "exported: " << engine);
}

// The compiler and the sanitizer flags alone (CMake and meson take them apart).
// The compiler itself: the last word of this build's command (a launcher
// such as ccache comes first).
std::string compiler_program() {
  std::string cxx = MAGNETITE_CXX;
  return cxx.substr(cxx.rfind(' ') + 1);
}
std::string sanitizer_flags() {
  std::string sanitize = MAGNETITE_SANITIZE;
  return sanitize == "none" ? "" : "-fsanitize=" + sanitize + " -fno-omit-frame-pointer";
}

TEST_CASE("install: a CMake project with find_package(magnetite CONFIG) builds the examples, and they run") {
  const auto& t = installed();
  REQUIRE_MESSAGE(t.install.exit_code == 0, "meson install:\n" << t.install.out << t.install.err);
  magnetite::testing::temp_dir work("examples-cmake");
  fs::copy_file(fs::path(source_root) / "examples" / "readme_example.cc", work / "app.cc");
  fs::copy_file(fs::path(source_root) / "examples" / "host_program.cc", work / "host.cc");
  std::ofstream(work / "CMakeLists.txt") << "cmake_minimum_required(VERSION 3.20)\n"
                                            "project(app CXX)\n"
                                            "find_package(magnetite 0.1 CONFIG REQUIRED)\n"
                                            "add_executable(app app.cc)\n"
                                            "target_link_libraries(app PRIVATE magnetite::magnetite)\n"
                                            "add_executable(host host.cc)\n"
                                            "target_link_libraries(host PRIVATE magnetite::caf)\n";
  std::string prefix = t.at(MAGNETITE_INSTALL_PREFIX).string();
  auto configure = run("cmake -S " + quote(work.path()) + " -B " + quote(work / "build") + " -DCMAKE_PREFIX_PATH=" +
                       quote(prefix) + " -DCMAKE_CXX_COMPILER=" + quote(compiler_program()) +
                       " -DCMAKE_CXX_FLAGS=" + quote(sanitizer_flags()) + " -DCMAKE_EXE_LINKER_FLAGS=" +
                       quote(sanitizer_flags()));
  INFO("cmake: " << configure.out << configure.err);
  REQUIRE(configure.exit_code == 0);
  auto build = run("cmake --build " + quote(work / "build"));
  INFO("build: " << build.out << build.err);
  REQUIRE(build.exit_code == 0);
  check_readme_output(run(quote((fs::path(work / "build") / "app").string()) + " " + quote(work / "db")));
  auto host = run(quote((fs::path(work / "build") / "host").string()) + " " + quote(work / "host-db"));
  INFO("host_program: " << host.out << host.err);
  CHECK(host.exit_code == 0);
  CHECK(lines_of(host.out).back() == "host_program: ok");
}

TEST_CASE("install: a meson project with dependency('magnetite') builds the README example, and it runs") {
  const auto& t = installed();
  REQUIRE_MESSAGE(t.install.exit_code == 0, "meson install:\n" << t.install.out << t.install.err);
  magnetite::testing::temp_dir work("examples-meson");
  fs::copy_file(fs::path(source_root) / "examples" / "readme_example.cc", work / "app.cc");
  std::ofstream(work / "meson.build") << "project('app', 'cpp')\n"
                                         "executable('app', 'app.cc', dependencies : dependency('magnetite'))\n";
  std::string env = "PKG_CONFIG_PATH=" + quote((t.libdir() / "pkgconfig").string()) + " CXX=" +
                    quote(compiler_program()) + " CXXFLAGS=" + quote(sanitizer_flags()) + " LDFLAGS=" +
                    quote(sanitizer_flags());
  auto setup = run("cd " + quote(work.path()) + " && " + env + " " + quote(MAGNETITE_MESON) + " setup build");
  INFO("meson setup: " << setup.out << setup.err);
  REQUIRE(setup.exit_code == 0);
  auto build = run("cd " + quote(work.path()) + " && " + quote(MAGNETITE_MESON) + " compile -C build");
  INFO("meson compile: " << build.out << build.err);
  REQUIRE(build.exit_code == 0);
  check_readme_output(run("LD_LIBRARY_PATH=" + quote(t.libdir().string()) + " " + quote((fs::path(work / "build") / "app").string()) + " " +
                          quote(work / "db")));
}
