# frozen_string_literal: true

require_relative "spec_helper"
require "open3"
require "rbconfig"

# docs/ruby.md's first program, run as a reader would run it: it must work
# and print what the page says it prints.
RSpec.describe "docs/ruby.md" do
  it "has a first program that runs" do
    page = File.read(File.expand_path("../../../docs/ruby.md", __dir__))
    program = page[/```ruby\n(require "magnetite".*?)```/m, 1]
    expect(program).not_to be_nil
    dir = fresh_dir
    out, status = Open3.capture2e(ENV.slice("MAGNETITE_LIB"), RbConfig.ruby, "-I",
                                  File.expand_path("../lib", __dir__), "-e", program, chdir: dir)
    expect(status.success?).to be(true), out
    expect(out).to include("order-1 true")
    expect(out).to include("use clear")
  end
end
