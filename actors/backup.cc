// The calls of <magnetite/backup.h> that need no open database.
#include <fmt/format.h>

#include <filesystem>

#include "engine/backup_store.h"
#include "magnetite/backup.h"

namespace magnetite {

result<std::vector<backup_version>> list_backup(const std::string& backup_dir) {
  auto b = backup_store::open(env::posix(), backup_dir);
  if (!b) return b.error();
  std::vector<backup_version> out;
  for (const auto& v : (*b)->manifest().versions) out.push_back({v.version.combined, v.label, v.made_ns});
  return out;
}

status restore_backup(const std::string& backup_dir, const std::string& dir, std::optional<std::string_view> version) {
  auto b = backup_store::open(env::posix(), backup_dir);
  if (!b) return b.error();
  const backed_up_version* v = (*b)->manifest().find(version.value_or(""));
  if (!v)
    return status::not_found(version ? fmt::format("{} holds no version {}", backup_dir, *version)
                                     : fmt::format("{} holds no version yet", backup_dir));
  // What an interrupted restore left is removed first; what this one leaves
  // on an error, after. `dir` itself is never touched: restore refuses it
  // if it exists.
  std::error_code ec;
  if (!std::filesystem::exists(dir, ec)) std::filesystem::remove_all(dir + ".restoring", ec);
  status s = (*b)->restore(*v, dir);
  if (!s && !std::filesystem::exists(dir, ec)) std::filesystem::remove_all(dir + ".restoring", ec);
  return s;
}

result<backup_verify_report> verify_backup(const std::string& backup_dir) {
  auto b = backup_store::open(env::posix(), backup_dir);
  if (!b) return b.error();
  auto c = (*b)->check();
  return backup_verify_report{c.versions, c.nodes, c.bytes, std::move(c.problems)};
}

}  // namespace magnetite
