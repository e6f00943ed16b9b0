#!/bin/sh
# Secrets travel only over verified TLS (issue 14 point 4). A rule allowing
# both a plain and a TLS port of a secret's host: over plain HTTP the
# injected header and a placeholder substitution are refused with 403
# secret_misuse (reason says why, audited, nothing reaches the upstream);
# over TLS they go; towards an upstream whose certificate does not verify
# the secret never hits the wire; a secret with allow_plaintext: true goes
# over plain HTTP as before.
. "$top_srcdir/tests/integration/lib.sh"

command -v openssl >/dev/null 2>&1 || skip "openssl CLI not found"

HOSTS="api.test plain.test"
sh "$top_srcdir/tests/harness/mkpki.sh" "$T/pki" >"$T/mkpki.log" 2>&1 ||
    hard_error "mkpki.sh: $(cat "$T/mkpki.log")"
# shellcheck disable=SC2086
"$PYTHON" -m seclib mkleaf "$T/pki" "$T/pki/multi" $HOSTS >"$T/mkleaf.log" 2>&1 ||
    hard_error "mkleaf: $(cat "$T/mkleaf.log")"
# a certificate no trust store knows
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
    -keyout "$T/self.key" -out "$T/self.crt" -days 2 -subj /CN=api.test \
    -addext subjectAltName=DNS:api.test >"$T/self.log" 2>&1 ||
    hard_error "self-signed: $(cat "$T/self.log")"
start_secup up
UP_PORT=$SECUP_PORT
start_secup ups -C "$T/pki/multi.crt" -K "$T/pki/multi.key"
UPS_PORT=$SECUP_PORT
start_secup bad -C "$T/self.crt" -K "$T/self.key"
BAD_PORT=$SECUP_PORT
AIRLOCK_PORT=$(free_port)

R=$("$PYTHON" -c 'import secrets; print(secrets.token_hex(6))')
SEC_KEY="sk-LEAK-tls-$R"
SEC_PH="ph-LEAK-tls-$R"
SEC_OPEN="op-LEAK-plain-$R"
PH="airlock-ph-tls-$R"
export SEC_KEY SEC_PH SEC_OPEN PH AIRLOCK_PORT UP_PORT UPS_PORT BAD_PORT T

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
  - name: key
    source: env:SEC_KEY
    hosts: ["api.test"]
    inject: {header: Authorization, value: "Bearer \${secret}"}
  - name: ph
    source: env:SEC_PH
    hosts: ["api.test"]
    placeholder: "$PH"
  - name: open
    source: env:SEC_OPEN
    hosts: ["plain.test"]
    allow_plaintext: true
    inject: {header: X-Open, value: "\${secret}"}
policies:
  - name: p
    rules:
      - {host: "api.test", ports: [$UP_PORT, $UPS_PORT, $BAD_PORT], paths: ["/nosec/*"]}
      - {host: "api.test", ports: [$UP_PORT, $UPS_PORT, $BAD_PORT], secrets: [key]}
      - {host: "plain.test", ports: [$UP_PORT], secrets: [open]}
sandboxes:
  - {id: sb, policy: p}
YAML
} >"$T/airlock.yaml"
start_airlockd "$T/airlock.yaml"

"$PYTHON" - <<'PY' || check_fail "plaintext checks"
import json, os
import itlib, seclib
from seclib import Client

E = os.environ
ap = int(E["AIRLOCK_PORT"])
T = E["T"]
CA = T + "/state/ca/sb/ca.crt"
audit = T + "/audit.jsonl"
t = itlib.Checks()
KEY, PHV, OPEN, PH = E["SEC_KEY"], E["SEC_PH"], E["SEC_OPEN"], E["PH"]
up = seclib.Upstream(T + "/up.jsonl")
ups = seclib.Upstream(T + "/ups.jsonl")
bad = seclib.Upstream(T + "/bad.jsonl")
VALUES = [v.encode() for v in (KEY, PHV)]


def audit_of(r):
    rid = r.header("X-Airlock-Request-Id") if r is not None else None
    if not rid:
        return None
    return itlib.audit_wait(audit, lambda a: a.get("id") == rid, 10)


# plain HTTP to the secret's host: the injected header is refused
for what, path, hdrs, name in (
        ("injected header", "/v1/x", [], "key"),
        ("placeholder substitution", "/nosec/x", ["X-Key: " + PH], "ph")):
    c = Client(ap, "http", "api.test", int(E["UP_PORT"]))
    n0 = up.count()
    r = c.request("GET", path, ["X-Mark: plain-" + name] + hdrs)
    if t.error(r, 403, "secret_misuse", "plain HTTP, %s: 403 secret_misuse"
               % what):
        reason = r.json().get("reason", "")
        t.ok(name in reason and "verified TLS" in reason and
             "allow_plaintext" in reason,
             "plain HTTP, %s: the reason names the secret and says why"
             % what, reason)
    t.ok(up.count() == n0 and not any(v in up.raw_bytes() for v in VALUES),
         "plain HTTP, %s: nothing reached the upstream" % what)
    a = audit_of(r)
    t.ok(a is not None and a.get("decision") == "deny" and
         a.get("status") == 403, "plain HTTP, %s: audited as a denial" % what,
         repr(a))
    c.close()

# the same over TLS: the secret goes
c = Client(ap, "https", "api.test", int(E["UPS_PORT"]), CA)
r = c.request("GET", "/v1/x", ["X-Mark: tls-key"])
rec = ups.one("tls-key")
t.ok(r.status == 200 and rec is not None and
     rec.header("Authorization") == "Bearer " + KEY,
     "TLS: the secret is injected", repr(r))
r = c.request("GET", "/nosec/x", ["X-Mark: tls-ph", "X-Key: " + PH])
rec = ups.one("tls-ph")
t.ok(r.status == 200 and rec is not None and rec.header("X-Key") == PHV,
     "TLS: the placeholder is substituted", repr(r))
c.close()

# TLS whose certificate does not verify: refused before any byte of the
# request, the secret never on the wire
try:
    c = Client(ap, "https", "api.test", int(E["BAD_PORT"]), CA)
    r = c.request("GET", "/v1/x", ["X-Mark: bad-key"])
    t.error(r, 502, "upstream_tls_failed",
            "unverified upstream certificate: 502 upstream_tls_failed")
    c.close()
except (itlib.Closed, OSError) as e:
    t.ok(False, "unverified upstream: an answer", repr(e))
t.ok(not any(v in bad.raw_bytes() for v in VALUES),
     "unverified upstream: the secret never reached it")

# a TLS session towards a plain port: the handshake fails, nothing leaks
try:
    c = Client(ap, "https", "api.test", int(E["UP_PORT"]), CA)
    r = c.request("GET", "/v1/x", ["X-Mark: tls-to-plain"])
    t.ok(r.status in (502, 504), "TLS towards a plain port: refused",
         repr(r))
    c.close()
except (itlib.Closed, OSError):
    pass
t.ok(not any(v in up.raw_bytes() for v in VALUES),
     "TLS towards a plain port: the secret never reached it")

# allow_plaintext: true keeps plain HTTP working for that secret
c = Client(ap, "http", "plain.test", int(E["UP_PORT"]))
r = c.request("GET", "/x", ["X-Mark: open"])
rec = up.one("open")
t.ok(r.status == 200 and rec is not None and rec.header("X-Open") == OPEN,
     "allow_plaintext: true: injected over plain HTTP", repr(r))
c.close()
t.done()
PY

stop_airlockd
finish
