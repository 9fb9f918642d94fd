# frozen_string_literal: true

# ruby_state_bench: what the Ruby binding costs (issue 24). Keyed-state
# commits per second from 1 and 8 Ruby threads beside the same work from
# C++ (state_bench's `map` workload, run by this script in the same run).
#
#   ruby bench/ruby_state_bench.rb [--lib build/libmagnetite.so]
#        [--cpp build/bench/state_bench] [--seconds S] [--threads 1,8]
#        [--dir D]
#
# The work, as state_bench's map case does it: a database of 4 shards with
# the default options (fsync `always`); each thread is one owner
# (namespace "bench", owner "owner-T") with a map "m"; each commit is one set
# of a new entry (key: state_bench's key_of((T << 40) | n)) to
# {"pad": 84 x's, "v": n} and the map's commit. Each side runs S seconds
# (5) per thread count; the C++ side is `state_bench --only map --threads
# LIST --ours-only --seconds S`. After each Ruby run the maps must hold as
# many entries as commits were acknowledged, or the run fails.
#
# Reported per thread count: commits/s and p50/p99 latency of each side,
# and Ruby / C++. The Ruby threads run on MRI's global lock: they interleave
# their Ruby code and overlap only inside the C calls, which release it.
require "fileutils"
require "optparse"
require "tmpdir"

opts = { lib: "build/libmagnetite.so", cpp: "build/bench/state_bench", seconds: 5.0, threads: [1, 8],
         dir: File.join(Dir.tmpdir, "magnetite-ruby-state-bench-#{Process.pid}") }
OptionParser.new do |o|
  o.on("--lib PATH") { |v| opts[:lib] = v }
  o.on("--cpp PATH") { |v| opts[:cpp] = v }
  o.on("--seconds S", Float) { |v| opts[:seconds] = v }
  o.on("--threads LIST") { |v| opts[:threads] = v.split(",").map { |x| Integer(x) } }
  o.on("--dir D") { |v| opts[:dir] = v }
end.parse!
ENV["MAGNETITE_LIB"] = File.expand_path(opts[:lib])
require_relative "../bindings/ruby/lib/magnetite"

PAD = "x" * 84

def key_of(i)
  format("%016d", (i * 7919) % 10_000_000_000_000_000)
end

def percentile(sorted, p)
  return Float::NAN if sorted.empty?
  sorted[(p * (sorted.size - 1)).floor]
end

def ruby_side(dir, threads, seconds)
  FileUtils.rm_rf(dir)
  Magnetite::Database.open(dir, shards: 4) do |db|
    maps = Array.new(threads) { |t| db.state("bench", "owner-#{t}").map("m") }
    stop = false
    tallies = Array.new(threads) { { commits: 0, latency: [] } }
    started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    workers = Array.new(threads) do |t|
      Thread.new do
        m = maps[t]
        tally = tallies[t]
        n = 0
        until stop
          start = Process.clock_gettime(Process::CLOCK_MONOTONIC)
          m.set(key_of((t << 40) | n), { "pad" => PAD, "v" => n })
          m.commit
          tally[:latency] << (Process.clock_gettime(Process::CLOCK_MONOTONIC) - start) * 1e6
          tally[:commits] += 1
          n += 1
        end
      end
    end
    sleep seconds
    stop = true
    workers.each(&:join)
    elapsed = Process.clock_gettime(Process::CLOCK_MONOTONIC) - started
    commits = tallies.sum { |x| x[:commits] }
    entries = maps.sum(&:size)
    abort "ruby_state_bench: #{entries} entries after #{commits} acknowledged commits" unless entries == commits
    latency = tallies.flat_map { |x| x[:latency] }.sort
    { commits_per_s: commits / elapsed, p50: percentile(latency, 0.5), p99: percentile(latency, 0.99) }
  end
end

def cpp_side(cpp, dir, threads, seconds)
  out = IO.popen([cpp, "--only", "map", "--threads", threads.join(","), "--ours-only", "--seconds", seconds.to_s,
                  "--dir", dir], err: %i[child out], &:read)
  abort "ruby_state_bench: #{cpp} failed:\n#{out}" unless $?.success?
  figures = {}
  out.each_line do |line|
    m = line.match(/^\s+map\s+(\d+) threads?\s+magnetite\s+(\d+) commits\/s.*p50\s+(\d+) us\s+p99\s+(\d+) us/)
    figures[Integer(m[1])] = { commits_per_s: Float(m[2]), p50: Float(m[3]), p99: Float(m[4]) } if m
  end
  abort "ruby_state_bench: no figures from #{cpp}:\n#{out}" unless figures.size == threads.size
  figures
end

FileUtils.mkdir_p(opts[:dir])
begin
  date = Time.now.utc.strftime("%Y-%m-%dT%H:%M:%SZ")
  puts "ruby_state_bench #{date}: #{opts[:seconds]} s a case, 4 shards, Ruby #{RUBY_VERSION}, " \
       "ffi #{FFI::VERSION}, magnetite #{Magnetite.library_version}"
  cpp = cpp_side(opts[:cpp], File.join(opts[:dir], "cpp"), opts[:threads], opts[:seconds])
  rows = opts[:threads].map do |t|
    [t, ruby_side(File.join(opts[:dir], "ruby-#{t}"), t, opts[:seconds]), cpp.fetch(t)]
  end
  puts format("%-8s %12s %12s %8s   %10s %10s   %10s %10s", "threads", "Ruby c/s", "C++ c/s", "Ruby/C++",
              "Ruby p50", "C++ p50", "Ruby p99", "C++ p99")
  rows.each do |t, r, c|
    puts format("%-8d %12.0f %12.0f %7.2fx   %8.0f us %7.0f us   %7.0f us %7.0f us", t, r[:commits_per_s],
                c[:commits_per_s], r[:commits_per_s] / c[:commits_per_s], r[:p50], c[:p50], r[:p99], c[:p99])
  end
ensure
  FileUtils.rm_rf(opts[:dir])
end
