#include "engine/memtable.h"

#include <sys/mman.h>

#include <bit>
#include <cstring>
#include <new>

namespace magnetite {

namespace {
// Byte order of keys, eight bytes at a time: the searches compare short keys
// with long common prefixes (a tag byte, then digits), for which a call to
// memcmp costs more than the comparison.
inline int compare_keys(const char* a, std::size_t an, const char* b, std::size_t bn) noexcept {
  std::size_t n = an < bn ? an : bn, i = 0;
  for (; i + 8 <= n; i += 8) {
    std::uint64_t x, y;
    std::memcpy(&x, a + i, 8);
    std::memcpy(&y, b + i, 8);
    if (x != y) {
      if constexpr (std::endian::native == std::endian::little) x = __builtin_bswap64(x), y = __builtin_bswap64(y);
      return x < y ? -1 : 1;
    }
  }
  for (; i < n; ++i)
    if (a[i] != b[i]) return static_cast<unsigned char>(a[i]) < static_cast<unsigned char>(b[i]) ? -1 : 1;
  return an < bn ? -1 : an > bn ? 1 : 0;
}

// Blocks start small and double up to the largest, so a small memtable (a
// shard with few writes, a test's tiny checkpoint_bytes) holds about what it
// uses, and a large one allocates rarely.
constexpr std::size_t first_block_bytes = std::size_t{4} << 10;
constexpr std::size_t largest_block_bytes = std::size_t{128} << 10;
constexpr std::uint32_t deletion_mark = UINT32_MAX;
// Blocks this large are mapped from the kernel and unmapped with the
// memtable: a checkpoint frees a whole memtable at once, and memory that
// malloc took for it would stay in the process (malloc raises its mapping
// threshold after such frees and keeps later blocks in its heap, which the
// next memtable's blocks and everything else then fragment).
constexpr std::size_t mapped_from = std::size_t{64} << 10;
}  // namespace

memtable::block::block(std::size_t bytes) : size(bytes) {
  if (bytes >= mapped_from) {
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    data = static_cast<char*>(p);
  } else {
    data = new char[bytes];
  }
}

memtable::block::~block() {
  if (!data) return;
  if (size >= mapped_from)
    ::munmap(data, size);
  else
    delete[] data;
}

// In the arena: this header, `height` next pointers, then the key's bytes and
// the value's.
struct memtable::node {
  std::uint64_t seq;
  std::uint32_t key_size;
  std::uint32_t value_size;  // deletion_mark: a deletion
  std::uint8_t height;
  std::atomic<node*> next_[1];

  std::string_view key() const noexcept { return {reinterpret_cast<const char*>(&next_[height]), key_size}; }
  std::string_view value() const noexcept {
    return {reinterpret_cast<const char*>(&next_[height]) + key_size, value_size};
  }
  bool deletion() const noexcept { return value_size == deletion_mark; }
  const char* key_data() const noexcept { return reinterpret_cast<const char*>(&next_[height]); }
  node* next(int level) const noexcept { return next_[level].load(std::memory_order_acquire); }
  // Before (key, seq) in the memtable's order: a smaller key, or the same key
  // and a newer sequence.
  bool before(std::string_view k, std::uint64_t s) const noexcept {
    int c = compare_keys(key_data(), key_size, k.data(), k.size());
    return c < 0 || (c == 0 && seq > s);
  }
  static std::size_t size_for(int height, std::size_t payload) {
    return offsetof(node, next_) + sizeof(std::atomic<node*>) * static_cast<std::size_t>(height) + payload;
  }
};

memtable::memtable() : next_block_bytes_(first_block_bytes) {
  char* at = allocate(node::size_for(max_height, 0));
  head_ = new (at) node{0, 0, 0, max_height, {}};
  for (int l = 0; l < max_height; ++l) new (&head_->next_[l]) std::atomic<node*>(nullptr);
  for (auto& f : finger_) f = head_;
}

// Nodes are trivially destructible; the blocks go with blocks_.
memtable::~memtable() = default;

char* memtable::allocate(std::size_t bytes) {
  bytes = (bytes + 7) & ~std::size_t{7};  // every node starts 8-aligned
  // Larger allocations get a block of their own, so a block never wastes
  // more than a quarter of itself at its end.
  if (bytes > next_block_bytes_ / 4) {
    blocks_.emplace_back(bytes);
    bytes_.fetch_add(bytes, std::memory_order_relaxed);
    return blocks_.back().data;
  }
  if (bytes > free_bytes_) {
    blocks_.emplace_back(next_block_bytes_);
    bytes_.fetch_add(next_block_bytes_, std::memory_order_relaxed);
    free_ = blocks_.back().data;
    free_bytes_ = next_block_bytes_;
    next_block_bytes_ = std::min(largest_block_bytes, next_block_bytes_ * 2);
  }
  char* out = free_;
  free_ += bytes;
  free_bytes_ -= bytes;
  return out;
}

int memtable::random_height() noexcept {
  // Up a level with probability 1/4 (xorshift32).
  int h = 1;
  while (h < max_height) {
    rng_ ^= rng_ << 13;
    rng_ ^= rng_ >> 17;
    rng_ ^= rng_ << 5;
    if ((rng_ & 3) != 0) break;
    ++h;
  }
  return h;
}

const memtable::node* memtable::find_greater_or_equal(std::string_view key, std::uint64_t seq,
                                                      const node** before) const noexcept {
  const node* x = head_;
  int level = height_.load(std::memory_order_relaxed) - 1;
  for (;;) {
    const node* next = x->next(level);
    if (next && next->before(key, seq)) {
      x = next;
    } else {
      if (before) before[level] = x;
      if (level == 0) return next;
      --level;
    }
  }
}

const memtable::node* memtable::find_less_than(std::string_view key) const noexcept {
  const node* x = head_;
  int level = height_.load(std::memory_order_relaxed) - 1;
  for (;;) {
    const node* next = x->next(level);
    if (next && next->key() < key) {
      x = next;
    } else {
      if (level == 0) return x == head_ ? nullptr : x;
      --level;
    }
  }
}

const memtable::node* memtable::find_last() const noexcept {
  const node* x = head_;
  int level = height_.load(std::memory_order_relaxed) - 1;
  for (;;) {
    const node* next = x->next(level);
    if (next) {
      x = next;
    } else {
      if (level == 0) return x == head_ ? nullptr : x;
      --level;
    }
  }
}

std::uint64_t memtable::insert(std::string_view prefix, std::string_view key, std::optional<std::string_view> value) {
  std::uint64_t seq = ++latest_;
  std::size_t key_size = prefix.size() + key.size();
  std::size_t value_size = value ? value->size() : 0;
  int height = random_height();
  char* at = allocate(node::size_for(height, key_size + value_size));
  node* n = new (at) node{seq,
                          static_cast<std::uint32_t>(key_size),
                          value ? static_cast<std::uint32_t>(value_size) : deletion_mark,
                          static_cast<std::uint8_t>(height),
                          {}};
  char* bytes = reinterpret_cast<char*>(&n->next_[height]);
  if (!prefix.empty()) std::memcpy(bytes, prefix.data(), prefix.size());
  if (!key.empty()) std::memcpy(bytes + prefix.size(), key.data(), key.size());
  if (value_size) std::memcpy(bytes + key_size, value->data(), value_size);

  // The newest version goes before every older one of its key: search for
  // (key, seq), which no node equals.
  const node* before[max_height];
  std::string_view whole(bytes, key_size);
  int old_height = height_.load(std::memory_order_relaxed);
  if (last_ && last_->before(whole, seq))
    find_from_finger(whole, seq, old_height, before);
  else
    find_greater_or_equal(whole, seq, before);
  if (height > old_height) {
    for (int l = old_height; l < height; ++l) before[l] = head_;
    // A reader that sees the new height before the links finds null at the
    // new levels of head_, which is fine: it drops a level.
    height_.store(height, std::memory_order_relaxed);
  }
  for (int l = 0; l < height; ++l) {
    node* b = const_cast<node*>(before[l]);
    new (&n->next_[l]) std::atomic<node*>(b->next_[l].load(std::memory_order_relaxed));
    b->next_[l].store(n, std::memory_order_release);
  }
  last_ = n;
  for (int l = 0; l < max_height; ++l) finger_[l] = l < height ? n : l < old_height ? before[l] : head_;
  return seq;
}

void memtable::find_from_finger(std::string_view key, std::uint64_t seq, int height,
                                const node** before) const noexcept {
  // The lowest level whose finger node's successor is not before the entry:
  // the finger brackets it there, and so at every level above (a finger node
  // at a higher level is at or before the one below it, and its successor at
  // or after that one's). Nearby keys stop low, so the search walks down from
  // close by instead of from the head.
  int level = 0;
  while (level < height - 1) {
    const node* next = finger_[level]->next(level);
    if (!next || !next->before(key, seq)) break;
    ++level;
  }
  for (int l = level + 1; l < height; ++l) before[l] = finger_[l];
  const node* x = finger_[level];
  for (;;) {
    const node* next = x->next(level);
    if (next && next->before(key, seq)) {
      x = next;
    } else {
      before[level] = x;
      if (level == 0) return;
      --level;
    }
  }
}

bool memtable::levels_in_order() const noexcept {
  for (int l = 0; l < height_.load(std::memory_order_relaxed); ++l)
    for (const node* x = head_->next(l); x && x->next(l); x = x->next(l))
      if (!x->before(x->next(l)->key(), x->next(l)->seq)) return false;
  return true;
}

memtable::lookup memtable::find(std::string_view key, std::uint64_t at) const noexcept {
  const node* n = find_greater_or_equal(key, at, nullptr);
  if (!n || n->key() != key) return {};
  if (n->deletion()) return {true, std::nullopt};
  return {true, n->value()};
}

void memtable::cursor::settle_forward() noexcept {
  while (n_ && n_->seq > at_) n_ = n_->next(0);
}

void memtable::cursor::settle_backward() noexcept {
  while (n_) {
    std::string_view k = n_->key();
    const node* v = m_->find_greater_or_equal(k, at_, nullptr);
    if (v && v->key() == k) {
      n_ = v;
      return;
    }
    n_ = m_->find_less_than(k);  // every version of k is newer than at_
  }
}

void memtable::cursor::seek(std::string_view k) noexcept {
  n_ = m_->find_greater_or_equal(k, UINT64_MAX, nullptr);
  settle_forward();
}

void memtable::cursor::seek_before(std::string_view k) noexcept {
  n_ = m_->find_less_than(k);
  settle_backward();
}

void memtable::cursor::seek_to_first() noexcept {
  n_ = m_->head_->next(0);
  settle_forward();
}

void memtable::cursor::seek_to_last() noexcept {
  n_ = m_->find_last();
  settle_backward();
}

void memtable::cursor::next() noexcept {
  // Past the older versions of this key: a few steps, else one search (a
  // key rewritten many times must not cost a scan its every version).
  std::string_view k = n_->key();
  const node* x = n_->next(0);
  for (int steps = 0; x && x->key() == k; ++steps) {
    if (steps == 8) {
      x = m_->find_greater_or_equal(k, 0, nullptr);  // after every version (sequences start at 1)
      break;
    }
    x = x->next(0);
  }
  n_ = x;
  settle_forward();
}

void memtable::cursor::prev() noexcept {
  n_ = m_->find_less_than(n_->key());
  settle_backward();
}

std::string_view memtable::cursor::key() const noexcept { return n_->key(); }
bool memtable::cursor::deletion() const noexcept { return n_->deletion(); }
std::string_view memtable::cursor::value() const noexcept { return n_->value(); }

}  // namespace magnetite
