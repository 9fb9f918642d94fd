// magnetite_process: the built `magnetite` tool run as a child process, as an
// operator runs it, its stdout and stderr into one file. The tool is found
// beside the test binary's directory (build/tools/magnetite for
// build/tests/X), so a sanitizer build's tests run its own tool.
#pragma once

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

namespace magnetite::testing {

inline std::string magnetite_tool_path() {
  auto exe = std::filesystem::read_symlink("/proc/self/exe");
  return (exe.parent_path().parent_path() / "tools" / "magnetite").string();
}

// `magnetite args...` with its output in `out` (truncated); the child's pid.
// A child that cannot exec exits 127.
inline pid_t spawn_magnetite(const std::vector<std::string>& args, const std::string& out) {
  std::string tool = magnetite_tool_path();
  std::vector<char*> argv{tool.data()};
  std::vector<std::string> copies(args);
  for (auto& a : copies) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid == 0) {
    int fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    ::execv(tool.c_str(), argv.data());
    ::_exit(127);
  }
  return pid;
}

// One node of a plaintext cluster (`tls off`, on loopback, as the tests'
// are): `magnetite --data DATA serve --node ID --cluster FILE --insecure`.
inline pid_t spawn_serve(const std::string& data, std::uint32_t id, const std::string& cluster,
                         const std::string& out) {
  return spawn_magnetite({"--data", data, "serve", "--node", std::to_string(id), "--cluster", cluster, "--insecure"},
                         out);
}

// `magnetite args...` run to its end: its exit code (-1: killed by a
// signal) and its output, as `out` holds it then.
inline std::pair<int, std::string> run_magnetite(const std::vector<std::string>& args, const std::string& out) {
  pid_t pid = spawn_magnetite(args, out);
  int wstatus = 0;
  ::waitpid(pid, &wstatus, 0);
  std::ifstream in(out);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return {WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : -1, std::move(text)};
}

}  // namespace magnetite::testing
