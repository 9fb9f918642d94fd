#include "engine/backup_manifest.h"

#include <fmt/format.h>

#include <charconv>

#include "engine/checkpoint_log.h"

namespace magnetite {

namespace {

constexpr std::string_view header = "magnetite-backup 1\n";
constexpr std::string_view header_word = "magnetite-backup ";

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

bool number_of(std::string_view text, std::uint64_t& out) {
  if (text.empty() || (text.size() > 1 && text[0] == '0')) return false;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && end == text.data() + text.size();
}

}  // namespace

std::string backup_manifest::text() const {
  std::string out(header);
  out += fmt::format("shards {}\n", shards);
  for (std::size_t i = 0; i < positions.size(); ++i) out += fmt::format("store {} {}\n", i, positions[i]);
  for (const auto& p : packs) out += fmt::format("pack {} {} {} {}\n", p.shard, p.number, p.bytes, p.sum.to_hex());
  for (const auto& v : versions) {
    out +=
        fmt::format("version {} {} {}", v.label.empty() ? "-" : v.label, v.made_ns, checkpoint_log::format(v.version));
    for (auto s : v.sequences) out += fmt::format(" {}", s);
    out += '\n';
  }
  std::size_t lines = 2 + positions.size() + packs.size() + versions.size();
  out += fmt::format("end {} {}\n", lines, hash128::of(out).to_hex());
  return out;
}

result<backup_manifest> backup_manifest::parse(std::string_view text) {
  auto bad = [](std::size_t offset, std::string_view why) {
    return status::corruption(fmt::format("offset {}: {}", offset, why));
  };
  if (!text.starts_with(header)) {
    if (text.starts_with(header_word)) {
      std::uint64_t format = 0;
      std::string_view rest = text.substr(header_word.size());
      if (number_of(rest.substr(0, rest.find('\n')), format) && format > 1)
        return status::make(status_code::not_supported, status_category::permanent,
                            fmt::format("format version {}; this build reads version 1", format));
    }
    return bad(0, "no \"magnetite-backup 1\" header");
  }
  if (!text.ends_with('\n')) return bad(text.size(), "the file does not end with a line's end");
  std::size_t last = text.rfind('\n', text.size() - 2) + 1;
  auto trailer = fields_of(text.substr(last, text.size() - 1 - last));
  if (trailer.size() != 3 || trailer[0] != "end") return bad(last, "the last line is not the \"end\" line");
  if (trailer[2] != hash128::of(text.substr(0, last)).to_hex())
    return bad(last, "the checksum of the \"end\" line does not match the bytes before it");
  std::uint64_t lines = 0;
  if (!number_of(trailer[1], lines)) return bad(last, "the \"end\" line's count is not a number");

  backup_manifest m;
  std::uint64_t seen = 1;  // the header
  bool have_shards = false;
  for (std::size_t at = header.size(); at < last; ++seen) {
    std::size_t nl = text.find('\n', at);
    auto f = fields_of(text.substr(at, nl - at));
    std::uint64_t a = 0, b = 0, c = 0;
    if (f[0] == "shards") {
      if (have_shards || f.size() != 2 || !number_of(f[1], a) || a == 0 || a > 100'000)
        return bad(at, "a bad \"shards\" line");
      m.shards = a;
      have_shards = true;
    } else if (!have_shards) {
      return bad(at, "the \"shards\" line must come first");
    } else if (f[0] == "store") {
      if (f.size() != 3 || !number_of(f[1], a) || a != m.positions.size() || a >= m.shards || !number_of(f[2], b))
        return bad(at, "a bad \"store\" line");
      m.positions.push_back(b);
    } else if (f[0] == "pack") {
      auto sum = f.size() == 5 ? hash128::parse_hex(f[4]) : std::nullopt;
      if (!sum || !number_of(f[1], a) || a >= m.shards || !number_of(f[2], b) || b == 0 || b > UINT32_MAX ||
          !number_of(f[3], c))
        return bad(at, "a bad \"pack\" line");
      m.packs.push_back({a, static_cast<std::uint32_t>(b), c, *sum});
    } else if (f[0] == "version") {
      // label, made, combined and N roots, N sequences
      if (f.size() != 3 + 1 + 2 * m.shards || !number_of(f[2], a)) return bad(at, "a bad \"version\" line");
      backed_up_version v;
      v.label = f[1] == "-" ? "" : std::string(f[1]);
      v.made_ns = a;
      std::string_view first = f[3];
      std::string_view last_root = f[3 + m.shards];
      auto c = checkpoint_log::parse(
          std::string_view(first.data(), static_cast<std::size_t>(last_root.data() + last_root.size() - first.data())),
          m.shards);
      if (!c) return bad(at, c.error().message());
      v.version = std::move(*c);
      for (std::size_t i = 0; i < m.shards; ++i) {
        if (!number_of(f[4 + m.shards + i], b)) return bad(at, "a bad sequence in a \"version\" line");
        v.sequences.push_back(b);
      }
      m.versions.push_back(std::move(v));
    } else {
      return bad(at, fmt::format("an unknown line {:?}", f[0]));
    }
    at = nl + 1;
  }
  if (!have_shards || m.positions.size() != m.shards) return bad(last, "a store line is missing");
  if (seen != lines) return bad(last, fmt::format("the \"end\" line counts {} lines, the file holds {}", lines, seen));
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
