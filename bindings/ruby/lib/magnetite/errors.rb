# frozen_string_literal: true

module Magnetite
  # Every error the binding raises. #code is the C API's code as a symbol
  # (:conflict, :invalid_argument, ...), #category :transient, :permanent or
  # :ambiguous.
  class Error < StandardError
    attr_reader :code, :category

    def initialize(message = nil, code: nil, category: nil)
      super(message)
      @code = code
      @category = category
    end
  end

  # Retrying will not help: damaged data, a failed shard, a refused operation.
  class PermanentError < Error; end

  # Retrying may succeed, and nothing was written: a busy directory, a shard
  # restarting, a conflict, a caller's mistake in keyed state (which the
  # caller fixes and retries, as prosody treats it).
  class TransientError < Error; end

  # The write may or may not have happened (a deadline passed after the
  # write was handed over). A TransientError, as prosody has no third class:
  # retrying a state commit is safe (its writes are the same); a host that
  # must tell the two apart rescues AmbiguousError first.
  class AmbiguousError < TransientError; end

  # Errors of keyed state, records and streams (prosody's state errors).
  class PermanentStateError < PermanentError; end
  class TransientStateError < TransientError; end
  class AmbiguousStateError < TransientStateError; end

  # A JSON null written where a value goes: absence means "no value"; the
  # message names the verb that deletes.
  class NullValueError < TransientStateError; end

  # An optimistic precondition moved (a transaction's read, a stream's
  # expected seq): nothing was written; redo the work and retry.
  class ConflictError < TransientStateError; end

  # A handle used after it was closed (by itself, its owner state or the
  # database).
  class ClosedError < TransientStateError; end

  CODES = %i[ok not_found invalid_argument corruption io_error no_space busy failed conflict timeout
             not_supported permission_denied].freeze
  CATEGORIES = %i[none transient permanent ambiguous].freeze

  # The error class for a C API error: by category, and for keyed state,
  # records and streams (state: true) the state classes.
  def self.error_class(code, category, state)
    if state
      return ConflictError if code == :conflict
      return { transient: TransientStateError, ambiguous: AmbiguousStateError }.fetch(category, PermanentStateError)
    end
    { transient: TransientError, ambiguous: AmbiguousError }.fetch(category, PermanentError)
  end
end
