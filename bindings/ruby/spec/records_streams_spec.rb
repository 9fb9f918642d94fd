# frozen_string_literal: true

require_relative "spec_helper"

RSpec.describe "records, transactions and streams" do
  let(:db) { Magnetite::Database.open(fresh_dir, shards: 2) }
  after { db.close }

  it "commits a transaction across namespaces with revisions, and reads its own writes" do
    rev = db.transaction do |tx|
      expect(tx.load("accounts", "alice")).to be_nil
      tx.put("accounts", "alice", { "balance" => 10 })
      tx.put("ledger", "entry-1", %w[alice 10])
      expect(tx.load("accounts", "alice")).to eq(Magnetite::Record.new({ "balance" => 10 }, 0))
    end
    expect(rev).to be > 0
    alice = db.records.load("accounts", "alice")
    expect(alice.value).to eq({ "balance" => 10 })
    expect(alice.revision).to be > 0
    expect(db.records.load("ledger", "entry-1").value).to eq(%w[alice 10])
  end

  it "refuses the second of two conflicting commits as a ConflictError that wrote nothing" do
    db.transaction { |tx| tx.put("accounts", "alice", 10) }
    a = db.begin_transaction
    b = db.begin_transaction
    a.load("accounts", "alice")
    b.load("accounts", "alice")
    a.put("accounts", "alice", 11)
    b.put("accounts", "alice", 99)
    a.commit
    expect { b.commit }.to raise_error(Magnetite::ConflictError) { |e|
      expect(e).to be_a(Magnetite::TransientStateError)
      expect(e.code).to eq(:conflict)
    }
    expect(db.records.load("accounts", "alice").value).to eq(11)
    expect(b.finished?).to be(true)
    expect { b.put("accounts", "alice", 1) }.to raise_error(Magnetite::TransientStateError)
    [a, b].each(&:free)
  end

  it "rolls a transaction back when its block raises" do
    expect do
      db.transaction do |tx|
        tx.put("accounts", "bob", 1)
        raise ArgumentError, "changed my mind"
      end
    end.to raise_error(ArgumentError)
    expect(db.records.load("accounts", "bob")).to be_nil
    expect { db.transaction { |tx| tx.put("accounts", "bob", nil) } }.to raise_error(Magnetite::NullValueError, /delete/)
  end

  it "lists records by prefix in pages" do
    db.transaction { |tx| 5.times { |i| tx.put("catalog", "item-#{i}", i) } }
    page = db.records.list("catalog", prefix: "item-", limit: 2)
    expect(page.records.map(&:first)).to eq(%w[item-0 item-1])
    expect(page.next).to eq("item-1")
    rest = db.records.list("catalog", prefix: "item-", start_after: page.next, limit: 10)
    expect(rest.records.map { |k, r| [k, r.value] }).to eq([["item-2", 2], ["item-3", 3], ["item-4", 4]])
    expect(rest.next).to be_nil
    expect { db.records.list("catalog", limit: 5000) }.to raise_error(Magnetite::TransientStateError)
  end

  it "appends to a stream at its expected seq, refuses a moved one, and reads in order" do
    s = db.streams
    expect(s.next_seq("events")).to eq(0)
    expect(s.append("events", [{ "e" => "created" }, Magnetite::Bytes.new("\x01")], expected_seq: 0)).to eq(0)
    expect { s.append("events", ["again"], expected_seq: 0) }.to raise_error(Magnetite::ConflictError, /2/)
    expect(s.append("events", "shipped", expected_seq: 2)).to eq(2)
    expect(s.read("events", from_seq: 1, limit: 10)).to eq([[1, Magnetite::Bytes.new("\x01")], [2, "shipped"]])
    expect(s.next_seq("events")).to eq(3)
    expect { s.append("events", [nil], expected_seq: 3) }.to raise_error(Magnetite::NullValueError)
    expect(s.next_seq("events")).to eq(3)
  end
end
