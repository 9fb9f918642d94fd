// The shard's checkpoints (shard.h, "Checkpoint"): a memtable written as a
// sorted run, or folded with the runs into the tree, beside the writes or
// at once; and bulk ingest, which writes the tree straight.
#include "engine/shard.h"

#include <algorithm>
#include <system_error>

#include "engine/keyspace.h"
#include "tree/prolly_tree.h"
#include "ttl/envelope.h"

namespace magnetite {

std::size_t shard::memtable_bytes() const noexcept {
  return active_->bytes() + (running_ ? running_->table->bytes() : 0);
}

bool shard::checkpoint_ready() const noexcept { return running_ && running_->ready.load(std::memory_order_acquire); }

result<shard::checkpoint_plan> shard::plan_checkpoint(const memtable& frozen) const {
  tree::prolly_tree t(*store_, options_.chunking);
  memtable::cursor first(frozen, frozen.latest());
  first.seek_to_first();
  if (first.valid()) {
    // Above the tree's last key and every run's: an append.
    auto c = t.last(view_->root());
    if (!c) return c.error();
    bool above = !c->valid() || c->current().key < first.key();
    for (const auto& r : runs_) above = above && r->last_key() < first.key();
    if (above) return checkpoint_plan::append;
  }
  if (runs_.size() >= options_.max_sorted_runs) return checkpoint_plan::fold;
  // Fold once the runs would hold as many entries as the tree: the tree at
  // least doubles from fold to fold, so each entry is rewritten in it a
  // bounded number of times (the run count bounds the rest).
  auto in_tree = t.count(view_->root());
  if (!in_tree) return in_tree.error();
  std::uint64_t in_runs = frozen.entries();
  for (const auto& r : runs_) in_runs += r->entries();
  return in_runs < *in_tree ? checkpoint_plan::run : checkpoint_plan::fold;
}

status shard::begin_checkpoint(bool background, std::function<void()> done) {
  MAGNETITE_TRY(commit_group());
  if (running_ || active_->empty()) return status::ok();
  auto plan = plan_checkpoint(*active_);
  if (!plan) return fail(plan.error());
  // Everything staged is durable and published: the frozen memtable holds
  // exactly the frames up to the sequence the log's checkpoint covers.
  auto covered = log_->begin_checkpoint();
  if (!covered) return fail(covered.error());
  running_ = std::make_unique<running_checkpoint>();
  running_->table = std::move(active_);
  running_->base = view_->root();
  running_->base_runs = runs_;
  running_->plan = *plan;
  running_->first_pack = store_->active_pack();
  store_->journal_reuse(true);  // off when the checkpoint ends, its root then ours
  active_ = std::make_shared<memtable>();
  published_ = 0;
  publish(view_->root());
  // Touches nothing of the shard but the node store and what running_ holds.
  auto work = [r = running_.get(), store = store_, policy = options_.chunking, done = std::move(done)] {
    r->outcome = [&]() -> result<running_checkpoint::done> {
      tree::rewrite_reads reads(*store);
      running_checkpoint::done out{r->base, {}, 0};
      if (r->plan == checkpoint_plan::run) {
        auto run = write_run(reads, policy, *r->table);
        if (!run) return run.error();
        out.runs.push_back(std::move(*run));
        out.runs.insert(out.runs.end(), r->base_runs.begin(), r->base_runs.end());
      } else {
        // An append leaves the runs as they are: none holds its keys.
        bool append = r->plan == checkpoint_plan::append;
        auto root = fold_runs(reads, policy, r->base, r->table.get(),
                              append ? std::span<const run_ptr>() : std::span<const run_ptr>(r->base_runs));
        if (!root) return root.error();
        out.root = *root;
        if (append) out.runs = r->base_runs;
      }
      auto position = store->flush();
      if (!position) return position.error();
      out.position = *position;
      return out;
    }();
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
  wal::commit_record marker{outcome->root, outcome->position, stamp_bound_};
  for (const auto& r : outcome->runs) marker.runs.push_back(r->root());
  if (status s = log_->commit(marker); !s) {
    abandon_checkpoint();
    return fail(s);
  }
  ++stats_.checkpoints;
  ++(running_->plan == checkpoint_plan::run ? stats_.runs_written : stats_.folds);
  running_.reset();
  store_->journal_reuse(false);
  runs_ = std::move(outcome->runs);
  publish(outcome->root);
  return outcome->root;
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
  if (active_->empty() && runs_.empty()) return view_->root();
  // Nothing goes on meanwhile: the log's checkpoint in one step.
  tree::rewrite_reads reads(*store_);
  auto root = commit_to_tree(fold_runs(reads, options_.chunking, view_->root(), active_.get(), runs_));
  if (root) ++stats_.folds;
  return root;
}

result<hash128> shard::commit_to_tree(result<hash128> root) {
  if (!root) return fail(root.error());
  auto position = store_->flush();
  if (!position) return fail(position.error());
  if (status s = log_->commit({*root, *position, stamp_bound_}); !s) return fail(s);
  ++stats_.checkpoints;
  active_ = std::make_shared<memtable>();
  runs_.clear();
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
  tree::rewrite_reads reads(*store_);
  auto root = commit_to_tree(tree::prolly_tree(reads, options_.chunking).apply(view_->root(), edits));
  if (!root) return root.error();
  if (!expiries.empty())
    for (const auto& [k, v] : writes) expiry_.erase(k);
  stats_.ingested += writes.size();
  return *root;
}

}  // namespace magnetite
