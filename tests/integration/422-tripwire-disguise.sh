#!/bin/sh
# The placeholder tripwire sees what an agent disguises (issue 14 point
# 11). Towards a host the secret is not bound to, its placeholder is found
# in any letter case, percent-encoded once or twice (every byte encoded),
# inside the base64 of Basic credentials, split across two headers, and
# JSON-"\u"-escaped in a streamed body (Content-Length and chunked, cut at
# many offsets): 403 secret_misuse each time, audited; head disguises reach
# nothing upstream. Towards the bound host, a placeholder inside Basic
# credentials is substituted (decoded, replaced, encoded again).
. "$top_srcdir/tests/integration/lib.sh"

command -v openssl >/dev/null 2>&1 || skip "openssl CLI not found"

HOSTS="api.test other.test"
sh "$top_srcdir/tests/harness/mkpki.sh" "$T/pki" >"$T/mkpki.log" 2>&1 ||
    hard_error "mkpki.sh: $(cat "$T/mkpki.log")"
# shellcheck disable=SC2086
"$PYTHON" -m seclib mkleaf "$T/pki" "$T/pki/multi" $HOSTS >"$T/mkleaf.log" 2>&1 ||
    hard_error "mkleaf: $(cat "$T/mkleaf.log")"
start_secup ups -C "$T/pki/multi.crt" -K "$T/pki/multi.key"
UPS_PORT=$SECUP_PORT
AIRLOCK_PORT=$(free_port)

R=$("$PYTHON" -c 'import secrets; print(secrets.token_hex(6))')
SEC_PH="ph-LEAK-trip-$R"
PH="airlock:trip:$R"
export SEC_PH PH AIRLOCK_PORT UPS_PORT T

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
  - name: trip
    source: env:SEC_PH
    hosts: ["api.test"]
    placeholder: "$PH"
policies:
  - name: p
    rules:
      - {host: "*", ports: [$UPS_PORT]}
sandboxes:
  - {id: sb, policy: p}
YAML
} >"$T/airlock.yaml"
start_airlockd "$T/airlock.yaml"

"$PYTHON" - <<'PY' || check_fail "tripwire checks"
import base64, json, os
import itlib, seclib
from seclib import Client

E = os.environ
ap = int(E["AIRLOCK_PORT"])
port = int(E["UPS_PORT"])
T = E["T"]
CA = T + "/state/ca/sb/ca.crt"
audit = T + "/audit.jsonl"
t = itlib.Checks()
PHV, PH = E["SEC_PH"], E["PH"]
ups = seclib.Upstream(T + "/ups.jsonl")


def every_byte(s):
    return "".join("%%%02X" % ord(ch) for ch in s)


def ju(s):
    return "".join("\\u%04x" % ord(ch) for ch in s)


def audit_of(r):
    rid = r.header("X-Airlock-Request-Id") if r is not None else None
    if not rid:
        return None
    return itlib.audit_wait(audit, lambda a: a.get("id") == rid, 10)


half = len(PH) // 2
HEAD = [
    ("upper case", "/x", ["X-Key: " + PH.upper()]),
    ("mixed case", "/x", ["X-Key: " + "".join(
        ch.upper() if i % 2 else ch for i, ch in enumerate(PH))]),
    ("every byte percent-encoded in the query", "/x?k=" + every_byte(PH),
     []),
    ("percent-encoded twice in the query", "/x?k=" +
     every_byte(every_byte(PH)), []),
    ("percent-encoded twice in the path", "/v/" +
     every_byte(every_byte(PH)) + "/y", []),
    ("inside Basic credentials", "/x", ["Authorization: Basic " +
     base64.b64encode(("bob:" + PH).encode()).decode()]),
    ("inside Basic credentials, url-safe, unpadded", "/x",
     ["Authorization: Basic " + base64.urlsafe_b64encode(
         (PH + "::").encode()).decode().rstrip("=")]),
    ("split across two headers", "/x", ["X-Key-1: " + PH[:half],
                                        "X-Key-2: " + PH[half:]]),
    ("JSON-escaped in a header", "/x", ["X-Json: {\"k\":\"%s\"}" % ju(PH)]),
]
for what, path, hdrs in HEAD:
    c = Client(ap, "https", "other.test", port, CA)
    n0 = ups.count()
    try:
        r = c.request("GET", path, ["X-Mark: head"] + hdrs)
    except (itlib.Closed, OSError) as e:
        r = None
        t.ok(False, what + ": an answer", repr(e))
    if t.error(r, 403, "secret_misuse", what + ": 403 secret_misuse"):
        t.ok("trip" in r.json().get("reason", ""),
             what + ": the reason names the secret", r.json())
    t.ok(ups.count() == n0, what + ": nothing reached the upstream")
    a = audit_of(r)
    t.ok(a is not None and a.get("decision") == "deny", what + ": audited",
         repr(a))
    c.close()

BODIES = [
    ("JSON-\\u-escaped body", ('{"prompt":"use %s please"}' % ju(PH))
     .encode()),
    ("JSON-\\u-escaped body, upper hex", ('{"k":"%s"}' % ju(PH).upper()
                                          .replace("\\U", "\\u")).encode()),
    ("upper-case body", ("key=" + PH.upper()).encode()),
    ("percent-encoded body", ("key=" + every_byte(PH)).encode()),
]
for what, body in BODIES:
    for framing in ("length", "chunked"):
        for cut in (1, 3, 7, 64):
            S = "%s (%s, pieces of %d): " % (what, framing, cut)
            c = Client(ap, "https", "other.test", port, CA)
            try:
                if framing == "length":
                    r = c.request("POST", "/b", ["X-Mark: body"], body)
                else:
                    chunks = [body[i:i + cut]
                              for i in range(0, len(body), cut)]
                    r = c.request("POST", "/b", ["X-Mark: body"],
                                  chunks=chunks)
            except (itlib.Closed, OSError) as e:
                r = None
                t.ok(False, S + "an answer", repr(e))
            t.error(r, 403, "secret_misuse", S + "403 secret_misuse")
            a = audit_of(r)
            t.ok(a is not None and a.get("status") == 403, S + "audited",
                 repr(a))
            c.close()
            if framing == "length":
                break
# a clean body still goes
c = Client(ap, "https", "other.test", port, CA)
r = c.request("POST", "/b", ["X-Mark: clean"], b'{"prompt":"airlock:tri"}')
t.ok(r.status == 200 and ups.one("clean") is not None,
     "a body without the placeholder is relayed", repr(r))
c.close()

# bound host: a placeholder inside Basic credentials is substituted
c = Client(ap, "https", "api.test", port, CA)
r = c.request("GET", "/x", ["X-Mark: basic", "Authorization: Basic " +
                            base64.b64encode(("bob:" + PH).encode())
                            .decode()])
rec = ups.one("basic")
t.ok(r.status == 200 and rec is not None and
     rec.header("Authorization") == "Basic " +
     base64.b64encode(("bob:" + PHV).encode()).decode(),
     "bound host: placeholder in Basic credentials substituted",
     rec.header("Authorization") if rec else repr(r))
c.close()
t.done()
PY

stop_airlockd
finish
