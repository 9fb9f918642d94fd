# frozen_string_literal: true

require "ffi"

module Magnetite
  # The C API (<magnetite/c.h>) as Ruby-FFI sees it. Nothing here is for
  # hosts: the classes of lib/magnetite/ wrap it. Every call that may wait
  # (for an fsync, a lock, a shard) is attached with `blocking: true`, so Ruby
  # releases its global lock around it and other Ruby threads run meanwhile.
  module Native
    extend FFI::Library

    # MAGNETITE_LIB names the shared library to load (a build tree's
    # build/libmagnetite.so); without it, the installed libmagnetite.
    ffi_lib ENV.fetch("MAGNETITE_LIB") { ["magnetite", "libmagnetite.so.0"] }

    ITEM_JSON = 1
    ITEM_BYTES = 2

    class Item < FFI::Struct
      layout :kind, :int, :data, :pointer, :size, :size_t
    end

    class OwnedItem < FFI::Struct
      layout :kind, :int, :data, :pointer, :size, :size_t
    end

    class CollectionOptions < FFI::Struct
      layout :ttl_ms, :int64, :capacity, :uint64
    end

    class ScanOptions < FFI::Struct
      layout :backward, :int,
             :from, :pointer, :from_len, :size_t,
             :after, :pointer, :after_len, :size_t,
             :to, :pointer, :to_len, :size_t,
             :prefix, :pointer, :prefix_len, :size_t,
             :limit, :size_t
    end

    # Errors and buffers: never wait.
    attach_function :magnetite_error_code, [:pointer], :int
    attach_function :magnetite_error_category, [:pointer], :int
    attach_function :magnetite_error_message, [:pointer], :string
    attach_function :magnetite_error_free, [:pointer], :void
    attach_function :magnetite_code_name, [:int], :string
    attach_function :magnetite_category_name, [:int], :string
    attach_function :magnetite_free, [:pointer], :void
    attach_function :magnetite_version, [], :string
    attach_function :magnetite_owned_item_release, [:pointer], :void
    attach_function :magnetite_rows_count, [:pointer], :size_t
    attach_function :magnetite_rows_get, [:pointer, :size_t, :pointer, :pointer, :pointer, :pointer], :void
    attach_function :magnetite_rows_next, [:pointer, :pointer, :pointer], :int
    attach_function :magnetite_rows_free, [:pointer], :void

    attach_function :magnetite_options_create, [], :pointer
    attach_function :magnetite_options_free, [:pointer], :void
    attach_function :magnetite_options_set_shards, [:pointer, :size_t], :void
    attach_function :magnetite_options_set_memory_budget, [:pointer, :uint64], :void
    attach_function :magnetite_options_set_fsync, [:pointer, :int, :uint32], :void
    attach_function :magnetite_options_set_retained_checkpoints, [:pointer, :size_t], :void
    attach_function :magnetite_options_set_writer_spin, [:pointer, :uint32], :void

    def self.blocking(name, args, ret)
      attach_function name, args, ret, blocking: true
    end

    blocking :magnetite_open, [:string, :pointer, :pointer], :pointer
    blocking :magnetite_close, [:pointer], :void
    attach_function :magnetite_shard_count, [:pointer], :size_t
    blocking :magnetite_get, [:pointer, :pointer, :size_t, :pointer, :pointer, :pointer], :pointer
    blocking :magnetite_put, [:pointer, :pointer, :size_t, :pointer, :size_t, :int64], :pointer
    blocking :magnetite_del, [:pointer, :pointer, :size_t], :pointer
    blocking :magnetite_cas, [:pointer, :pointer, :size_t, :pointer, :size_t, :pointer, :size_t, :int64,
                              :pointer, :pointer, :pointer, :pointer], :pointer
    blocking :magnetite_commit, [:pointer, :pointer], :pointer
    blocking :magnetite_scan, [:pointer, :pointer, :size_t, :pointer, :size_t, :pointer], :pointer
    blocking :magnetite_cursor_next, [:pointer, :pointer, :pointer, :pointer, :pointer, :pointer], :pointer
    blocking :magnetite_cursor_free, [:pointer], :void

    blocking :magnetite_owner_open, [:pointer, :pointer, :size_t, :pointer, :size_t, :pointer], :pointer
    blocking :magnetite_owner_commit, [:pointer, :int64], :pointer
    attach_function :magnetite_owner_rollback, [:pointer], :void
    blocking :magnetite_owner_free, [:pointer], :void
    %w[value map deque].each do |kind|
      attach_function :"magnetite_owner_#{kind}", [:pointer, :pointer, :size_t, :pointer, :pointer], :pointer
      blocking :"magnetite_#{kind}_commit", [:pointer, :int64], :pointer
      attach_function :"magnetite_#{kind}_rollback", [:pointer], :void
      attach_function :"magnetite_#{kind}_close", [:pointer], :void
      blocking :"magnetite_#{kind}_free", [:pointer], :void
    end
    blocking :magnetite_value_get, [:pointer, :pointer, :pointer], :pointer
    blocking :magnetite_value_set, [:pointer, Item.by_value], :pointer
    blocking :magnetite_value_clear, [:pointer], :pointer

    blocking :magnetite_map_get, [:pointer, :pointer, :size_t, :pointer, :pointer], :pointer
    blocking :magnetite_map_get_many, [:pointer, :pointer, :pointer, :size_t, :pointer, :pointer], :pointer
    blocking :magnetite_map_contains, [:pointer, :pointer, :size_t, :pointer], :pointer
    blocking :magnetite_map_set, [:pointer, :pointer, :size_t, Item.by_value], :pointer
    blocking :magnetite_map_remove, [:pointer, :pointer, :size_t], :pointer
    blocking :magnetite_map_clear, [:pointer], :pointer
    blocking :magnetite_map_is_empty, [:pointer, :pointer], :pointer
    blocking :magnetite_map_size, [:pointer, :pointer], :pointer
    blocking :magnetite_map_scan, [:pointer, :pointer, :pointer], :pointer
    blocking :magnetite_map_keys, [:pointer, :pointer, :pointer], :pointer

    blocking :magnetite_deque_len, [:pointer, :pointer], :pointer
    blocking :magnetite_deque_is_empty, [:pointer, :pointer], :pointer
    blocking :magnetite_deque_get, [:pointer, :uint64, :pointer, :pointer], :pointer
    %w[peek_front peek_back pop_front pop_back].each do |verb|
      blocking :"magnetite_deque_#{verb}", [:pointer, :pointer, :pointer], :pointer
    end
    blocking :magnetite_deque_push_front, [:pointer, Item.by_value], :pointer
    blocking :magnetite_deque_push_back, [:pointer, Item.by_value], :pointer
    blocking :magnetite_deque_clear, [:pointer], :pointer
    blocking :magnetite_deque_scan, [:pointer, :int, :pointer], :pointer

    blocking :magnetite_state_cursor_next, [:pointer, :size_t, :pointer], :pointer
    blocking :magnetite_state_cursor_free, [:pointer], :void

    blocking :magnetite_record_load, [:pointer, :pointer, :size_t, :pointer, :size_t, :pointer, :pointer, :pointer],
             :pointer
    blocking :magnetite_record_list, [:pointer, :pointer, :size_t, :pointer, :size_t, :pointer, :size_t, :size_t,
                                      :pointer], :pointer
    blocking :magnetite_txn_begin, [:pointer, :pointer], :pointer
    blocking :magnetite_txn_load, [:pointer, :pointer, :size_t, :pointer, :size_t, :pointer, :pointer, :pointer],
             :pointer
    blocking :magnetite_txn_put, [:pointer, :pointer, :size_t, :pointer, :size_t, Item.by_value], :pointer
    blocking :magnetite_txn_del, [:pointer, :pointer, :size_t, :pointer, :size_t], :pointer
    blocking :magnetite_txn_commit, [:pointer, :int64, :pointer], :pointer
    attach_function :magnetite_txn_rollback, [:pointer], :void
    blocking :magnetite_txn_free, [:pointer], :void

    blocking :magnetite_stream_append, [:pointer, :pointer, :size_t, :pointer, :size_t, :uint64, :int64, :int64,
                                        :pointer], :pointer
    blocking :magnetite_stream_read, [:pointer, :pointer, :size_t, :uint64, :size_t, :pointer], :pointer
    blocking :magnetite_stream_next_seq, [:pointer, :pointer, :size_t, :pointer], :pointer
  end
end
