# frozen_string_literal: true

module Magnetite
  # The collections of one (namespace, owner key), as prosody's keyed state:
  # value, map and deque handles by name. Writes are buffered in each handle
  # (read back at once); #commit makes every handle's buffer durable in one
  # frame, #rollback drops them. Used by one thread at a time.
  class OwnerState
    def initialize(db, namespace, owner)
      @db = db
      ns, nl = Glue.buffer(namespace)
      ow, ol = Glue.buffer(owner)
      out = Glue.out_pointer
      Glue.check(Native.magnetite_owner_open(db.native, ns, nl, ow, ol, out), state: true)
      @owner = db.adopt(out.read_pointer, :magnetite_owner_free)
    end

    # ttl: seconds, per item from its last write. A handle keeps its owner
    # state alive: dropping the owner state does not close its handles
    # (only #close does).
    def value(name, ttl: nil)
      ValueState.new(@db, self, handle(:value, name, ttl, nil))
    end

    def map(name, ttl: nil)
      MapState.new(@db, self, handle(:map, name, ttl, nil))
    end

    # capacity: a push at capacity evicts from the other end.
    def deque(name, ttl: nil, capacity: nil)
      DequeState.new(@db, self, handle(:deque, name, ttl, capacity))
    end

    def commit(timeout: nil)
      Glue.check(Native.magnetite_owner_commit(@owner.ptr, timeout ? (timeout * 1000).ceil : 0), state: true)
      nil
    end

    def rollback
      Native.magnetite_owner_rollback(@owner.ptr)
      nil
    end

    # Closes every handle it made; idempotent.
    def close
      @owner.free
      nil
    end

    private

    def handle(kind, name, ttl, capacity)
      options = Native::CollectionOptions.new
      options[:ttl_ms] = ttl.nil? ? 0 : Glue.seconds_to_ms(ttl, "ttl")
      unless capacity.nil? || (capacity.is_a?(Integer) && capacity.positive?)
        Glue.transient("capacity must be a positive Integer, not #{capacity.inspect}")
      end
      options[:capacity] = capacity || 0
      n, nl = Glue.buffer(name)
      out = Glue.out_pointer
      Glue.check(Native.send(:"magnetite_owner_#{kind}", @owner.ptr, n, nl, options.pointer, out), state: true)
      @db.adopt(out.read_pointer, :"magnetite_#{kind}_free")
    end
  end

  # What every handle kind does alike.
  class StateHandle
    def initialize(db, owner, native, kind)
      @db = db
      @owner = owner # its owner state lives as long as the handle
      @native = native
      @kind = kind
    end

    # Makes the buffered operations durable; on failure they stay buffered.
    def commit(timeout: nil)
      Glue.check(Native.send(:"magnetite_#{@kind}_commit", @native.ptr, timeout ? (timeout * 1000).ceil : 0),
                 state: true)
      nil
    end

    # Drops what was buffered since the last commit; cannot fail.
    def rollback
      Native.send(:"magnetite_#{@kind}_rollback", @native.ptr)
      nil
    end

    # Every later call raises ClosedError.
    def close
      Native.send(:"magnetite_#{@kind}_close", @native.ptr) unless @native.freed?
      nil
    end

    private

    DIRECTIONS = { forward: 0, backward: 1, "forward" => 0, "backward" => 1 }.freeze

    def direction(token)
      DIRECTIONS.fetch(token) do
        Glue.transient("direction is :forward or :backward, not #{token.inspect}")
      end
    end

    def call(fn, *args)
      Glue.check(Native.send(:"magnetite_#{@kind}_#{fn}", @native.ptr, *args), state: true)
    end

    def flag(fn, *args)
      out = FFI::MemoryPointer.new(:int)
      call(fn, *args, out)
      out.read_int == 1
    end

    def count(fn)
      out = FFI::MemoryPointer.new(:uint64)
      call(fn, out)
      out.read_uint64
    end

    def optional(fn, *args)
      Glue.optional_item { |item, found| Native.send(:"magnetite_#{@kind}_#{fn}", @native.ptr, *args, item, found) }
    end

    def write(fn, value, delete_verb, *args)
      item, _keep = Glue.item_struct(value, delete_verb)
      call(fn, *args, item)
      nil
    end

    # An Enumerator over a state cursor that `open` makes (a pointer), pulled
    # `chunk` rows at a time; the cursor is freed when the iteration ends,
    # breaks or raises.
    def rows_enumerator(chunk, keys:, items:, &open)
      db = @db
      Enumerator.new do |y|
        out = Glue.out_pointer
        open.call(out)
        cursor = db.adopt(out.read_pointer, :magnetite_state_cursor_free)
        begin
          rows_out = Glue.out_pointer
          loop do
            Glue.check(Native.magnetite_state_cursor_next(cursor.ptr, chunk, rows_out), state: true)
            rows, = Glue.rows(rows_out.read_pointer, keys: keys, items: items)
            break if rows.empty?
            rows.each { |k, v, _| y << (keys && items ? [k, v] : keys ? k : v) }
          end
        ensure
          cursor.free
        end
      end
    end

    def chunk_size(chunk)
      Glue.transient("chunk must be a positive Integer, not #{chunk.inspect}") unless chunk.is_a?(Integer) && chunk.positive?
      chunk
    end
  end

  class ValueState < StateHandle
    def initialize(db, owner, native)
      super(db, owner, native, :value)
    end

    def get
      optional(:get)
    end

    def set(value)
      write(:set, value, "clear")
    end

    def clear
      call(:clear)
      nil
    end
  end

  class MapState < StateHandle
    def initialize(db, owner, native)
      super(db, owner, native, :map)
    end

    def get(key)
      k, kl = Glue.buffer(key)
      optional(:get, k, kl)
    end

    # Aligned with keys: each value or nil, all from one view.
    def get_many(keys)
      keys = keys.map { |k| String(k).b }
      return [] if keys.empty?
      bufs = keys.map { |k| Glue.buffer(k) }
      ptrs = FFI::MemoryPointer.new(:pointer, keys.size)
      ptrs.write_array_of_pointer(bufs.map(&:first))
      lens = FFI::MemoryPointer.new(:size_t, keys.size)
      lens.write_array_of_type(:size_t, :put_ulong, bufs.map(&:last))
      items = FFI::MemoryPointer.new(Native::OwnedItem, keys.size)
      found = FFI::MemoryPointer.new(:int, keys.size)
      call(:get_many, ptrs, lens, keys.size, items, found)
      flags = found.read_array_of_int(keys.size)
      Array.new(keys.size) do |i|
        item = Native::OwnedItem.new(items + i * Native::OwnedItem.size)
        begin
          flags[i] == 1 ? Glue.decode(item[:kind], item[:data].read_bytes(item[:size])) : nil
        ensure
          Native.magnetite_owned_item_release(item.pointer) if flags[i] == 1
        end
      end
    end

    # Whether key holds a value (without decoding it).
    def contains_key(key)
      k, kl = Glue.buffer(key)
      flag(:contains, k, kl)
    end
    alias key? contains_key

    def set(key, value)
      k, kl = Glue.buffer(key)
      write(:set, value, "remove(key)", k, kl)
    end

    def remove(key)
      k, kl = Glue.buffer(key)
      call(:remove, k, kl)
      nil
    end
    alias delete remove

    def clear
      call(:clear)
      nil
    end

    def empty?
      flag(:is_empty)
    end
    alias is_empty empty? # prosody's name

    def size
      count(:size)
    end

    # [key, value] pairs in key order (direction :backward: reverse), as an
    # Enumerator that pulls `chunk` at a time. from: start here (inclusive),
    # after: just past this key (paging), to: stop before, prefix, limit.
    def scan(direction = :forward, from: nil, after: nil, to: nil, prefix: nil, limit: nil, chunk: 64)
      options(direction, from, after, to, prefix, limit, chunk) do |o, n|
        rows_enumerator(n, keys: true, items: true) { |out| call(:scan, o.pointer, out) }
      end
    end

    # The keys only, as #scan.
    def keys(direction = :forward, from: nil, after: nil, to: nil, prefix: nil, limit: nil, chunk: 64)
      options(direction, from, after, to, prefix, limit, chunk) do |o, n|
        rows_enumerator(n, keys: true, items: false) { |out| call(:keys, o.pointer, out) }
      end
    end

    private

    def options(direction, from, after, to, prefix, limit, chunk)
      dir = direction(direction)
      n = chunk_size(chunk)
      unless limit.nil? || (limit.is_a?(Integer) && limit.positive?)
        Glue.transient("limit must be a positive Integer, not #{limit.inspect}")
      end
      o = Native::ScanOptions.new
      keep = []
      o[:backward] = dir
      { from: from, after: after, to: to, prefix: prefix }.each do |field, value|
        ptr, len = Glue.buffer(value)
        keep << ptr
        o[field] = ptr
        o[:"#{field}_len"] = len
      end
      o[:limit] = limit || 0
      # The enumerator's block holds `o`, and `keep` its buffers, for as long
      # as the enumerator lives.
      yield(o, n).tap { keep.freeze }
    end
  end

  class DequeState < StateHandle
    def initialize(db, owner, native)
      super(db, owner, native, :deque)
    end

    # The number of slots: an upper bound under a TTL (expired slots not yet
    # popped count).
    def len
      count(:len)
    end
    alias length len

    def empty?
      flag(:is_empty)
    end
    alias is_empty empty? # prosody's name

    # The index-th live item from the front, or nil.
    def get(index)
      Glue.transient("index must be an Integer of 0 or more, not #{index.inspect}") unless index.is_a?(Integer) && index >= 0
      optional(:get, index)
    end

    def peek_front
      optional(:peek_front)
    end

    def peek_back
      optional(:peek_back)
    end

    def push_front(value)
      write(:push_front, value, "pop_front, pop_back or clear")
    end

    def push_back(value)
      write(:push_back, value, "pop_front, pop_back or clear")
    end

    def pop_front
      optional(:pop_front)
    end

    def pop_back
      optional(:pop_back)
    end

    def clear
      call(:clear)
      nil
    end

    # The live items front to back (:backward: back to front), an Enumerator
    # pulling `chunk` at a time.
    def scan(direction = :forward, chunk: 64)
      dir = direction(direction)
      n = chunk_size(chunk)
      rows_enumerator(n, keys: false, items: true) { |out| call(:scan, dir, out) }
    end
  end
end
