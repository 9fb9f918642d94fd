# frozen_string_literal: true

# The Ruby binding of magnetite (docs/ruby.md). It loads the installed
# libmagnetite (or the one MAGNETITE_LIB names) through Ruby-FFI: nothing is
# compiled when the gem is installed.
Gem::Specification.new do |s|
  s.name = "magnetite"
  s.version = "0.1.0"
  s.summary = "magnetite, an embeddable storage engine: keyed state, records and streams from Ruby"
  s.description = "Value, map and deque state per owner with commit and rollback, transactional records, " \
                  "streams and plain keys, over magnetite's C API."
  s.authors = ["magnetite"]
  s.license = "Nonstandard"
  s.files = Dir["lib/**/*.rb"]
  s.require_paths = ["lib"]
  s.required_ruby_version = ">= 3.0"
  s.add_runtime_dependency "ffi", ">= 1.15"
end
