#!/bin/sh
# Secrets: a placeholder the sandbox sends in a header value, in the path or
# in the query is replaced by the real value towards a host the secret is
# bound to, whichever rule matched (plain HTTP and intercepted HTTPS). The
# same placeholder towards any other host is 403 secret_misuse: nothing
# forwarded, audited as a denial naming the secret, never its value.
. "$top_srcdir/tests/integration/lib.sh"

command -v openssl >/dev/null 2>&1 || skip "openssl CLI not found"


HOSTS="api.test other.test sub.api.test"
sh "$top_srcdir/tests/harness/mkpki.sh" "$T/pki" >"$T/mkpki.log" 2>&1 ||
    hard_error "mkpki.sh: $(cat "$T/mkpki.log")"
# shellcheck disable=SC2086
"$PYTHON" -m seclib mkleaf "$T/pki" "$T/pki/multi" $HOSTS >"$T/mkleaf.log" 2>&1 ||
    hard_error "mkleaf: $(cat "$T/mkleaf.log")"
start_secup up
UP_PORT=$SECUP_PORT
start_secup ups -C "$T/pki/multi.crt" -K "$T/pki/multi.key"
UPS_PORT=$SECUP_PORT
AIRLOCK_PORT=$(free_port)

R=$("$PYTHON" -c 'import secrets; print(secrets.token_hex(6))')
PH_A="airlock-ph-alpha-$R"
VAL_A="sk-LEAK-alpha-$R"
PH_B="airlock:beta:$R"
VAL_B="sk-LEAK-beta-$R"
export PH_A VAL_A PH_B VAL_B AIRLOCK_PORT UP_PORT UPS_PORT T

{
	config_common "$AIRLOCK_PORT" sb
	cat <<YAML
upstream:
  ca_file: $T/pki/ca.crt
  allow_networks: ["127.0.0.1/32"]
  hosts:
YAML
	for h in $HOSTS; do
		echo "    \"$h\": \"127.0.0.1\""
	done
	cat <<YAML
secrets:
  - name: alpha
    source: env:VAL_A
    hosts: ["api.test"]
    allow_plaintext: true   # also checked over plain HTTP
    placeholder: "$PH_A"
    sandbox_env: ALPHA_KEY
  - name: beta
    source: env:VAL_B
    hosts: ["api.test"]
    allow_plaintext: true   # also checked over plain HTTP
    inject: {header: X-Beta, value: "\${secret}"}
    placeholder: "$PH_B"
policies:
  - name: p
    rules:
      - {host: "api.test", ports: [$UP_PORT, $UPS_PORT], paths: ["/nosec/*"]}
      - {host: "api.test", ports: [$UP_PORT, $UPS_PORT], secrets: [beta]}
      - {host: "*", ports: [$UP_PORT, $UPS_PORT]}
sandboxes:
  - {id: sb, policy: p}
YAML
} >"$T/airlock.yaml"
start_airlockd "$T/airlock.yaml"

"$PYTHON" - <<'PY' || check_fail "placeholder checks"
import json, os, urllib.parse
import itlib, seclib
from seclib import Client

E = os.environ
ap = int(E["AIRLOCK_PORT"])
T = E["T"]
CA = T + "/state/ca/sb/ca.crt"
audit = T + "/audit.jsonl"
t = itlib.Checks()
PH_A, VAL_A, PH_B, VAL_B = E["PH_A"], E["VAL_A"], E["PH_B"], E["VAL_B"]
PH_B_ENC = urllib.parse.quote(PH_B, safe="")       # airlock%3Abeta%3A...
VALUES = seclib.encodings(VAL_A) + seclib.encodings(VAL_B)

def audit_of(r):
    rid = r.header("X-Airlock-Request-Id") if r is not None else None
    if not rid:
        return None
    return itlib.audit_wait(audit, lambda a: a.get("id") == rid, 10)

for scheme in ("http", "https"):
    port = int(E["UPS_PORT"] if scheme == "https" else E["UP_PORT"])
    up = seclib.Upstream(T + ("/ups.jsonl" if scheme == "https"
                              else "/up.jsonl"))
    S = scheme + ": "
    n = [0]

    def mark():
        n[0] += 1
        return "%s-%d" % (scheme, n[0])

    # --- bound host: replaced in headers, path, query (rule with and
    # without secrets alike)
    c = Client(ap, scheme, "api.test", port, CA)
    for base in ("/nosec", "/v1"):
        what = S + "%s: " % base
        m = mark()
        r = c.request("GET", "%s/%s/items?key=%s&x=%s-tail&b=%s" % (
            base, PH_A, PH_A, PH_A, PH_B), [
            "X-Mark: " + m, "Authorization: Bearer " + PH_A,
            "X-Two: a=%s;b=%s" % (PH_A, PH_B), "Cookie: s=%s" % PH_A])
        rec = up.one(m)
        if not t.ok(r.status == 200 and rec is not None,
                    what + "request with placeholders reached the upstream",
                    repr(r)):
            continue
        t.ok(rec.header_all("Authorization") == ["Bearer " + VAL_A],
             what + "placeholder in Authorization replaced",
             rec.header_all("Authorization"))
        t.ok(rec.header_all("X-Two") == ["a=%s;b=%s" % (VAL_A, VAL_B)],
             what + "two placeholders in one header value replaced",
             rec.header_all("X-Two"))
        t.ok(rec.header_all("Cookie") == ["s=" + VAL_A],
             what + "placeholder in Cookie replaced", rec.header_all("Cookie"))
        t.ok(rec.path == "%s/%s/items" % (base, VAL_A),
             what + "placeholder in the path replaced", rec.path)
        t.ok(rec.params() == [("key", VAL_A), ("x", VAL_A + "-tail"),
                              ("b", VAL_B)],
             what + "placeholders in the query replaced", rec.query)
        t.ok(PH_A.encode() not in rec.raw and PH_B.encode() not in rec.raw,
             what + "no placeholder left upstream", repr(rec))
        a = audit_of(r)
        # beta: by its placeholder under /nosec, injected too under /v1
        want = ["alpha", "beta"]
        t.ok(a is not None and sorted(a.get("secrets") or []) == want,
             what + "audit secrets = %s" % want, repr(a))
        t.ok(a is not None and a.get("decision") == "allow" and not any(
            v in json.dumps(a).encode() for v in VALUES),
             what + "audit: allow, no value", repr(a))
    # the placeholder percent-encoded in the query (a client encoding
    # "airlock:beta:..." as a parameter value) is replaced too
    m = mark()
    r = c.request("GET", "/nosec/enc?key=%s&z=1" % PH_B_ENC, ["X-Mark: " + m])
    rec = up.one(m)
    if t.ok(r.status == 200 and rec is not None,
            S + "percent-encoded placeholder: reached the upstream", repr(r)):
        t.ok(PH_B_ENC.encode() not in rec.raw and PH_B.encode() not in
             rec.raw, S + "percent-encoded placeholder in the query is "
             "replaced (not sent as is)", rec.target)
        vals = [v for k, v in rec.params() if k == "key"]
        t.ok(len(vals) == 1 and urllib.parse.unquote(vals[0]) == VAL_B,
             S + "percent-encoded placeholder: key carries the value",
             rec.target)
    c.close()

    # --- unbound hosts: 403 secret_misuse, nothing forwarded
    for host in ("other.test", "sub.api.test"):
        c = Client(ap, scheme, host, port, CA)
        for where, path, hdrs, name in (
                ("header", "/x", ["Authorization: Bearer " + PH_A], "alpha"),
                ("header mid-value", "/x", ["X-Note: see %s here" % PH_B],
                 "beta"),
                ("path", "/v1/%s/x" % PH_A, [], "alpha"),
                ("query", "/x?k=1&key=%s" % PH_A, [], "alpha"),
                ("percent-encoded query", "/x?key=%s" % PH_B_ENC, [],
                 "beta"),
                ("percent-encoded query, lowercase hex",
                 "/x?key=%s" % PH_B_ENC.replace("%3A", "%3a"), [], "beta"),
                ("percent-encoded path", "/v1/%s/x" % PH_B_ENC, [],
                 "beta")):
            what = S + "%s, placeholder in %s: " % (host, where)
            m = mark()
            n0 = up.count()
            r = c.request("GET", path, ["X-Mark: " + m] + hdrs)
            if t.error(r, 403, "secret_misuse", what + "403 secret_misuse"):
                reason = r.json().get("reason", "")
                t.ok(name in reason and not any(
                    v in r.body for v in VALUES),
                    what + "reason names %s, no value" % name, reason)
            t.ok(not any(v in r.raw_head for v in VALUES),
                 what + "no value in the answer's head")
            t.ok(up.count() == n0 and not up.by_mark(m),
                 what + "nothing reached the upstream")
            a = audit_of(r)
            if t.ok(a is not None, what + "audited"):
                t.ok(a.get("decision") == "deny" and a.get("status") == 403
                     and name in (a.get("reason") or ""),
                     what + "audit: deny, 403, reason names the secret",
                     repr(a))
                line = json.dumps(a).encode()
                t.ok(not any(v in line for v in VALUES),
                     what + "audit: no value", repr(a))
            # the connection goes on: a clean request still works
            m = mark()
            try:
                r = c.request("GET", "/clean", ["X-Mark: " + m])
                ok = r.status == 200 and up.one(m) is not None
            except (itlib.Closed, OSError) as e:
                ok, r = False, e
                c.close()
                c = Client(ap, scheme, host, port, CA)
            t.ok(ok, what + "a clean request on the same connection after "
                 "the refusal", repr(r))
        c.close()
    # nothing the upstream received for unbound hosts holds a value
    for rec in up.records():
        h = (rec.header_all("Host") or [""])[0].split(":")[0]
        if h != "api.test":
            t.ok(not any(v in rec.raw for v in VALUES) and
                 PH_A.encode() not in rec.raw and
                 PH_B.encode() not in rec.raw,
                 S + "request %d to %s: no value, no placeholder"
                 % (rec.seq, h), repr(rec))
t.done()
PY

for v in "$VAL_A" "$VAL_B"; do
	for f in "$T/airlockd.log" "$T/airlockd.out" "$T/audit.jsonl"; do
		grep -qF -e "$v" "$f" && check_fail "$(basename "$f") holds a secret value"
	done
done
grep -q '"secret_misuse"\|secret_misuse\|alpha' "$T/audit.jsonl" ||
    check_fail "audit has no misuse record"
stop_airlockd
finish
