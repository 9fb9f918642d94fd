# frozen_string_literal: true

require_relative "spec_helper"

RSpec.describe Magnetite::Database do
  it "puts, gets, deletes and compares-and-sets bytes, and keeps them across a reopen" do
    dir = fresh_dir
    Magnetite::Database.open(dir, shards: 2) do |db|
      db.put("k\x00ey", "v\x00alue")
      expect(db.get("k\x00ey")).to eq("v\x00alue".b)
      expect(db.get("absent")).to be_nil
      expect(db.cas("c", expected: nil, desired: "one")).to eq([true, nil])
      expect(db.cas("c", expected: "two", desired: "three")).to eq([false, "one"])
      expect(db.cas("c", expected: "one", desired: nil)).to eq([true, nil])
      expect(db.get("c")).to be_nil
      db.delete("k\x00ey")
      expect(db.get("k\x00ey")).to be_nil
      db.put("kept", "yes")
      expect(db.commit).to match(/\A\h{32}\z/)
    end
    Magnetite::Database.open(dir) { |db| expect(db.get("kept")).to eq("yes") }
  end

  it "scans in key order across shards as an Enumerator" do
    Magnetite::Database.open(fresh_dir, shards: 3) do |db|
      50.times { |i| db.put(format("k%02d", i), i.to_s) }
      expect(db.scan("k10", "k20").map(&:first)).to eq((10...20).map { |i| format("k%02d", i) })
      expect(db.scan("k45").count).to eq(5)
    end
  end

  it "expires a plain key by its TTL" do
    Magnetite::Database.open(fresh_dir) do |db|
      db.put("session", "alice", ttl: 0.03)
      expect(eventually { db.get("session").nil? }).to be(true)
    end
  end

  it "refuses a directory another holder has, as a TransientError; bad input as a PermanentError" do
    dir = fresh_dir
    Magnetite::Database.open(dir) do |db|
      expect { Magnetite::Database.open(dir) }.to raise_error(Magnetite::TransientError, /#{Regexp.escape(dir)}/) { |e|
        expect(e.code).to eq(:busy)
      }
      expect { db.put("k" * 100_000, "v") }.to raise_error(Magnetite::PermanentError) { |e|
        expect(e.code).to eq(:invalid_argument)
      }
      expect { db.put("", "v") }.to raise_error(Magnetite::PermanentError, /empty/)
      db.put("still", "serving")
      expect(db.get("still")).to eq("serving")
    end
    expect { Magnetite::Database.open(fresh_dir, fsync: :sometimes) }.to raise_error(Magnetite::PermanentError)
  end

  it "takes writer_spin in seconds, refusing what the engine would not" do
    Magnetite::Database.open(fresh_dir, writer_spin: 0) do |db|
      db.put("k", "v")
      expect(db.get("k")).to eq("v")
    end
    # 0.2 s passes the binding and is refused by open, naming the option.
    [0.2, -1].each do |bad|
      expect { Magnetite::Database.open(fresh_dir, writer_spin: bad) }.to raise_error(Magnetite::PermanentError, /writer_spin/) { |e|
        expect(e.code).to eq(:invalid_argument)
      }
    end
  end

  it "closes whatever is still open with it, and refuses calls after close" do
    dir = fresh_dir
    db = Magnetite::Database.open(dir)
    v = db.state("ns", "o").value("v")
    tx = db.begin_transaction
    scan = db.scan.each_slice(1) # an iteration not started
    db.close
    expect(db.closed?).to be(true)
    expect { v.get }.to raise_error(Magnetite::ClosedError)
    expect { tx.load("r", "k") }.to raise_error(Magnetite::ClosedError)
    expect { db.get("k") }.to raise_error(Magnetite::ClosedError)
    expect { scan.to_a }.to raise_error(Magnetite::ClosedError)
    db.close # idempotent
    # The directory is free again.
    Magnetite::Database.open(dir) { |again| expect(again.get("k")).to be_nil }
  end

  it "lets other Ruby threads run while a call waits for its fsync" do
    Magnetite::Database.open(fresh_dir, shards: 1) do |db|
      ticks = 0
      running = true
      # It ticks, then sleeps (giving the global lock back) a moment.
      ticker = Thread.new do
        while running
          ticks += 1
          sleep 0.00005
        end
      end
      Thread.pass while ticks.zero?
      inside = 0
      300.times do |i|
        before = ticks
        db.put("k#{i}", "v") # a write and its fdatasync
        # The ticker cannot tick between the two reads unless the call gave
        # up Ruby's global lock while it waited.
        inside += 1 if ticks != before
      end
      running = false
      ticker.join
      # Holding the lock, a call can see a tick only when Ruby's 100-ms
      # timeslice happens to end right there: a few in 300 calls at most.
      # Giving it up, most calls see one, and still dozens when other
      # processes keep both cores busy.
      expect(inside).to be >= 20
    end
  end

  it "is thread-safe: eight threads write and read one database" do
    Magnetite::Database.open(fresh_dir, shards: 2) do |db|
      threads = Array.new(8) do |t|
        Thread.new { 50.times { |i| db.put("t#{t}-#{i}", "#{t}:#{i}") } }
      end
      threads.each(&:join)
      expect(db.scan.count).to eq(400)
      expect(db.get("t7-49")).to eq("7:49")
    end
  end
end
