# frozen_string_literal: true

# magnetite for Ruby (docs/ruby.md): the embeddable storage engine through
# its C API (<magnetite/c.h>), with prosody's keyed-state interface.
require_relative "magnetite/native"
require_relative "magnetite/errors"
require_relative "magnetite/glue"
require_relative "magnetite/database"
require_relative "magnetite/state"
require_relative "magnetite/records"

module Magnetite
  VERSION = "0.1.0"

  # The version of the library loaded, "MAJOR.MINOR.PATCH".
  def self.library_version
    Native.magnetite_version
  end
end
