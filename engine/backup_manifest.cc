#include "engine/backup_manifest.h"

#include <fmt/format.h>

#include "engine/checkpoint_log.h"
#include "engine/sealed_text.h"

namespace magnetite {

namespace {

constexpr std::string_view kind = "magnetite-backup";

// The space-separated fields of a line.
std::vector<std::string_view> fields_of(std::string_view line) {
  std::vector<std::string_view> out;
  while (true) {
    std::size_t sp = line.find(' ');
    out.push_back(line.substr(0, sp));
    if (sp == std::string_view::npos) return out;
    line.remove_prefix(sp + 1);
  }
}

}  // namespace

std::string backup_manifest::text() const {
  std::string body = fmt::format("shards {}\n", shards);
  for (std::size_t i = 0; i < positions.size(); ++i) body += fmt::format("store {} {}\n", i, positions[i]);
  for (const auto& p : packs) body += fmt::format("pack {} {} {} {}\n", p.shard, p.number, p.bytes, p.sum.to_hex());
  for (const auto& v : versions) {
    body +=
        fmt::format("version {} {} {}", v.label.empty() ? "-" : v.label, v.made_ns, checkpoint_log::format(v.version));
    for (auto s : v.sequences) body += fmt::format(" {}", s);
    body += '\n';
  }
  return seal(kind, body);
}

result<backup_manifest> backup_manifest::parse(std::string_view text) {
  auto body = unseal(text, kind);
  if (!body) return body.error();
  backup_manifest m;
  bool have_shards = false;
  for (std::size_t at = 0; at < body->text.size();) {
    const std::size_t nl = body->text.find('\n', at);
    const std::size_t offset = body->offset + at;
    auto f = fields_of(body->text.substr(at, nl - at));
    at = nl + 1;
    std::uint64_t a = 0, b = 0, c = 0;
    if (f[0] == "shards") {
      if (have_shards || f.size() != 2 || !parse_decimal(f[1], a) || a == 0 || a > 100'000)
        return damaged_at(offset, "a bad \"shards\" line");
      m.shards = a;
      have_shards = true;
    } else if (!have_shards) {
      return damaged_at(offset, "the \"shards\" line must come first");
    } else if (f[0] == "store") {
      if (f.size() != 3 || !parse_decimal(f[1], a) || a != m.positions.size() || a >= m.shards ||
          !parse_decimal(f[2], b))
        return damaged_at(offset, "a bad \"store\" line");
      m.positions.push_back(b);
    } else if (f[0] == "pack") {
      auto sum = f.size() == 5 ? hash128::parse_hex(f[4]) : std::nullopt;
      if (!sum || !parse_decimal(f[1], a) || a >= m.shards || !parse_decimal(f[2], b) || b == 0 || b > UINT32_MAX ||
          !parse_decimal(f[3], c))
        return damaged_at(offset, "a bad \"pack\" line");
      m.packs.push_back({a, static_cast<std::uint32_t>(b), c, *sum});
    } else if (f[0] == "version") {
      // label, made, combined and N roots, N sequences
      if (f.size() != 3 + 1 + 2 * m.shards || !parse_decimal(f[2], a))
        return damaged_at(offset, "a bad \"version\" line");
      backed_up_version v;
      v.label = f[1] == "-" ? "" : std::string(f[1]);
      v.made_ns = a;
      std::string_view first = f[3];
      std::string_view last_root = f[3 + m.shards];
      auto cp = checkpoint_log::parse(
          std::string_view(first.data(), static_cast<std::size_t>(last_root.data() + last_root.size() - first.data())),
          m.shards);
      if (!cp) return damaged_at(offset, cp.error().message());
      v.version = std::move(*cp);
      for (std::size_t i = 0; i < m.shards; ++i) {
        if (!parse_decimal(f[4 + m.shards + i], b)) return damaged_at(offset, "a bad sequence in a \"version\" line");
        v.sequences.push_back(b);
      }
      m.versions.push_back(std::move(v));
    } else {
      return damaged_at(offset, fmt::format("an unknown line {:?}", f[0]));
    }
  }
  if (!have_shards || m.positions.size() != m.shards)
    return damaged_at(body->offset + body->text.size(), "a store line is missing");
  return m;
}

const backed_up_version* backup_manifest::find(std::string_view version) const {
  auto hex = hash128::parse_hex(version);
  for (auto it = versions.rbegin(); it != versions.rend(); ++it) {
    if (version.empty() || it->label == version || (hex && it->version.combined == *hex)) return &*it;
  }
  return nullptr;
}

}  // namespace magnetite
