# frozen_string_literal: true

# Loads the binding against the library MAGNETITE_LIB names (scripts/run-tests
# sets it to the build's libmagnetite.so) and gives every example a fresh
# directory.
require "tmpdir"
require "fileutils"
require_relative "../lib/magnetite"

module SpecDirs
  def fresh_dir
    @dirs ||= []
    dir = Dir.mktmpdir("magnetite-rspec-")
    @dirs << dir
    dir
  end
end

RSpec.configure do |config|
  config.include SpecDirs
  config.after { (@dirs || []).each { |d| FileUtils.rm_rf(d) } }
  config.order = :defined
  config.expect_with(:rspec) { |c| c.syntax = :expect }
end

# Polls until the block is true, at most `seconds`: for TTLs, which pass by
# the wall clock (the C API has no clock to drive).
def eventually(seconds = 10)
  deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + seconds
  loop do
    return true if yield
    return false if Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline
    sleep 0.005
  end
end
