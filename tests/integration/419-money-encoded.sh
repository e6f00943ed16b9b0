#!/bin/sh
# Two answers users read (issue 15 point 7): "airlockctl usage" prints
# money as exact decimals from integer micro-dollars (0.041490, not
# 0.041489999999999999), in tables and --json, for spend and caps; and a
# secret-bearing request whose upstream answers with an encoded body
# (Content-Encoding other than identity, which the reflection guard cannot
# scan) gets 502 with its own code upstream_encoded_body, audited, with no
# byte of that body relayed.
. "$top_srcdir/tests/integration/lib.sh"

command -v openssl >/dev/null 2>&1 || skip "openssl CLI not found"
sh "$top_srcdir/tests/harness/mkpki.sh" "$T/pki" >"$T/mkpki.log" 2>&1 ||
    hard_error "mkpki.sh: $(cat "$T/mkpki.log")"
CTL=$top_builddir/src/airlockctl

# the mock LLM provider (plain HTTP) for a priced request
start_py_upstream llm llm_upstream.py -l "$T/llm.jsonl"
LLM_PORT=$PY_PORT
# an HTTPS upstream that gzips whatever it is asked, and one that says
# identity
cat >"$T/gz_upstream.py" <<'PY'
import gzip, os, socket, ssl, sys, threading
pki, portfile = sys.argv[1], sys.argv[2]
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(pki + "/good.crt", pki + "/good.key")
srv = socket.socket()
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("127.0.0.1", 0))
srv.listen(16)
with open(portfile + ".tmp", "w") as f:
    f.write("%d\n" % srv.getsockname()[1])
os.rename(portfile + ".tmp", portfile)
def serve(c):
    try:
        c = ctx.wrap_socket(c, server_side=True)
        data = b""
        while b"\r\n\r\n" not in data:
            d = c.recv(4096)
            if not d:
                return
            data += d
        head = data.split(b"\r\n\r\n")[0].decode("latin-1")
        path = head.split(" ")[1]
        auth = [l for l in head.split("\r\n") if l.lower().startswith("authorization:")]
        body = ("seen " + (auth[0] if auth else "none")).encode()
        if path.startswith("/gzip"):
            body, enc = gzip.compress(body, mtime=0), "gzip"
        elif path.startswith("/br"):
            enc = "br"
        else:
            enc = "identity"
        c.sendall(b"HTTP/1.1 200 OK\r\nContent-Encoding: %s\r\n"
                  b"Content-Length: %d\r\nConnection: close\r\n\r\n"
                  % (enc.encode(), len(body)) + body)
    except Exception:
        pass
    finally:
        c.close()
while True:
    c, _ = srv.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
PY
"$PYTHON" "$T/gz_upstream.py" "$T/pki" "$T/gz.port" 2>"$T/gz.err" &
track_pid $!
i=0
while [ ! -s "$T/gz.port" ]; do
	i=$((i + 1)); [ $i -le 200 ] || hard_error "gz upstream: $(cat "$T/gz.err")"
	sleep 0.05
done
GZ_PORT=$(cat "$T/gz.port")

AIRLOCK_PORT=$(free_port)
export AIRLOCK_PORT
{
	config_common "$AIRLOCK_PORT"
	cat <<YAML
upstream:
  ca_file: $T/pki/ca.crt
  allow_networks: ["127.0.0.1/32"]
  hosts: {"api.test": "127.0.0.1", "llm.test": "127.0.0.1"}
secrets:
  - name: k
    source: "literal:real-secret-value-42"
    hosts: ["api.test"]
    inject: {header: Authorization, value: "Bearer \${secret}"}
pricing:
  - {model: "m*", input: 41.49, output: 0}
policies:
  - name: p
    rules:
      - {host: "llm.test", ports: [$LLM_PORT], meter: openai}
      - {host: "api.test", ports: [$GZ_PORT], secrets: [k]}
    caps: {usd: 5.04149}
sandboxes:
  - {id: s, policy: p, token: "literal:s-token-1"}
YAML
} >"$T/airlock.yaml"
start_airlockd "$T/airlock.yaml"
wait_admin
PROXY=http://s:s-token-1@127.0.0.1:$AIRLOCK_PORT

# --- a priced request: 1000 prompt tokens at 41.49/M = 0.04149 USD
code=$(curl -sS -o "$T/llm.out" -w '%{http_code}' -x "$PROXY" \
    -H 'Content-Type: application/json' -H 'X-Synth: openai' \
    -H 'X-Synth-Usage: 1000,0' \
    -d '{"model":"m1","max_tokens":1,"messages":[{"role":"user","content":"hi"}]}' \
    "http://llm.test:$LLM_PORT/v1/chat/completions")
[ "$code" = 200 ] || fail "priced request: $code $(cat "$T/llm.out")"
i=0
until "$CTL" -c "$T/airlock.yaml" --json usage s >"$T/u.json" 2>"$T/u.err" &&
    grep -q '"spend_microusd": *41490' "$T/u.json"; do
	i=$((i + 1)); [ $i -le 50 ] || fail "spend never reached 41490 µUSD: $(cat "$T/u.json" "$T/u.err")"
	sleep 0.1
done
"$CTL" -c "$T/airlock.yaml" usage s >"$T/u.txt" 2>"$T/u.err" ||
    fail "airlockctl usage: $(cat "$T/u.err")"
grep -Eq '^spend_usd +0\.041490$' "$T/u.txt" &&
    ok "usage table: spend_usd 0.041490" ||
    check_fail "usage table spend_usd: $(grep spend_usd "$T/u.txt")"
grep -Eq '^caps\.usd +5\.041490$' "$T/u.txt" &&
    ok "usage table: caps.usd 5.041490" ||
    check_fail "usage table caps.usd: $(grep 'caps.usd' "$T/u.txt")"
grep -Eq '"spend_usd": *0\.041490[,}]?$' "$T/u.json" &&
    grep -Eq '"usd": *5\.041490[,}]?$' "$T/u.json" &&
    ok "usage --json: exact decimals" ||
    check_fail "usage --json: $(grep usd "$T/u.json")"
grep -q '999999' "$T/u.txt" "$T/u.json" &&
    check_fail "a float artefact in usage output: $(grep 9999 "$T/u.txt" "$T/u.json")"
# the admin API itself, as a program parses it
"$PYTHON" - "$T/state/admin.sock" "$T/state/admin.token" <<'PY' || check_fail "admin API money"
import json, socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
tok = open(sys.argv[2]).read().strip()
s.sendall(("GET /v1/sandboxes/s/usage HTTP/1.1\r\nHost: x\r\n"
           "Authorization: Bearer %s\r\nConnection: close\r\n\r\n" % tok).encode())
data = b""
while True:
    d = s.recv(65536)
    if not d:
        break
    data += d
body = data.split(b"\r\n\r\n", 1)[1]
assert b'"spend_usd":0.041490' in body.replace(b" ", b""), body
assert b'"usd":5.041490' in body.replace(b" ", b""), body
j = json.loads(body)
assert j["spend_usd"] == 0.04149 and j["spend_microusd"] == 41490, j
print("ok - admin API: spend_usd and caps.usd written exactly, parse as numbers")
PY

# --- encoded answers to a request that carried a secret
for enc in gzip br; do
	code=$(curl -sS -o "$T/e.out" -D "$T/e.h" -w '%{http_code}' -x "$PROXY" \
	    --cacert "$T/state/ca/s/ca.crt" "https://api.test:$GZ_PORT/$enc")
	rid=$(tr -d '\r' <"$T/e.h" | awk -F': ' 'tolower($1)=="x-airlock-request-id" {print $2}' | tail -n 1)
	rec=$(audit_wait_id "$rid" 2>/dev/null)
	if [ "$code" = 502 ] && grep -q '"error":"upstream_encoded_body"' "$T/e.out" &&
	    [ "$(audit_field "$rec" status)" = 502 ] &&
	    echo "$rec" | grep -q 'encoded body' &&
	    ! grep -q 'real-secret-value' "$T/e.out"; then
		ok "Content-Encoding: $enc to a secret-bearing request: 502 upstream_encoded_body, audited"
	else
		check_fail "Content-Encoding: $enc: $code $(cat "$T/e.out") audit: $rec"
	fi
done
# identity is scanned and relayed (redacted)
code=$(curl -sS -o "$T/i.out" -w '%{http_code}' -x "$PROXY" \
    --cacert "$T/state/ca/s/ca.crt" "https://api.test:$GZ_PORT/plain")
[ "$code" = 200 ] && grep -q '^seen ' "$T/i.out" && ! grep -q 'real-secret-value' "$T/i.out" &&
    ok "Content-Encoding: identity: relayed, the secret redacted" ||
    check_fail "identity answer: $code $(cat "$T/i.out")"
stop_airlockd
finish
