#!/bin/sh
# A body placeholder over plain HTTP (issue 20.1 with 14.4's rule, as
# 421-secrets-plaintext.sh holds it for headers): a secret with
# placeholder_in: [header, body] and no allow_plaintext has its placeholder
# in a body towards its own host over http:// refused with 403
# secret_misuse, audited "deny", no byte of the body upstream, as its
# placeholder in a header is (the body streams: its head may have gone); the same body over TLS is replaced; with
# allow_plaintext: true the body over http:// is replaced.
. "$top_srcdir/tests/integration/lib.sh"

command -v openssl >/dev/null 2>&1 || skip "openssl CLI not found"

HOSTS="api.test open.test"
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
PH="airlock:bodytls:$R"
PH_O="airlock:bodyopen:$R"
printf 'bt-LEAK-%s' "$R" >"$T/bt.val"
printf 'bo-LEAK-%s' "$R" >"$T/bo.val"
chmod 600 "$T/bt.val" "$T/bo.val"
export PH PH_O AIRLOCK_PORT UP_PORT UPS_PORT T
{
	config_common "$AIRLOCK_PORT" sb
	cat <<YAML
upstream:
  ca_file: $T/pki/ca.crt
  allow_networks: ["127.0.0.1/32"]
  hosts: {"api.test": "127.0.0.1", "open.test": "127.0.0.1"}
secrets:
  - name: bt
    source: file:$T/bt.val
    hosts: ["api.test"]
    placeholder: "$PH"
    placeholder_in: [header, body]
  - name: bo
    source: file:$T/bo.val
    hosts: ["open.test"]
    placeholder: "$PH_O"
    placeholder_in: [body]
    allow_plaintext: true
policies:
  - name: p
    rules:
      - {host: "*", ports: [$UP_PORT, $UPS_PORT]}
sandboxes:
  - {id: sb, policy: p}
YAML
} >"$T/airlock.yaml"
start_airlockd "$T/airlock.yaml"

"$PYTHON" - <<'PY' || check_fail "plaintext body checks"
import os
import itlib, seclib
from seclib import Client

E = os.environ
ap, up, ups, T = int(E["AIRLOCK_PORT"]), int(E["UP_PORT"]), \
    int(E["UPS_PORT"]), E["T"]
PH, PH_O = E["PH"], E["PH_O"]
CA = T + "/state/ca/sb/ca.crt"
t = itlib.Checks()
plain = seclib.Upstream(T + "/up.jsonl")
tls = seclib.Upstream(T + "/ups.jsonl")


def audit_of(r):
    rid = r.header("X-Airlock-Request-Id") if r is not None else None
    return itlib.audit_wait(T + "/audit.jsonl",
                            lambda a: a.get("id") == rid, 10) if rid else None


body = ("token=" + PH).encode()
for name, hdrs, data in (("body", ["X-Mark: pb"], body),
                         ("header", ["X-Mark: ph", "X-Key: " + PH], b"")):
    c = Client(ap, "http", "api.test", up)
    r = c.request("POST", "/p", hdrs, data)
    t.error(r, 403, "secret_misuse", "plain http, placeholder in the %s: "
            "403 secret_misuse" % name)
    a = audit_of(r)
    t.ok(a is not None and a.get("decision") == "deny",
         "plain http, placeholder in the %s: audited deny" % name, a)
    c.close()
# the body is scanned as it streams: at most the head went (as 571 holds
# for a body towards another host), never a byte of the body
recs = plain.by_mark("pb", 0.5)
t.ok(all(x.partial and x.body == b"" for x in recs),
     "plain http, placeholder in the body: no body byte upstream", repr(recs))
t.ok(plain.by_mark("ph", 0.1) == [],
     "plain http, placeholder in the header: nothing upstream")

c = Client(ap, "https", "api.test", ups, CA)
r = c.request("POST", "/p", ["X-Mark: tb"], body)
rec = tls.one("tb")
t.ok(r is not None and r.status == 200 and rec is not None and
     rec.body == ("token=" + open(T + "/bt.val").read()).encode(),
     "over TLS the body placeholder is replaced", repr(rec))
c.close()

c = Client(ap, "http", "open.test", up)
r = c.request("POST", "/p", ["X-Mark: ob"], ("k=" + PH_O).encode())
rec = plain.one("ob")
t.ok(r is not None and r.status == 200 and rec is not None and
     rec.body == ("k=" + open(T + "/bo.val").read()).encode(),
     "allow_plaintext: the body placeholder is replaced over http://",
     repr(rec))
c.close()
t.done()
PY
finish
