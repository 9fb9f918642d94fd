#!/usr/bin/env bash
# Generates the test certificates of tests/replication_tls_test.cc ONCE; they are
# committed, so the tests never need the openssl command. Run from this
# directory: ./generate.sh (needs OpenSSL 1.1.1 or later).
#
#   ca.pem                  the test cluster's CA (its key is thrown away)
#   node{1,2,3}.pem/.key    one certificate and key per node, signed by ca.pem
#   other-ca.pem            a second CA, unknown to the cluster
#   stranger.pem/.key       a node certificate signed by other-ca.pem
#
# Valid from 2000-01-01 to 2100-01-01, so a machine with a wrong clock still
# accepts them. EC P-256 keys, unencrypted; node certificates may serve as
# both TLS server and client (each node does both) and name 127.0.0.1.
set -euo pipefail
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# `openssl ca` is the one command of OpenSSL 3.0 that takes a start date.
ca_config() {  # NAME
  mkdir -p "$work/$1"
  : >"$work/$1/index.txt"
  cat >"$work/$1.cnf" <<CNF
[ca]
default_ca = this
[this]
database = $work/$1/index.txt
new_certs_dir = $work/$1
serial = $work/$1/serial
default_md = sha256
policy = any
copy_extensions = none
[any]
commonName = supplied
[ca_ext]
basicConstraints = critical, CA:TRUE
keyUsage = critical, keyCertSign, cRLSign
subjectKeyIdentifier = hash
[node_ext]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = serverAuth, clientAuth
subjectAltName = IP:127.0.0.1, DNS:localhost
authorityKeyIdentifier = keyid
CNF
  openssl rand -hex 8 >"$work/$1/serial"
}

new_key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1"; }

sign() {  # CA REQUEST OUT EXTENSIONS [-selfsign -keyfile KEY | -cert CA.pem -keyfile KEY]
  local ca=$1 req=$2 out=$3 ext=$4
  shift 4
  openssl ca -batch -notext -config "$work/$ca.cnf" -startdate 20000101000000Z -enddate 21000101000000Z \
    -extensions "$ext" -in "$req" -out "$out" "$@" 2>/dev/null
}

make_ca() {  # NAME SUBJECT
  ca_config "$1"
  new_key "$work/$1.key"
  openssl req -new -key "$work/$1.key" -subj "/CN=$2" -out "$work/$1.csr"
  sign "$1" "$work/$1.csr" "$1.pem" ca_ext -selfsign -keyfile "$work/$1.key"
}

make_node() {  # NAME CA SUBJECT
  new_key "$1.key"
  openssl req -new -key "$1.key" -subj "/CN=$3" -out "$work/$1.csr"
  sign "$2" "$work/$1.csr" "$1.pem" node_ext -cert "$2.pem" -keyfile "$work/$2.key"
}

make_ca ca "magnetite test cluster CA"
make_ca other-ca "magnetite test other CA"
for n in 1 2 3; do make_node "node$n" ca "magnetite test node $n"; done
make_node stranger other-ca "magnetite test stranger"
chmod 644 ./*.key  # test data: the build and CI read them as any user
