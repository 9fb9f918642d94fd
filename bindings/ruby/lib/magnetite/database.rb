# frozen_string_literal: true

module Magnetite
  # A native object of the C API, freed once: by #free, by its database's
  # close, or by the garbage collector. The C API keeps the database open
  # while any object made from it lives, so no order of frees can reach a
  # closed one (docs/ruby.md, "Lifetimes").
  class NativeObject
    def initialize(ptr, free_fn)
      @ptr = FFI::AutoPointer.new(ptr, Native.method(free_fn))
    end

    def ptr
      raise ClosedError.new("this object was closed", code: :invalid_argument, category: :transient) if @ptr.nil?
      @ptr
    end

    def free
      return if @ptr.nil?
      p = @ptr
      @ptr = nil
      p.free
    end

    def freed?
      @ptr.nil?
    end
  end

  # A database a Ruby program opened: plain keys, keyed state (#state),
  # records and transactions (#records, #transaction), streams (#streams).
  # Thread-safe, like the C++ API: share one among threads. Every call that
  # waits for the disk lets other Ruby threads run meanwhile.
  class Database
    FSYNC = { always: 0, commit_only: 1, interval: 2 }.freeze

    # Opens (creating if missing) the database in dir. With a block, yields
    # it and closes it after.
    #   shards:        a new database's shard count (default: one a core)
    #   memory_budget: bytes the shards' caches share
    #   fsync:         :always (default), :commit_only, :interval
    #   fsync_interval: seconds, for :interval
    #   retained_checkpoints: commits kept for diff and verify
    #   writer_spin:   seconds a lone blocked writer spins for its answer
    #                  before it sleeps (default 0.0005; 0 sleeps at once;
    #                  at most 0.1)
    def self.open(dir, shards: nil, memory_budget: nil, fsync: :always, fsync_interval: nil,
                  retained_checkpoints: nil, writer_spin: nil)
      db = new(dir, shards: shards, memory_budget: memory_budget, fsync: fsync, fsync_interval: fsync_interval,
                    retained_checkpoints: retained_checkpoints, writer_spin: writer_spin)
      return db unless block_given?
      begin
        yield db
      ensure
        db.close
      end
    end

    def initialize(dir, shards:, memory_budget:, fsync:, fsync_interval:, retained_checkpoints:, writer_spin:)
      policy = FSYNC.fetch(fsync) do
        raise PermanentError.new("fsync is :always, :commit_only or :interval, not #{fsync.inspect}",
                                 code: :invalid_argument, category: :permanent)
      end
      # The C setter takes whole microseconds; what it cannot carry (a
      # negative or absurd figure) is refused here, the rest by open.
      spin_us = writer_spin && (writer_spin * 1_000_000).round
      if spin_us && !spin_us.between?(0, 0xFFFF_FFFF)
        raise PermanentError.new("writer_spin is seconds from 0 to 0.1, not #{writer_spin.inspect}",
                                 code: :invalid_argument, category: :permanent)
      end
      options = Native.magnetite_options_create
      raise PermanentError.new("out of memory", code: :failed, category: :permanent) if options.null?
      begin
        Native.magnetite_options_set_shards(options, shards) if shards
        Native.magnetite_options_set_memory_budget(options, memory_budget) if memory_budget
        interval = fsync_interval ? (fsync_interval * 1000).ceil : 0
        Native.magnetite_options_set_fsync(options, policy, interval)
        Native.magnetite_options_set_retained_checkpoints(options, retained_checkpoints) if retained_checkpoints
        Native.magnetite_options_set_writer_spin(options, spin_us) if spin_us
        out = Glue.out_pointer
        Glue.check(Native.magnetite_open(String(dir), options, out))
        @db = NativeObject.new(out.read_pointer, :magnetite_close)
      ensure
        Native.magnetite_options_free(options)
      end
      @children = ObjectSpace::WeakMap.new
      @children_lock = Mutex.new
      @dir = String(dir)
    end

    attr_reader :dir

    # Frees every object made from it that is still alive, then the
    # database: it is checkpointed and stopped, and its directory unlocked.
    # Idempotent; every call after raises ClosedError.
    def close
      children = @children_lock.synchronize do
        list = []
        @children.each_key { |c| list << c }
        list
      end
      children.each(&:free)
      @db.free
      nil
    end

    def closed?
      @db.freed?
    end

    def shard_count
      Native.magnetite_shard_count(@db.ptr)
    end

    # The value of key, a binary String, or nil.
    def get(key)
      k, kl = Glue.buffer(key)
      value = Glue.out_pointer
      len = FFI::MemoryPointer.new(:size_t)
      found = FFI::MemoryPointer.new(:int)
      Glue.check(Native.magnetite_get(@db.ptr, k, kl, value, len, found))
      return nil if found.read_int.zero?
      owned = value.read_pointer
      begin
        owned.read_bytes(len.read(:size_t))
      ensure
        Native.magnetite_free(owned)
      end
    end

    # Durable when it returns. ttl: seconds.
    def put(key, value, ttl: nil)
      k, kl = Glue.buffer(key)
      v, vl = Glue.buffer(String(value))
      Glue.check(Native.magnetite_put(@db.ptr, k, kl, v, vl, ttl ? (ttl * 1000).ceil : 0))
      nil
    end

    def delete(key)
      k, kl = Glue.buffer(key)
      Glue.check(Native.magnetite_del(@db.ptr, k, kl))
      nil
    end

    # Compare and set: writes desired (nil: deletes) when the key holds
    # expected (nil: when it is absent). [swapped, the value found].
    def cas(key, expected:, desired:, ttl: nil)
      k, kl = Glue.buffer(key)
      e, el = Glue.buffer(expected)
      d, dl = Glue.buffer(desired)
      swapped = FFI::MemoryPointer.new(:int)
      current = Glue.out_pointer
      len = FFI::MemoryPointer.new(:size_t)
      has = FFI::MemoryPointer.new(:int)
      Glue.check(Native.magnetite_cas(@db.ptr, k, kl, e, el, d, dl, ttl ? (ttl * 1000).ceil : 0, swapped, current,
                                      len, has))
      found = nil
      if has.read_int == 1
        owned = current.read_pointer
        found = owned.read_bytes(len.read(:size_t))
        Native.magnetite_free(owned)
      end
      [swapped.read_int == 1, found]
    end

    # Checkpoints every shard; the combined root as 32 hex digits.
    def commit
      root = FFI::MemoryPointer.new(:char, 33)
      Glue.check(Native.magnetite_commit(@db.ptr, root))
      root.read_string
    end

    # The live [key, value] pairs of [from, to) in key order (to nil: no
    # bound), as an Enumerator; each iteration pins its own view.
    def scan(from = "", to = nil)
      Enumerator.new do |y|
        f, fl = Glue.buffer(from)
        t, tl = Glue.buffer(to)
        out = Glue.out_pointer
        Glue.check(Native.magnetite_scan(@db.ptr, f, fl, t, tl, out))
        cursor = adopt(out.read_pointer, :magnetite_cursor_free)
        begin
          key = Glue.out_pointer
          key_len = FFI::MemoryPointer.new(:size_t)
          value = Glue.out_pointer
          value_len = FFI::MemoryPointer.new(:size_t)
          has = FFI::MemoryPointer.new(:int)
          loop do
            Glue.check(Native.magnetite_cursor_next(cursor.ptr, key, key_len, value, value_len, has))
            break if has.read_int.zero?
            y << [key.read_pointer.read_bytes(key_len.read(:size_t)),
                  value.read_pointer.read_bytes(value_len.read(:size_t))]
          end
        ensure
          cursor.free
        end
      end
    end

    # The keyed state of one (namespace, owner key): value, map and deque
    # handles by name that commit together.
    def state(namespace, owner)
      OwnerState.new(self, namespace, owner)
    end

    def records
      @records ||= Records.new(self)
    end

    def streams
      @streams ||= Streams.new(self)
    end

    # A transaction: yields it, commits when the block returns (the
    # revision), rolls back if it raises. A ConflictError means nothing was
    # written: run the block again.
    def transaction(timeout: nil)
      tx = begin_transaction
      begin
        yield tx
        tx.commit(timeout: timeout)
      ensure
        tx.rollback unless tx.finished?
        tx.free
      end
    end

    def begin_transaction
      out = Glue.out_pointer
      Glue.check(Native.magnetite_txn_begin(@db.ptr, out), state: true)
      Transaction.new(adopt(out.read_pointer, :magnetite_txn_free))
    end

    # For the classes of this binding: the database's pointer, and a native
    # object made from it, registered so that close frees it first.
    def native
      @db.ptr
    end

    def adopt(ptr, free_fn)
      obj = NativeObject.new(ptr, free_fn)
      @children_lock.synchronize { @children[obj] = true }
      obj
    end
  end
end
