#include "replication/cluster_file.h"

#include <algorithm>
#include <charconv>
#include <set>

#include <fmt/format.h>

namespace magnetite::replication {

namespace {

std::vector<std::string_view> words(std::string_view line) {
  std::vector<std::string_view> out;
  std::size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r')) ++i;
    std::size_t start = i;
    while (i < line.size() && line[i] != ' ' && line[i] != '\t' && line[i] != '\r') ++i;
    if (i > start) out.push_back(line.substr(start, i - start));
  }
  return out;
}

template <class T>
bool number(std::string_view s, T& out, T min, T max) {
  std::uint64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || v < min || v > max) return false;
  out = static_cast<T>(v);
  return true;
}

}  // namespace

bool valid_name(std::string_view s) {
  return !s.empty() && s.size() <= 64 && std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
           c == '.';
  });
}

result<cluster_file> cluster_file::parse(std::string_view text) {
  cluster_file out;
  bool have_shards = false, have_retention = false, have_tls = false;
  std::map<std::string, std::vector<client_grant>> grants;
  std::set<std::pair<std::string, std::uint16_t>> addresses;
  std::size_t line_no = 0;
  while (!text.empty()) {
    ++line_no;
    std::size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    if (auto hash = line.find('#'); hash != std::string_view::npos) line = line.substr(0, hash);
    auto w = words(line);
    if (w.empty()) continue;
    auto bad = [&](std::string_view why) {
      return status::invalid_argument(fmt::format("cluster file line {}: {}", line_no, why));
    };
    if (w[0] == "cluster") {
      if (w.size() != 2 || !valid_name(w[1])) return bad("expected `cluster NAME` (letters, digits, - _ .)");
      if (!out.name.empty()) return bad("a second `cluster` line");
      out.name = std::string(w[1]);
    } else if (w[0] == "shards") {
      if (have_shards) return bad("a second `shards` line");
      if (w.size() != 2 || !number<std::size_t>(w[1], out.shards, 1, 1024)) return bad("expected `shards N`, 1..1024");
      have_shards = true;
    } else if (w[0] == "tombstone_retention_s") {
      if (have_retention) return bad("a second `tombstone_retention_s` line");
      if (w.size() != 2 || !number<std::uint64_t>(w[1], out.tombstone_retention_s, 1, 10ull * 365 * 86'400))
        return bad("expected `tombstone_retention_s SECONDS`, 1 s to 10 years");
      have_retention = true;
    } else if (w[0] == "tls") {
      if (have_tls) return bad("a second `tls` line");
      if (w.size() != 2 || (w[1] != "on" && w[1] != "off")) return bad("expected `tls on` or `tls off`");
      out.tls = w[1] == "on";
      have_tls = true;
    } else if (w[0] == "node") {
      cluster_node n;
      if (w.size() != 4 || !number<std::uint32_t>(w[1], n.id, 1, UINT32_MAX) ||
          !number<std::uint16_t>(w[3], n.port, 1, 65535) || w[2].empty() || w[2].size() > 253)
        return bad("expected `node ID HOST PORT` (ID 1..4294967295, PORT 1..65535)");
      n.host = std::string(w[2]);
      if (out.node(n.id)) return bad(fmt::format("node {} is named twice", n.id));
      if (!addresses.emplace(n.host, n.port).second) return bad(fmt::format("{}:{} is given twice", n.host, n.port));
      out.nodes.push_back(std::move(n));
    } else if (w[0] == "client") {
      // client NAME MODE PREFIX, or client NAME MODE KIND NAME (client_access.h)
      if ((w.size() != 4 && w.size() != 5) || !valid_name(w[1]) || (w[2] != "read" && w[2] != "readwrite"))
        return bad(
            "expected `client NAME read|readwrite PREFIX` or `client NAME read|readwrite records|stream|state NAME` "
            "(NAME: letters, digits, - _ .)");
      auto prefix = w.size() == 4 ? parse_prefix(w[3]) : state_prefix(w[3], w[4]);
      if (!prefix) return bad(prefix.error().message());
      client_grant g{std::move(*prefix), w[2] == "readwrite"};
      auto& mine = grants[std::string(w[1])];
      if (std::find(mine.begin(), mine.end(), g) != mine.end())
        return bad(fmt::format("client {} is granted {} {} twice", w[1], w[2], format_prefix(g.prefix)));
      mine.push_back(std::move(g));
    } else {
      return bad(fmt::format("unknown setting `{}` (cluster, shards, tombstone_retention_s, tls, node, client)", w[0]));
    }
  }
  if (out.name.empty()) return status::invalid_argument("cluster file: no `cluster NAME` line");
  if (!have_shards) return status::invalid_argument("cluster file: no `shards N` line");
  if (out.nodes.empty()) return status::invalid_argument("cluster file: no `node` line");
  std::sort(out.nodes.begin(), out.nodes.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
  for (auto& [name, list] : grants) out.clients.emplace(name, client_access(std::move(list)));
  return out;
}

std::string cluster_file::canonical() const {
  std::string out = fmt::format("magnetite cluster v1\ncluster {}\nshards {}\ntombstone_retention_s {}\n", name, shards,
                                tombstone_retention_s);
  // `tls on` is written, `tls off` is not: a plaintext cluster keeps the
  // fingerprint it had when no line meant off, so its nodes still link
  // with nodes of the build before (which read `tls off` as no line too).
  if (tls) out += "tls on\n";
  for (const auto& n : nodes) out += fmt::format("node {} {} {}\n", n.id, n.host, n.port);
  // Clients by name, each one's grants in order: the file's order of
  // `client` lines does not matter.
  for (const auto& [name, access] : clients)
    for (const auto& g : access.grants())
      out += fmt::format("client {} {} {}\n", name, g.write ? "readwrite" : "read", format_prefix(g.prefix));
  return out;
}

namespace {
bool is_loopback(std::string_view host) {
  if (host == "localhost" || host == "::1" || host == "[::1]") return true;
  // 127.a.b.c: four decimal parts of 0..255, the first 127.
  if (!host.starts_with("127.")) return false;
  int parts = 0;
  for (std::size_t at = 0; at <= host.size();) {
    std::size_t dot = host.find('.', at);
    if (dot == std::string_view::npos) dot = host.size();
    std::string_view part = host.substr(at, dot - at);
    if (part.empty() || part.size() > 3 || part.find_first_not_of("0123456789") != std::string_view::npos) return false;
    if (std::stoi(std::string(part)) > 255) return false;
    ++parts;
    at = dot + 1;
  }
  return parts == 4;
}
}  // namespace

const cluster_node* cluster_file::beyond_loopback() const {
  for (const auto& n : nodes)
    if (!is_loopback(n.host)) return &n;
  return nullptr;
}

client_access cluster_file::access_of(const std::string& name) const {
  auto it = clients.find(name);
  return it == clients.end() ? client_access() : it->second;
}

const cluster_node* cluster_file::node(std::uint32_t id) const {
  for (const auto& n : nodes)
    if (n.id == id) return &n;
  return nullptr;
}

}  // namespace magnetite::replication
