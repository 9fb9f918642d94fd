// A fresh directory under the system temp dir, removed with its contents when
// the object goes away (unless MAGNETITE_KEEP_TEST_DIRS is set, for debugging).
#pragma once

#include <cstdlib>
#include <filesystem>
#include <string>

namespace magnetite::testing {

class temp_dir {
 public:
  explicit temp_dir(const std::string& tag = "t") {
    std::string pattern = (std::filesystem::temp_directory_path() / ("magnetite-" + tag + "-XXXXXX")).string();
    char* made = ::mkdtemp(pattern.data());
    if (!made) throw std::runtime_error("mkdtemp failed");
    path_ = made;
  }
  ~temp_dir() {
    if (!std::getenv("MAGNETITE_KEEP_TEST_DIRS")) {
      std::error_code ec;
      std::filesystem::remove_all(path_, ec);
    }
  }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;

  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

}  // namespace magnetite::testing
