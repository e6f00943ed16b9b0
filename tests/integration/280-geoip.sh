#!/bin/sh
# GeoIP: with geoip.database, audit records carry the upstream's country
# and AS number (fresh and pooled connections); a policy's
# geo.deny_countries / geo.allow_countries refuse an address before any
# connect (403 denied, reason names the country), for names, IP literals,
# IPv4-mapped IPv6 and inside intercepted TLS; a connection pooled for one
# sandbox is not reused for another whose geo rules refuse it. A missing
# database is a config error at FILE:LINE:COL; a file that is not an mmdb
# stops -t, the daemon's start, and a reload (which keeps the old config).
# The database is written by mkmmdb.pl with loopback ranges mapped to
# countries: 127.0.0.1 DE/AS3320, 127.0.0.2 KP/AS64500, 127.0.0.3 FR,
# nothing for 127.0.0.4.
. "$top_srcdir/tests/integration/lib.sh"

command -v perl >/dev/null 2>&1 || skip "perl not found"
perl -MMaxMind::DB::Writer::Tree -e 1 2>/dev/null ||
    skip "MaxMind::DB::Writer::Tree not installed (libmaxmind-db-writer-perl)"
command -v openssl >/dev/null 2>&1 || skip "openssl CLI not found"

perl "$IT_DIR/mkmmdb.pl" "$T/geo.mmdb" 127.0.0.1/32=DE:3320 \
    127.0.0.2/32=KP:64500 127.0.0.3/32=FR:16276 >"$T/mkmmdb.log" 2>&1 ||
    hard_error "mkmmdb.pl: $(cat "$T/mkmmdb.log")"
sh "$top_srcdir/tests/harness/mkpki.sh" "$T/pki" >"$T/mkpki.log" 2>&1 ||
    hard_error "mkpki.sh: $(cat "$T/mkpki.log")"

# origin (DE) on 127.0.0.1, origin2 (KP) on 127.0.0.2, a TLS origin (DE)
start_origin origin
O1=$ORIGIN_PORT
start_origin tls -C "$T/pki/good.crt" -K "$T/pki/good.key"
OT=$ORIGIN_PORT
"$ORIGIN" -a 127.0.0.2 -p 0 -P "$T/origin2.port" -l "$T/origin2.log" \
    2>"$T/origin2.err" &
track_pid $!
_i=0
while [ ! -s "$T/origin2.port" ]; do
	_i=$((_i + 1))
	[ "$_i" -le 200 ] || hard_error "origin2 did not start: $(cat "$T/origin2.err")"
	sleep 0.05
done
O2=$(cat "$T/origin2.port")
AIRLOCK_PORT=$(free_port)

# one worker: a pooled upstream is certainly offered to the next request
config()
{
	cat <<YAML
listen: {proxy: "127.0.0.1:$AIRLOCK_PORT"}
state_dir: $T/state
workers: 1
audit: {file: $T/audit.jsonl}
geoip:
  database: $1
upstream:
  ca_file: $T/pki/ca.crt
  allow_networks: ["127.0.0.0/8"]
  hosts:
    "de.test": "127.0.0.1"
    "api.test": "127.0.0.1"
    "kp.test": "127.0.0.2"
    "fr.test": "127.0.0.3"
    "unknown.test": "127.0.0.4"
policies:
  - name: open
    rules:
      - {host: "*", ports: [$O1, $O2, $OT]}
  - name: nokp
    rules:
      - {host: "kp.test", ports: [$OT], intercept: false}
      - {host: "*", ports: [$O1, $O2, $OT]}
    geo: {deny_countries: [kp, IR]}
  - name: deonly
    rules:
      - {host: "*", ports: [$O1, $O2, $OT]}
    geo: {allow_countries: [DE]}
sandboxes:
  - {id: n, policy: open, token: "literal:tok-n"}
  - {id: d, policy: nokp, token: "literal:tok-d"}
  - {id: a, policy: deonly, token: "literal:tok-a"}
YAML
}
config geo.mmdb >"$T/airlock.yaml"
"$AIRLOCKD" -t -c "$T/airlock.yaml" >"$T/t0.out" 2>&1 ||
    fail "-t on the good config: $(cat "$T/t0.out")"
ok "-t accepts a MaxMind DB"
start_airlockd "$T/airlock.yaml"
PROXY=http://127.0.0.1:$AIRLOCK_PORT

# get SANDBOX URL [curl args]: CODE, BODY, RID (request id), REC (audit)
get()
{
	_sb=$1
	_u=$2
	shift 2
	CODE=$(curl -sS -g -x "$PROXY" -U "$_sb:tok-$_sb" -D "$T/h" -o "$T/b" \
	    -w '%{http_code}' "$@" "$_u" 2>"$T/curl.err") || true
	BODY=$(cat "$T/b" 2>/dev/null)
	RID=$(sed -n 's/^[Xx]-[Aa]irlock-[Rr]equest-[Ii]d: *\([^ \r]*\).*/\1/p' \
	    "$T/h" | tr -d '\r' | tail -n 1)
	REC=""
	[ -n "$RID" ] && REC=$(audit_wait_id "$RID" 2>/dev/null)
	return 0
}

# audit_is FIELD WANT MSG
audit_is()
{
	_v=$(audit_field "${REC:-"{}"}" "$1")
	[ "$_v" = "$2" ] && return 0
	check_fail "$3: audit $1 is '$_v', want '$2' ($REC)"
	return 1
}

# denied MSG WANT-REGEX: 403 denied whose reason matches (grep -E)
denied()
{
	if [ "$CODE" != 403 ] || [ "$(json_field "$BODY" error)" != denied ]; then
		check_fail "$1: got $CODE $BODY $(cat "$T/curl.err")"
		return 1
	fi
	_r=$(json_field "$BODY" reason)
	if ! echo "$_r" | grep -Eq "$2"; then
		check_fail "$1: reason '$_r' does not match /$2/"
		return 1
	fi
	audit_is decision deny "$1" && audit_is country "" "$1" &&
	    ok "$1"
}

# oreq: X-Origin-Request of the last response (2+ = a reused connection)
oreq()
{
	sed -n 's/^[Xx]-[Oo]rigin-[Rr]equest: *\([0-9]*\).*/\1/p' "$T/h" | tail -n 1
}

origin2_saw()
{
	grep -q "$1" "$T/origin2.log" 2>/dev/null
}

# --- audit: country and asn of the address used
get n "http://de.test:$O1/echo?m=n1"
[ "$CODE" = 200 ] || fail "open policy, de.test: $CODE $BODY"
audit_is upstream "127.0.0.1:$O1" "de.test" && audit_is country DE "de.test" &&
    audit_is asn 3320 "de.test" && ok "audit: country DE, asn 3320"
# the line itself: after "upstream", an integer asn
line=$(grep "\"id\":\"$RID\"" "$T/audit.jsonl")
echo "$line" | grep -q "\"upstream\":\"127.0.0.1:$O1\",\"country\":\"DE\",\"asn\":3320" &&
    ok "audit: \"country\" and \"asn\" follow \"upstream\"" ||
    check_fail "audit line layout: $line"
get n "http://kp.test:$O2/echo?m=n2"
[ "$CODE" = 200 ] || fail "open policy, kp.test: $CODE $BODY"
origin2_saw 'm=n2' || check_fail "origin2 did not see m=n2"
audit_is country KP "kp.test" && audit_is asn 64500 "kp.test" &&
    ok "audit: country KP, asn 64500 (open policy reaches it)"
# pooled: the same upstream again, still audited with its country
get n "http://de.test:$O1/echo?m=n3"
[ "$(oreq)" = 2 ] || check_fail "de.test again: upstream not reused ($(oreq))"
[ "$CODE" = 200 ] && audit_is country DE "pooled de.test" &&
    audit_is asn 3320 "pooled de.test" && ok "audit: pooled upstream keeps country and asn"
# an IP literal is looked up the same way
get n "http://127.0.0.1:$O1/echo?m=n4"
audit_is country DE "IP literal 127.0.0.1" && ok "audit: IP literal looked up"

# --- deny_countries
# kp.test's upstream from sandbox n sits in the pool: not for sandbox d
get d "http://kp.test:$O2/echo?m=d1"
denied "deny_countries: kp.test refused (pooled connection not reused)" \
    'kp\.test resolves to 127\.0\.0\.2 in country KP, denied by policy "nokp" \(geo\.deny_countries\)'
origin2_saw 'm=d1' && check_fail "deny_countries: m=d1 reached the origin"
# ... and it went back to the pool for sandbox n
get n "http://kp.test:$O2/echo?m=n5"
[ "$CODE" = 200 ] && [ "$(oreq)" = 2 ] && audit_is country KP "pooled kp.test" &&
    ok "the refused pooled connection still serves sandbox n" ||
    check_fail "kp.test for n after d's refusal: $CODE, request $(oreq)"
get d "http://127.0.0.2:$O2/echo?m=d2"
denied "deny_countries: IP literal 127.0.0.2 refused" 'in country KP.*geo\.deny_countries'
get d "http://[::ffff:127.0.0.2]:$O2/echo?m=d3"
denied "deny_countries: IPv4-mapped ::ffff:127.0.0.2 refused" 'in country KP.*geo\.deny_countries'
for m in d2 d3; do
	origin2_saw "m=$m" && check_fail "deny_countries: m=$m reached the origin"
done
get d "http://de.test:$O1/echo?m=d4"
[ "$CODE" = 200 ] && audit_is country DE "deny_countries, de.test" &&
    ok "deny_countries: DE allowed"
# unknown country: a deny list alone lets it through (to a closed port)
get d "http://unknown.test:$O1/echo?m=d5"
[ "$CODE" = 502 ] && ok "deny_countries: an unknown country is not denied" ||
    check_fail "deny_countries, unknown.test: $CODE $BODY"

# --- allow_countries
get a "http://de.test:$O1/echo?m=a1"
[ "$CODE" = 200 ] && audit_is country DE "allow_countries, de.test" &&
    ok "allow_countries: DE allowed"
get a "http://kp.test:$O2/echo?m=a2"
denied "allow_countries: KP refused" \
    'kp\.test resolves to 127\.0\.0\.2 in country KP, denied by policy "deonly" \(geo\.allow_countries\)'
origin2_saw 'm=a2' && check_fail "allow_countries: m=a2 reached the origin"
get a "http://fr.test:$O1/echo?m=a3"
denied "allow_countries: FR refused" 'in country FR.*geo\.allow_countries'
get a "http://unknown.test:$O1/echo?m=a4"
denied "allow_countries: an unknown country refused" \
    'unknown\.test resolves to 127\.0\.0\.4 in no known country, denied by policy "deonly" \(geo\.allow_countries\)'

# --- inside intercepted TLS
get n "https://api.test:$OT/echo?m=t1" --cacert "$T/state/ca/n/ca.crt"
[ "$CODE" = 200 ] && audit_is proto https "https" &&
    audit_is country DE "https api.test" && audit_is asn 3320 "https api.test" &&
    ok "https intercept: audit has country and asn"
get a "https://kp.test:$OT/echo?m=t2" --cacert "$T/state/ca/a/ca.crt"
denied "https intercept: allow_countries refuses KP" 'in country KP.*geo\.allow_countries'
get d "https://api.test:$OT/echo?m=t3" --cacert "$T/state/ca/d/ca.crt"
[ "$CODE" = 200 ] && ok "https intercept: DE allowed under deny_countries" ||
    check_fail "https api.test for d: $CODE $BODY"

# spliced: refused after "200 Connection established", so only the audit
# record tells
curl -sS -x "$PROXY" -U d:tok-d -o /dev/null --cacert "$T/pki/ca.crt" \
    "https://kp.test:$OT/echo?m=s1" >/dev/null 2>&1 &&
    check_fail "splice to kp.test for d succeeded"
"$PYTHON" - "$T/audit.jsonl" <<'PY' && ok "splice: deny_countries refuses KP (audit)" ||
import re, sys, itlib
r = itlib.audit_wait(sys.argv[1], lambda a: a.get("host") == "kp.test" and
                     a.get("tls") == "splice", 10)
sys.exit(0 if r is not None and r.get("decision") == "deny" and
         re.search(r"in country KP.*geo\.deny_countries", r.get("reason", ""))
         and "country" not in r else "splice record: %r" % (r,))
PY
    check_fail "splice to kp.test: no deny record naming KP"

# --- a reload to a file that is not an mmdb keeps the running config
echo "not a MaxMind database" >"$T/junk.mmdb"
config junk.mmdb >"$T/airlock.yaml"
kill -HUP "$AIRLOCK_PID"
_i=0
until grep -q 'reload failed' "$T/airlockd.log"; do
	_i=$((_i + 1))
	[ "$_i" -le 100 ] || break
	sleep 0.05
done
grep -q 'geoip database ".*junk.mmdb": not a MaxMind DB' "$T/airlockd.log" &&
    grep -q 'reload failed' "$T/airlockd.log" &&
    ok "reload with a non-mmdb file fails, says why" ||
    check_fail "reload with junk.mmdb: $(tail -n 5 "$T/airlockd.log")"
get d "http://kp.test:$O2/echo?m=r1"
denied "after the failed reload, the old config still denies KP" 'country KP'
get n "http://kp.test:$O2/echo?m=r2"
[ "$CODE" = 200 ] && audit_is country KP "after failed reload" &&
    ok "after the failed reload, audit still has countries"
stop_airlockd

# --- -t and start-up with bad databases
printf 'geoip:\n  database: missing.mmdb\n' >"$T/bad1.yaml"
"$AIRLOCKD" -t -c "$T/bad1.yaml" >"$T/t1.out" 2>&1
st=$?
[ "$st" = 1 ] || check_fail "-t with a missing database: exit $st"
grep -q "^$T/bad1.yaml:2:13: geoip database \"$T/missing.mmdb\": No such file or directory" \
    "$T/t1.out" && ok "-t: missing database at FILE:LINE:COL, exit 1" ||
    check_fail "-t missing database: $(cat "$T/t1.out")"

printf 'geoip:\n  database: junk.mmdb\n' >"$T/bad2.yaml"
"$AIRLOCKD" -t -c "$T/bad2.yaml" >"$T/t2.out" 2>&1
st=$?
[ "$st" = 1 ] || check_fail "-t with a non-mmdb file: exit $st"
grep -q "geoip database \"$T/junk.mmdb\": not a MaxMind DB" "$T/t2.out" &&
    ! grep -q 'configuration OK' "$T/t2.out" &&
    ok "-t: a non-mmdb file is refused, exit 1" ||
    check_fail "-t non-mmdb: $(cat "$T/t2.out")"

AIRLOCK_PORT=$(free_port)
config junk.mmdb >"$T/bad3.yaml"
"$AIRLOCKD" -c "$T/bad3.yaml" >"$T/bad3.out" 2>"$T/bad3.log" &
p=$!
track_pid "$p"
wait_exit "$p" 20
[ "$WAIT_STATUS" -ne 0 ] && [ "$WAIT_STATUS" -ne 124 ] ||
    check_fail "daemon with a non-mmdb file: status $WAIT_STATUS"
grep -q "geoip database \"$T/junk.mmdb\": not a MaxMind DB" "$T/bad3.log" &&
    ok "daemon refuses to start with a non-mmdb file, says why" ||
    check_fail "daemon start with junk.mmdb: $(cat "$T/bad3.log")"
finish
