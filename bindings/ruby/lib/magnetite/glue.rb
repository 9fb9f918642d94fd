# frozen_string_literal: true

require "json"

module Magnetite
  # Raw bytes, stored as given and never parsed: what a value is when it is
  # not a JSON document (a String is a JSON string).
  Bytes = Struct.new(:data) do
    def initialize(data)
      super(String(data).b)
    end
  end

  # The conversions between Ruby and the C API, shared by every class.
  module Glue
    module_function

    NULL = FFI::Pointer::NULL

    # A byte buffer for a (pointer, length) pair; kept alive by the caller
    # for the call. nil gives NULL (absent), "" a real empty buffer.
    def buffer(str)
      return [NULL, 0] if str.nil?
      s = String(str).b
      ptr = FFI::MemoryPointer.new(:char, [s.bytesize, 1].max)
      ptr.put_bytes(0, s) unless s.empty?
      [ptr, s.bytesize]
    end

    # Raises the error behind a C API error pointer (and frees it); nothing
    # for NULL. `state`: a keyed-state, record or stream call.
    def check(err, state: false)
      return if err.null?
      code = CODES.fetch(Native.magnetite_error_code(err), :failed)
      category = CATEGORIES.fetch(Native.magnetite_error_category(err), :permanent)
      message = Native.magnetite_error_message(err).dup.force_encoding(Encoding::UTF_8)
      Native.magnetite_error_free(err)
      klass = Magnetite.error_class(code, category, state)
      klass = ClosedError if state && code == :invalid_argument && message.include?("closed")
      raise klass.new(message, code: code, category: category)
    end

    def transient(message)
      raise TransientStateError.new(message, code: :invalid_argument, category: :transient)
    end

    def seconds_to_ms(seconds, what)
      return 0 if seconds.nil?
      unless seconds.is_a?(Numeric) && seconds.finite?
        transient("#{what} must be a number of seconds, not #{seconds.inspect}")
      end
      ms = (seconds * 1000).ceil
      transient("#{what} must be above 0 seconds, not #{seconds}") if ms <= 0
      ms
    end

    # JSON text for a value, or a transient error: prosody's rules. nil is
    # refused naming the verb that deletes; what JSON cannot represent (a
    # NaN, an object, a non-string key) is refused before anything is sent.
    def item(value, delete_verb)
      if value.nil?
        raise NullValueError.new("a null cannot be stored (absence means no value); use #{delete_verb}",
                                 code: :invalid_argument, category: :transient)
      end
      if value.is_a?(Bytes)
        [ITEM_BYTES, value.data]
      else
        [ITEM_JSON, json_text(value)]
      end
    end

    ITEM_JSON = Native::ITEM_JSON
    ITEM_BYTES = Native::ITEM_BYTES

    def json_text(value)
      representable!(value, "the value")
      JSON.generate(value)
    rescue JSON::GeneratorError, Encoding::UndefinedConversionError => e
      transient("the value is not representable as JSON: #{e.message}")
    end

    def representable!(value, where)
      case value
      when nil, true, false, Integer, String then nil
      when Float
        transient("#{where} holds #{value}, which JSON cannot represent") unless value.finite?
      when Array then value.each_with_index { |v, i| representable!(v, "#{where}[#{i}]") }
      when Hash
        value.each do |k, v|
          unless k.is_a?(String) || k.is_a?(Symbol)
            transient("#{where} has the key #{k.inspect}; JSON object keys are strings")
          end
          representable!(v, "#{where}[#{k.inspect}]")
        end
      else
        transient("#{where} is a #{value.class}, which is not representable as JSON " \
                  "(Hash, Array, String, Integer, Float, true, false; Magnetite::Bytes for raw bytes)")
      end
    end

    # An Item struct for a call, and the buffer behind it (keep both alive).
    def item_struct(value, delete_verb)
      kind, data = item(value, delete_verb)
      ptr, len = buffer(data)
      s = Native::Item.new
      s[:kind] = kind
      s[:data] = ptr
      s[:size] = len
      [s, ptr]
    end

    def decode(kind, bytes)
      if kind == ITEM_BYTES
        Bytes.new(bytes)
      else
        JSON.parse(bytes.force_encoding(Encoding::UTF_8))
      end
    end

    # Calls the block with an OwnedItem and a found flag; the item's value or
    # nil. The item's buffer is released either way.
    def optional_item(state: true)
      out = Native::OwnedItem.new
      found = FFI::MemoryPointer.new(:int)
      begin
        check(yield(out.pointer, found), state: state)
        return nil if found.read_int.zero?
        decode(out[:kind], out[:data].read_bytes(out[:size]))
      ensure
        Native.magnetite_owned_item_release(out.pointer)
      end
    end

    # The rows behind a rows pointer as [key, value, number] triples (nil
    # where the row has none), and the next page's cursor; frees them.
    def rows(ptr, keys: true, items: true)
      count = Native.magnetite_rows_count(ptr)
      key = FFI::MemoryPointer.new(:pointer)
      key_len = FFI::MemoryPointer.new(:size_t)
      item = Native::Item.new
      number = FFI::MemoryPointer.new(:uint64)
      out = Array.new(count) do |i|
        Native.magnetite_rows_get(ptr, i, key, key_len, item.pointer, number)
        k = keys ? key.read_pointer.read_bytes(key_len.read(:size_t)).force_encoding(Encoding::UTF_8) : nil
        v = items ? decode(item[:kind], item[:data].read_bytes(item[:size])) : nil
        [k, v, number.read_uint64]
      end
      nxt = nil
      nxt = key.read_pointer.read_bytes(key_len.read(:size_t)) if Native.magnetite_rows_next(ptr, key, key_len) == 1
      [out, nxt]
    ensure
      Native.magnetite_rows_free(ptr)
    end

    def out_pointer
      FFI::MemoryPointer.new(:pointer)
    end
  end
end
