// The shard's checkpoints (shard.h, "Checkpoint"): a memtable applied to the
// tree by one batch update, beside the writes or at once, and bulk ingest,
// which writes the tree straight.
#include "engine/shard.h"

#include <algorithm>
#include <system_error>

#include "engine/keyspace.h"
#include "tree/prolly_tree.h"
#include "ttl/envelope.h"

namespace magnetite {

namespace {

// A checkpoint's work, on whichever thread: the memtable's newest entries
// (deletions included) as edits viewing its arena, applied to `base`, then
// the node store made durable. Touches nothing of the shard but these.
result<std::pair<hash128, std::uint64_t>> apply_memtable(tree::node_store& store, const tree::chunk_policy& policy,
                                                         const hash128& base, const memtable& table) {
  tree::rewrite_reads reads(store);
  auto root = tree::prolly_tree(reads, policy).apply(base, shard::edits_of(table));
  if (!root) return root.error();
  auto position = store.flush();
  if (!position) return position.error();
  return std::pair{*root, *position};
}

}  // namespace

std::size_t shard::memtable_bytes() const noexcept {
  return active_->bytes() + (running_ ? running_->table->bytes() : 0);
}

bool shard::checkpoint_ready() const noexcept { return running_ && running_->ready.load(std::memory_order_acquire); }

status shard::begin_checkpoint(bool background, std::function<void()> done) {
  MAGNETITE_TRY(commit_group());
  if (running_ || active_->empty()) return status::ok();
  // Everything staged is durable and published: the frozen memtable holds
  // exactly the frames up to the sequence the log's checkpoint covers.
  auto covered = log_->begin_checkpoint();
  if (!covered) return fail(covered.error());
  running_ = std::make_unique<running_checkpoint>();
  running_->table = std::move(active_);
  running_->base = view_->root();
  running_->first_pack = store_->active_pack();
  store_->journal_reuse(true);  // off when the checkpoint ends, its root then ours
  active_ = std::make_shared<memtable>();
  published_ = 0;
  publish(view_->root());
  auto work = [r = running_.get(), store = store_, policy = options_.chunking, done = std::move(done)] {
    r->outcome = apply_memtable(*store, policy, r->base, *r->table);
    r->ready.store(true, std::memory_order_release);
    if (done) done();
  };
  if (background) {
    try {
      running_->worker = std::thread(work);
      return status::ok();
    } catch (const std::system_error&) {
      // No thread to be had (a process at its limit): the work runs here.
    }
  }
  work();
  return status::ok();
}

result<hash128> shard::finish_checkpoint() {
  MAGNETITE_TRY(check_usable());
  if (!running_) return view_->root();
  if (running_->worker.joinable()) running_->worker.join();
  auto outcome = std::move(running_->outcome);
  if (!outcome) {
    abandon_checkpoint();
    return fail(outcome.error());
  }
  auto [root, position] = *outcome;
  if (status s = log_->commit({root, position, stamp_bound_}); !s) {
    abandon_checkpoint();
    return fail(s);
  }
  running_.reset();
  store_->journal_reuse(false);
  ++stats_.checkpoints;
  publish(root);
  return root;
}

void shard::abandon_checkpoint() noexcept {
  if (!running_) return;
  if (running_->worker.joinable()) running_->worker.join();
  running_.reset();
  store_->journal_reuse(false);
}

result<std::optional<hash128>> shard::relieve_memory(bool background, std::function<void()> done) {
  std::optional<hash128> finished;
  if (running_) {
    bool waited = !checkpoint_ready();
    auto t0 = std::chrono::steady_clock::now();
    auto root = finish_checkpoint();
    if (!root) return root.error();
    finished = *root;
    if (waited) {
      ++stats_.write_stalls;
      stats_.write_stall_ns += static_cast<std::uint64_t>(
          std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count());
    }
  }
  MAGNETITE_TRY(begin_checkpoint(background, std::move(done)));
  return finished;
}

result<hash128> shard::checkpoint() {
  MAGNETITE_TRY(commit_group());
  if (running_) {
    auto root = finish_checkpoint();
    if (!root) return root;
  }
  if (active_->empty()) return view_->root();
  // Nothing goes on meanwhile: the log's checkpoint in one step.
  std::shared_ptr<const memtable> table = active_;  // the edits view its arena
  return commit_to_tree(edits_of(*table));
}

std::vector<tree::edit_view> shard::edits_of(const memtable& table) {
  std::vector<tree::edit_view> edits;
  edits.reserve(table.entries());  // every version: an upper bound
  memtable::cursor c(table, table.latest());
  for (c.seek_to_first(); c.valid(); c.next())
    edits.push_back({c.key(), c.deletion() ? std::nullopt : std::optional<std::string_view>(c.value())});
  return edits;
}

result<hash128> shard::commit_to_tree(std::span<const tree::edit_view> edits) {
  tree::rewrite_reads reads(*store_);
  tree::prolly_tree t(reads, options_.chunking);
  auto root = t.apply(view_->root(), edits);
  if (!root) return fail(root.error());
  auto position = store_->flush();
  if (!position) return fail(position.error());
  if (status s = log_->commit({*root, *position, stamp_bound_}); !s) return fail(s);
  ++stats_.checkpoints;
  active_ = std::make_shared<memtable>();
  published_ = 0;
  publish(*root);
  return *root;
}

status shard::check_ingest(std::span<const std::pair<std::string_view, std::string_view>> writes) {
  for (std::size_t i = 0; i < writes.size(); ++i) {
    MAGNETITE_TRY(state_space::check_user_key(writes[i].first));
    MAGNETITE_TRY(state_space::check_user_value(writes[i].second));
    if (i > 0 && !(writes[i - 1].first < writes[i].first))
      return status::invalid_argument(fmt::format("ingest: keys are not strictly increasing at index {}", i));
  }
  return status::ok();
}

result<hash128> shard::ingest(std::string_view bytes, std::span<const std::uint32_t> sizes) {
  MAGNETITE_TRY(check_usable());
  if (sizes.size() % 2 != 0) return status::invalid_argument("ingest: a key without its value");
  std::uint64_t total = 0;
  for (std::uint32_t n : sizes) total += n;
  if (total != bytes.size())
    return status::invalid_argument(fmt::format("ingest: sizes add up to {} bytes, not {}", total, bytes.size()));
  // Each write's key and value, as views into `bytes`.
  std::vector<std::pair<std::string_view, std::string_view>> writes(sizes.size() / 2);
  for (std::size_t i = 0, at = 0; i < writes.size(); at += sizes[2 * i] + sizes[2 * i + 1], ++i)
    writes[i] = {bytes.substr(at, sizes[2 * i]), bytes.substr(at + sizes[2 * i], sizes[2 * i + 1])};
  MAGNETITE_TRY(check_ingest(writes));
  auto base = checkpoint();
  if (!base) return base.error();
  if (writes.empty()) return *base;
  // The tree keys and stored values in one block the edits view (reserved in
  // full first: it never moves). A key's TTL entry goes with its old value;
  // expiry keys sort after every data key.
  std::string block;
  block.reserve(bytes.size() + 2 * writes.size());
  std::vector<tree::edit_view> edits;
  edits.reserve(writes.size());
  std::vector<std::string> expiries;
  for (const auto& [k, v] : writes) {
    std::size_t key_at = block.size();
    block.push_back(keyspace::data_tag);
    block.append(k);
    std::size_t value_at = block.size();
    ttl::wrap_into(block, v, std::nullopt);
    edits.push_back(
        {std::string_view(block).substr(key_at, value_at - key_at), std::string_view(block).substr(value_at)});
    if (auto old = expiry_.deadline(k)) expiries.push_back(keyspace::expiry_key(*old, k));
  }
  std::sort(expiries.begin(), expiries.end());
  for (const auto& x : expiries) edits.push_back({x, std::nullopt});
  auto root = commit_to_tree(edits);
  if (!root) return root.error();
  if (!expiries.empty())
    for (const auto& [k, v] : writes) expiry_.erase(k);
  stats_.ingested += writes.size();
  return *root;
}

}  // namespace magnetite
