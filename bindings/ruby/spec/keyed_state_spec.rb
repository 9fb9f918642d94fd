# frozen_string_literal: true

require_relative "spec_helper"

# prosody's keyed-state semantics, run against the binding.
RSpec.describe "keyed state" do
  let(:db) { Magnetite::Database.open(fresh_dir, shards: 2, memory_budget: 16 << 20) }
  let(:state) { db.state("orders", "customer-7") }
  after { db.close }

  describe "a value" do
    it "reads buffered writes back before the commit, and others see them only after it" do
      v = state.value("total")
      expect(v.get).to be_nil
      v.set({ "n" => 3, "tags" => %w[a b] })
      expect(v.get).to eq({ "n" => 3, "tags" => %w[a b] })
      other = db.state("orders", "customer-7").value("total")
      expect(other.get).to be_nil
      v.commit
      expect(other.get).to eq({ "n" => 3, "tags" => %w[a b] })
    end

    it "rolls back what was buffered since the last commit, and rollback cannot fail" do
      v = state.value("total")
      v.set(1)
      v.commit
      v.set(2)
      expect(v.get).to eq(2)
      v.rollback
      expect(v.get).to eq(1)
      v.rollback
      expect(v.get).to eq(1)
    end

    it "stores every JSON type and raw bytes, and clear deletes" do
      v = state.value("any")
      [{ "a" => [1, 2.5, true, false, "x"] }, [], "text", 42, -1.25, true, false,
       Magnetite::Bytes.new("\x00\xff".b)].each do |x|
        v.set(x)
        v.commit
        expect(db.state("orders", "customer-7").value("any").get).to eq(x)
      end
      v.clear
      v.commit
      expect(v.get).to be_nil
    end

    it "refuses nil as a NullValueError naming the verb that deletes, and writes nothing" do
      v = state.value("total")
      v.set(5)
      v.commit
      expect { v.set(nil) }.to raise_error(Magnetite::NullValueError, /use clear/) { |e|
        expect(e).to be_a(Magnetite::TransientStateError)
        expect(e).to be_a(Magnetite::TransientError)
        expect(e.category).to eq(:transient)
      }
      v.commit
      expect(v.get).to eq(5)
    end

    it "refuses what JSON cannot represent as transient, naming where" do
      v = state.value("total")
      expect { v.set(Float::NAN) }.to raise_error(Magnetite::TransientStateError, /NaN/)
      expect { v.set({ "a" => [1, Object.new] }) }.to raise_error(Magnetite::TransientStateError, /\[1\]/)
      expect { v.set({ 1 => "x" }) }.to raise_error(Magnetite::TransientStateError, /key 1/)
      expect { v.set("\xff".b) }.to raise_error(Magnetite::TransientError)
      expect(v.get).to be_nil
    end
  end

  describe "a map" do
    it "sets, gets, removes and clears, with contains_key and get_many aligned" do
      m = state.map("prices")
      m.set("b", 2)
      m.set("a", 1)
      m.set("c", { "x" => 3 })
      expect(m.get("a")).to eq(1)
      expect(m.contains_key("c")).to be(true)
      expect(m.contains_key("z")).to be(false)
      expect(m.get_many(%w[c z a])).to eq([{ "x" => 3 }, nil, 1])
      expect(m.size).to eq(3)
      m.commit
      m.remove("b")
      expect(m.get("b")).to be_nil
      expect(m.size).to eq(2)
      m.rollback
      expect(m.get("b")).to eq(2)
      m.clear
      expect(m.empty?).to be(true)
      expect(m.is_empty).to be(true)
      m.commit
      expect(db.state("orders", "customer-7").map("prices").empty?).to be(true)
      expect { m.set("k", nil) }.to raise_error(Magnetite::NullValueError, /remove\(key\)/)
    end

    it "scans as an Enumerator both ways, pulling chunks, with from, after, to, prefix and limit" do
      m = state.map("m")
      ("a".."j").each_with_index { |k, i| m.set(k, i) }
      m.commit
      m.remove("e") # buffered: the scan sees it
      scan = m.scan(chunk: 3)
      expect(scan).to be_a(Enumerator)
      expect(scan.to_a).to eq(("a".."j").reject { |k| k == "e" }.map { |k| [k, k.ord - "a".ord] })
      expect(m.scan(:backward).first(2)).to eq([["j", 9], ["i", 8]])
      expect(m.keys(after: "b", limit: 3).to_a).to eq(%w[c d f])
      expect(m.keys(from: "h").to_a).to eq(%w[h i j])
      expect(m.keys(to: "c").to_a).to eq(%w[a b])
      expect(m.keys(:backward, to: "h").to_a).to eq(%w[j i])
      m.set("pre-1", 1)
      m.set("pre-2", 2)
      expect(m.keys(prefix: "pre-").to_a).to eq(%w[pre-1 pre-2])
      # External iteration: next until StopIteration; exhausted stays exhausted.
      e = m.keys(prefix: "pre-")
      expect(e.next).to eq("pre-1")
      expect(e.next).to eq("pre-2")
      expect { e.next }.to raise_error(StopIteration)
      expect { e.next }.to raise_error(StopIteration)
    end

    it "refuses a bad direction, chunk or limit as transient before anything runs" do
      m = state.map("m")
      expect { m.scan(:sideways) }.to raise_error(Magnetite::TransientStateError, /direction/)
      expect { m.scan(chunk: 0) }.to raise_error(Magnetite::TransientStateError, /chunk/)
      expect { m.keys(limit: -1) }.to raise_error(Magnetite::TransientStateError, /limit/)
      expect { m.scan(from: "a", after: "b").to_a }.to raise_error(Magnetite::TransientStateError)
    end
  end

  describe "a deque" do
    it "pushes and pops at both ends, peeks, gets by index and scans both ways" do
      d = state.deque("recent")
      d.push_back(1)
      d.push_back(2)
      d.push_front(0)
      expect(d.len).to eq(3)
      expect(d.peek_front).to eq(0)
      expect(d.peek_back).to eq(2)
      expect(d.get(1)).to eq(1)
      expect(d.get(3)).to be_nil
      expect(d.scan.to_a).to eq([0, 1, 2])
      expect(d.scan(:backward, chunk: 1).to_a).to eq([2, 1, 0])
      d.commit
      expect(d.pop_front).to eq(0)
      expect(d.pop_back).to eq(2)
      expect(d.len).to eq(1)
      d.rollback
      expect(d.len).to eq(3)
      d.clear
      expect(d.empty?).to be(true)
      expect(d.pop_front).to be_nil
      expect { d.push_back(nil) }.to raise_error(Magnetite::NullValueError)
    end

    it "evicts from the other end at its capacity" do
      d = state.deque("last-three", capacity: 3)
      (1..5).each { |i| d.push_back(i) }
      expect(d.scan.to_a).to eq([3, 4, 5])
      d.push_front(0)
      expect(d.scan.to_a).to eq([0, 3, 4])
      d.commit
      expect(db.state("orders", "customer-7").deque("last-three", capacity: 3).scan.to_a).to eq([0, 3, 4])
      expect { state.deque("bad", capacity: 0) }.to raise_error(Magnetite::TransientStateError, /capacity/)
    end
  end

  describe "TTL" do
    it "hides an item once its TTL has passed, per item from its last write" do
      m = state.map("sessions", ttl: 0.05)
      m.set("alice", "here")
      m.commit
      expect(m.get("alice")).to eq("here")
      expect(eventually { m.get("alice").nil? }).to be(true)
      d = state.deque("events", ttl: 0.05)
      d.push_back("e1")
      d.commit
      expect(eventually { d.peek_front.nil? }).to be(true)
      expect { state.value("v", ttl: 0) }.to raise_error(Magnetite::TransientStateError, /ttl/)
      expect { state.value("v", ttl: "soon") }.to raise_error(Magnetite::TransientStateError, /ttl/)
    end
  end

  describe "the owner state" do
    it "commits every handle it made in one frame, and rolls them all back" do
      state.value("v").set(1)
      state.map("m").set("k", 2)
      state.commit
      fresh = db.state("orders", "customer-7")
      expect(fresh.value("v").get).to eq(1)
      expect(fresh.map("m").get("k")).to eq(2)
      state.value("v").set(9)
      state.rollback
      expect(state.value("v").get).to eq(1)
    end

    it "lives as long as its handles: a handle whose owner state was dropped still works" do
      m = db.state("orders", "dropped").map("m") # the owner state is garbage at once
      GC.start
      GC.start
      m.set("k", 1)
      m.commit
      expect(db.state("orders", "dropped").map("m").get("k")).to eq(1)
    end

    it "closes its handles: every later call raises ClosedError" do
      v = state.value("v")
      state.close
      expect { v.get }.to raise_error(Magnetite::ClosedError)
      w = db.state("orders", "x").value("w")
      w.close
      expect { w.set(1) }.to raise_error(Magnetite::ClosedError)
    end
  end
end
