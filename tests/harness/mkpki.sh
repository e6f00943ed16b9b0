#!/bin/sh
#
# mkpki.sh DIR: the test PKI for TLS upstreams (origin -C/-K) in the
# integration tests and the benchmark. Needs only the openssl CLI (3.x).
#
#   ca.crt, ca.key                  root "airlock test upstream CA"
#   good.crt, good.key              SAN api.test, localhost, 127.0.0.1, ::1;
#                                   valid from yesterday for 30 days
#   wronghost.crt, wronghost.key    SAN other.test only
#   expired.crt, expired.key        SAN as good, valid 2020-01-01..2020-02-01
#   selfsigned.crt, selfsigned.key  SAN api.test, self-signed (no CA)
#
# Leaves are signed by the CA; all keys are ECDSA P-256 (PKCS#8, 0600).
# Idempotent: when the set is complete and good.crt is valid for another
# day, nothing is touched (so a running origin and its clients keep
# agreeing); otherwise the whole set is made anew. See certs/README.md.

set -eu

[ $# -eq 1 ] || { echo "usage: mkpki.sh DIR" >&2; exit 2; }
dir=$1
mkdir -p "$dir"
cd "$dir"

FILES="ca.crt ca.key good.crt good.key wronghost.crt wronghost.key
expired.crt expired.key selfsigned.crt selfsigned.key"

complete=1
for f in $FILES; do
	[ -s "$f" ] || complete=0
done
if [ "$complete" = 1 ] &&
    openssl x509 -in good.crt -noout -checkend 86400 >/dev/null 2>&1 &&
    openssl verify -CAfile ca.crt good.crt >/dev/null 2>&1; then
	exit 0
fi

umask 077
# Nothing half-made survives a failure.
trap 'rm -rf pki.work' EXIT
rm -rf pki.work
mkdir pki.work

# Everything openssl reads comes from this file, not the system's.
cat >pki.work/ca.cnf <<'EOF'
[ req ]
distinguished_name = dn
prompt = no
[ dn ]
CN = unused

[ ca ]
default_ca = test_ca
[ test_ca ]
dir = pki.work
database = $dir/index.txt
serial = $dir/serial
new_certs_dir = $dir
certificate = $dir/ca.crt
private_key = $dir/ca.key
default_md = sha256
policy = anything
unique_subject = no
copy_extensions = none
email_in_dn = no
[ anything ]
commonName = supplied

[ v3_ca ]
basicConstraints = critical, CA:TRUE
keyUsage = critical, keyCertSign, cRLSign
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid:always

[ v3_leaf ]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = serverAuth
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid, issuer
subjectAltName = $ENV::SAN

[ v3_self ]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = serverAuth
subjectKeyIdentifier = hash
subjectAltName = $ENV::SAN
EOF
: >pki.work/index.txt
CNF=pki.work/ca.cnf
SAN=unused
export SAN

newkey() {
	openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 \
	    -out "pki.work/$1.key" 2>/dev/null
}

# Leaf NAME CN SAN START END, signed by the CA (dates YYYYMMDDHHMMSSZ).
leaf() {
	newkey "$1"
	openssl req -new -config "$CNF" -key "pki.work/$1.key" \
	    -subj "/CN=$2" -out "pki.work/$1.csr"
	SAN=$3 openssl ca -batch -notext -config "$CNF" -extensions v3_leaf \
	    -rand_serial -startdate "$4" -enddate "$5" \
	    -in "pki.work/$1.csr" -out "pki.work/$1.crt" 2>/dev/null
}

# The CA itself: self-signed through "openssl ca" too, so that it can be
# backdated like the leaves.
now_minus_day=$(date -u -d '1 day ago' +%Y%m%d%H%M%SZ 2>/dev/null ||
    date -u -v-1d +%Y%m%d%H%M%SZ)
in_30_days=$(date -u -d '30 days' +%Y%m%d%H%M%SZ 2>/dev/null ||
    date -u -v+30d +%Y%m%d%H%M%SZ)
in_10_years=$(date -u -d '10 years' +%Y%m%d%H%M%SZ 2>/dev/null ||
    date -u -v+10y +%Y%m%d%H%M%SZ)

newkey ca
openssl req -new -config "$CNF" -key pki.work/ca.key \
    -subj "/CN=airlock test upstream CA" -out pki.work/ca.csr
openssl ca -batch -notext -config "$CNF" -selfsign -extensions v3_ca \
    -keyfile pki.work/ca.key -rand_serial \
    -startdate "$now_minus_day" -enddate "$in_10_years" \
    -in pki.work/ca.csr -out pki.work/ca.crt 2>/dev/null

GOOD_SAN="DNS:api.test, DNS:localhost, IP:127.0.0.1, IP:::1"
leaf good api.test "$GOOD_SAN" "$now_minus_day" "$in_30_days"
leaf wronghost other.test "DNS:other.test" "$now_minus_day" "$in_30_days"
leaf expired api.test "$GOOD_SAN" 20200101000000Z 20200201000000Z

newkey selfsigned
SAN="DNS:api.test" openssl req -new -x509 -config "$CNF" \
    -extensions v3_self -key pki.work/selfsigned.key -subj "/CN=api.test" \
    -days 30 -out pki.work/selfsigned.crt

for n in ca good wronghost expired selfsigned; do
	cp "pki.work/$n.key" "pki.work/$n.crt" .
done
chmod 600 ./*.key
chmod 644 ./*.crt
