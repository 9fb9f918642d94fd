# frozen_string_literal: true

module Magnetite
  # A record: a JSON value (or Bytes) and its revision (positive, growing
  # per key, never reused).
  Record = Struct.new(:value, :revision)

  # A page of #list: [key, Record] pairs, and the key to pass as
  # start_after for the next page (nil on the last).
  Page = Struct.new(:records, :next)

  # Transactional records: (namespace, key) -> value with a revision.
  class Records
    def initialize(db)
      @db = db
    end

    # The record, or nil.
    def load(namespace, key)
      ns, nl = Glue.buffer(namespace)
      k, kl = Glue.buffer(key)
      revision = FFI::MemoryPointer.new(:uint64)
      value = Glue.optional_item { |item, found| Native.magnetite_record_load(@db.native, ns, nl, k, kl, item, revision, found) }
      value.nil? ? nil : Record.new(value, revision.read_uint64)
    end

    # Records of namespace whose key starts with prefix, in key order, after
    # start_after, at most limit (1..1000).
    def list(namespace, prefix: "", start_after: nil, limit: 100)
      ns, nl = Glue.buffer(namespace)
      pr, pl = Glue.buffer(prefix)
      sa, sl = Glue.buffer(start_after)
      out = Glue.out_pointer
      Glue.check(Native.magnetite_record_list(@db.native, ns, nl, pr, pl, sa, sl, Integer(limit), out), state: true)
      rows, nxt = Glue.rows(out.read_pointer)
      Page.new(rows.map { |k, v, rev| [k, Record.new(v, rev)] }, nxt)
    end
  end

  # A serializable optimistic transaction over records on any shards: loads
  # record the revision they saw, puts and deletes are buffered (and read
  # back), commit publishes all or nothing. Used by one thread at a time.
  class Transaction
    def initialize(native)
      @native = native
      @finished = false
    end

    def finished?
      @finished
    end

    def load(namespace, key)
      ns, nl = Glue.buffer(namespace)
      k, kl = Glue.buffer(key)
      revision = FFI::MemoryPointer.new(:uint64)
      value = Glue.optional_item { |item, found| Native.magnetite_txn_load(@native.ptr, ns, nl, k, kl, item, revision, found) }
      value.nil? ? nil : Record.new(value, revision.read_uint64)
    end

    def put(namespace, key, value)
      ns, nl = Glue.buffer(namespace)
      k, kl = Glue.buffer(key)
      item, _keep = Glue.item_struct(value, "delete(namespace, key)")
      Glue.check(Native.magnetite_txn_put(@native.ptr, ns, nl, k, kl, item), state: true)
      nil
    end

    def delete(namespace, key)
      ns, nl = Glue.buffer(namespace)
      k, kl = Glue.buffer(key)
      Glue.check(Native.magnetite_txn_del(@native.ptr, ns, nl, k, kl), state: true)
      nil
    end

    # The revision of its writes. ConflictError: nothing was written. A
    # timeout (seconds) that passes raises AmbiguousStateError: it may still
    # land. Finished afterwards, whatever the result.
    def commit(timeout: nil)
      revision = FFI::MemoryPointer.new(:uint64)
      @finished = true
      Glue.check(Native.magnetite_txn_commit(@native.ptr, timeout ? (timeout * 1000).ceil : 0, revision), state: true)
      revision.read_uint64
    end

    def rollback
      Native.magnetite_txn_rollback(@native.ptr)
      @finished = true
      nil
    end

    def free
      @native.free
    end
  end

  # Append-only event streams with optimistic appends.
  class Streams
    def initialize(db)
      @db = db
    end

    # Appends the values at expected_seq; the seq of the first. A
    # ConflictError (naming the stream's next seq) if it has moved.
    def append(stream, values, expected_seq:, ttl: nil, timeout: nil)
      values = Array(values)
      s, sl = Glue.buffer(stream)
      structs = values.map { |v| Glue.item_struct(v, "nothing (a stream's entries are never deleted)") }
      array = FFI::MemoryPointer.new(Native::Item, [values.size, 1].max)
      structs.each_with_index do |(item, _), i|
        array.put_bytes(i * Native::Item.size, item.pointer.read_bytes(Native::Item.size))
      end
      first = FFI::MemoryPointer.new(:uint64)
      ttl_ms = ttl.nil? ? 0 : Glue.seconds_to_ms(ttl, "ttl")
      Glue.check(Native.magnetite_stream_append(@db.native, s, sl, array, values.size, Integer(expected_seq), ttl_ms,
                                                timeout ? (timeout * 1000).ceil : 0, first), state: true)
      first.read_uint64
    end

    # Live [seq, value] pairs from from_seq on, at most limit (1..1000).
    def read(stream, from_seq: 0, limit: 100)
      s, sl = Glue.buffer(stream)
      out = Glue.out_pointer
      Glue.check(Native.magnetite_stream_read(@db.native, s, sl, Integer(from_seq), Integer(limit), out), state: true)
      rows, = Glue.rows(out.read_pointer, keys: false)
      rows.map { |_, v, seq| [seq, v] }
    end

    def next_seq(stream)
      s, sl = Glue.buffer(stream)
      out = FFI::MemoryPointer.new(:uint64)
      Glue.check(Native.magnetite_stream_next_seq(@db.native, s, sl, out), state: true)
      out.read_uint64
    end
  end
end
