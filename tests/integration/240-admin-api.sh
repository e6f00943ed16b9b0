#!/bin/sh
# Admin API (SPEC "Admin API"): unix socket 0600 and a loopback TCP
# listener, bearer token (created 0600), sandbox create/list/show/delete
# with CA and token, deletion revokes at once (token refused, open
# connections closed), persistence across restarts, usage and reset,
# reload through the API with FILE:LINE:COL errors, 4xx JSON errors.
. "$top_srcdir/tests/integration/lib.sh"

start_origin
AIRLOCK_PORT=$(free_port)
ADMIN_PORT=$(free_port)
export AIRLOCK_PORT ORIGIN_PORT T ADMIN_PORT

write_config()
{
	{
		config_common "$AIRLOCK_PORT"
		cat <<YAML
upstream:
  allow_networks: ["127.0.0.1/32"]
  hosts: {"api.test": "127.0.0.1", "other.test": "127.0.0.1"}
policies:
  - name: default
    rules:
      - {host: "api.test", ports: [$ORIGIN_PORT]}
  - name: p2
    rules:
      - {host: "$1", ports: [$ORIGIN_PORT]}
    caps: {requests: 1000, window: 24h}
sandboxes:
  - {id: static1, policy: default, token: "literal:static-token-1"}
YAML
	} >"$T/airlock.yaml"
}
write_config other.test
start_airlockd "$T/airlock.yaml"
SOCK=$T/state/admin.sock
export SOCK

# the socket and the token file are the operator's alone
[ -S "$SOCK" ] || fail "no admin socket at $SOCK"
[ "$(stat -c %a "$SOCK")" = 600 ] || fail "admin socket mode $(stat -c %a "$SOCK")"
[ "$(stat -c %a "$T/state/admin.token")" = 600 ] ||
    fail "admin.token mode $(stat -c %a "$T/state/admin.token")"
ok "admin socket and token file are 0600"

"$PYTHON" - <<'PY' || fail "admin API checks"
import json, os, socket, subprocess, time
import adminlib as A

T = os.environ["T"]
addr = "unix:" + os.environ["SOCK"]
tok = A.token(T + "/state")
port = os.environ["AIRLOCK_PORT"]
oport = os.environ["ORIGIN_PORT"]

def curl(proxy_url, host="api.test"):
    r = subprocess.run(["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}",
                        "-x", proxy_url, "http://%s:%s/echo" % (host, oport)],
                       capture_output=True, text=True, timeout=20)
    return r.stdout

# /healthz needs no token; everything else does
st, h, b = A.call(addr, "GET", "/healthz")
assert st == 200 and b == {"status": "ok"}, (st, b)
for path in ("/v1/sandboxes", "/metrics", "/v1/status"):
    res = A.call(addr, "GET", path)
    A.expect_error(res, 401, "unauthorized")
    assert "bearer" in res[1].get("www-authenticate", "").lower(), res[1]
    A.expect_error(A.call(addr, "GET", path, token=tok + "x"), 401,
                   "unauthorized")
A.expect_error(A.call(addr, "GET", "/v1/sandboxes",
                      headers={"Authorization": "Basic " + tok}), 401,
               "unauthorized")
print("ok - 401 without, with a wrong and with a non-bearer token")

# create: id, token, proxy_url, ca_cert; the CA is on disk already
st, h, b = A.call(addr, "POST", "/v1/sandboxes", {"policy": "default"},
                  token=tok)
assert st == 201, (st, b)
for k in ("id", "token", "proxy_url", "ca_cert"):
    assert b.get(k), "create answer lacks %s: %r" % (k, b)
sid, stok = b["id"], b["token"]
assert b["proxy_url"] == "http://%s:%s@127.0.0.1:%s" % (sid, stok, port), b
cadir = "%s/state/ca/%s" % (T, sid)
assert open(cadir + "/ca.crt").read() == b["ca_cert"], "ca_cert != ca.crt"
assert oct(os.stat(cadir + "/ca.key").st_mode & 0o777) == "0o600"
assert "BEGIN CERTIFICATE" in b["ca_cert"]
assert curl(b["proxy_url"]) == "200", "new sandbox cannot use the proxy"
assert curl(b["proxy_url"], "other.test") == "403", "policy not applied"
print("ok - create returns id, token, proxy_url, ca_cert; the proxy takes it")

# named create, conflicts and every kind of bad body
st, h, b2 = A.call(addr, "POST", "/v1/sandboxes",
                   {"policy": "p2", "id": "named-1"}, token=tok)
assert st == 201 and b2["id"] == "named-1", (st, b2)
A.expect_error(A.call(addr, "POST", "/v1/sandboxes",
                      {"policy": "p2", "id": "named-1"}, token=tok), 409,
               "conflict")
A.expect_error(A.call(addr, "POST", "/v1/sandboxes",
                      {"policy": "p2", "id": "static1"}, token=tok), 409,
               "conflict")
bad = [
    ({"policy": "nope"}, "nope"),
    ({"policy": "p2", "id": "../etc"}, "id"),
    ({"policy": "p2", "id": ""}, "id"),
    ({"policy": "p2", "colour": "red"}, "colour"),
    ({"policy": 7}, "policy"),
    ([1, 2], "object"),
]
for body, word in bad:
    res = A.call(addr, "POST", "/v1/sandboxes", body, token=tok)
    A.expect_error(res, 400, "bad_request")
    assert word in res[2]["reason"], (body, res[2])
for raw in (b"{bad json", b'{"policy":"p2"} trailing', b"\xff\xfe"):
    A.expect_error(A.call(addr, "POST", "/v1/sandboxes", raw=raw, token=tok),
                   400, "bad_request")
print("ok - 409 on taken ids, 400 with a reason for bad bodies")

# list and show
st, h, b = A.call(addr, "GET", "/v1/sandboxes", token=tok)
ids = {s["id"]: s for s in b["sandboxes"]}
assert set(ids) == {"static1", sid, "named-1"}, ids
assert ids["static1"]["static"] is True and ids[sid]["static"] is False
assert ids["named-1"]["policy"] == "p2"
st, h, b = A.call(addr, "GET", "/v1/sandboxes/named-1", token=tok)
assert st == 200 and b["token"] == b2["token"] and b["ca_cert"] == b2["ca_cert"]
A.expect_error(A.call(addr, "GET", "/v1/sandboxes/ghost", token=tok), 404,
               "not_found")
A.expect_error(A.call(addr, "GET", "/v1/sandboxes/ghost/usage", token=tok),
               404, "not_found")
A.expect_error(A.call(addr, "DELETE", "/v1/sandboxes/ghost", token=tok), 404,
               "not_found")
A.expect_error(A.call(addr, "GET", "/v1/nothing", token=tok), 404, "not_found")
A.expect_error(A.call(addr, "PUT", "/v1/sandboxes", token=tok), 405,
               "method_not_allowed")
print("ok - list, show, 404 and 405")

# usage counts requests and bytes; reset zeroes them
assert curl(b2["proxy_url"], "other.test") == "200"
assert curl(b2["proxy_url"], "other.test") == "200"
st, h, u = A.call(addr, "GET", "/v1/sandboxes/named-1/usage", token=tok)
assert st == 200, (st, u)
for k in ("sandbox", "window_start", "requests", "bytes_in", "bytes_out",
          "spend_microusd", "reserved_microusd", "spend_usd", "caps"):
    assert k in u, "usage lacks %s: %r" % (k, u)
assert u["requests"] == 2 and u["bytes_in"] > 0 and u["bytes_out"] > 0, u
assert u["caps"]["requests"] == 1000 and u["window_start"].endswith("Z"), u
st, h, u = A.call(addr, "POST", "/v1/sandboxes/named-1/usage/reset", token=tok)
assert st == 200 and u["requests"] == 0 and u["bytes_in"] == 0, u
print("ok - usage and usage/reset")

# claim without a launcher section: nothing is warm, the cold path builds
# the same kind of sandbox (tests/integration/265-pool.sh covers the pool)
st, h, c = A.call(addr, "POST", "/v1/sandboxes/claim", {"policy": "p2"},
                  token=tok)
assert st == 200 and c["warm"] is False and c["state"] == "launched", (st, c)
assert c["env"]["AIRLOCK_SANDBOX_ID"] == c["id"], c
assert curl(c["proxy_url"], "other.test") == "200"
A.expect_error(A.call(addr, "POST", "/v1/sandboxes/claim", {"policy": "zz"},
                      token=tok), 400, "bad_request")
A.expect_error(A.call(addr, "GET", "/v1/sandboxes/claim", token=tok), 405,
               "method_not_allowed")
st, h, b = A.call(addr, "DELETE", "/v1/sandboxes/" + c["id"], token=tok)
assert st == 204, (st, b)
print("ok - cold claim without a launcher section")

# delete: an open keep-alive connection of the sandbox is closed at once
import base64
s = socket.create_connection(("127.0.0.1", int(port)), timeout=5)
cred = base64.b64encode(("%s:%s" % (sid, stok)).encode()).decode()
req = ("GET http://api.test:%s/echo HTTP/1.1\r\nHost: api.test:%s\r\n"
       "Proxy-Authorization: Basic %s\r\n\r\n" % (oport, oport, cred)).encode()
s.sendall(req)
data = b""
while b"\r\n\r\n" not in data:
    data += s.recv(65536)
assert data.startswith(b"HTTP/1.1 200"), data[:100]
st, h, b = A.call(addr, "DELETE", "/v1/sandboxes/" + sid, token=tok)
assert st == 204, (st, b)
t0 = time.time()
s.settimeout(3)
closed = False
try:
    while True:
        d = s.recv(65536)
        if not d:
            closed = True
            break
except (ConnectionResetError, socket.timeout) as e:
    closed = not isinstance(e, socket.timeout)
assert closed, "the deleted sandbox's connection stayed open"
print("ok - delete closed the open connection in %.0f ms" %
      ((time.time() - t0) * 1000))
assert curl("http://%s:%s@127.0.0.1:%s" % (sid, stok, port)) == "407"
assert not os.path.exists(cadir), "CA directory survived the delete"
A.expect_error(A.call(addr, "GET", "/v1/sandboxes/" + sid, token=tok), 404,
               "not_found")
A.expect_error(A.call(addr, "DELETE", "/v1/sandboxes/static1", token=tok),
               409, "conflict")
print("ok - deleted: token refused (407), CA gone, 404; static ones: 409")
open(T + "/named1.url", "w").write(b2["proxy_url"])
PY

# API-created sandboxes survive a restart
stop_airlockd
[ -f "$T/state/sandboxes/named-1.json" ] || fail "named-1 not persisted"
[ "$(stat -c %a "$T/state/sandboxes/named-1.json")" = 600 ] ||
    fail "sandbox state file is not 0600"
start_airlockd "$T/airlock.yaml"
code=$(curl -sS -o /dev/null -w '%{http_code}' -x "$(cat "$T/named1.url")" \
    "http://other.test:$ORIGIN_PORT/echo")
[ "$code" = 200 ] || fail "named-1 after restart: $code"
ok "API-created sandbox works after a restart"

# reload through the API: a good file is taken, a bad one is refused with
# FILE:LINE:COL for every problem and the old config keeps serving
write_config api.test
"$PYTHON" - <<'PY' || fail "reload through the API"
import os, subprocess
import adminlib as A
T = os.environ["T"]
addr = "unix:" + os.environ["SOCK"]
tok = A.token(T + "/state")
oport = os.environ["ORIGIN_PORT"]
url = open(T + "/named1.url").read()

def curl(host):
    return subprocess.run(["curl", "-sS", "-o", "/dev/null", "-w",
                           "%{http_code}", "-x", url,
                           "http://%s:%s/echo" % (host, oport)],
                          capture_output=True, text=True).stdout

assert curl("other.test") == "200"
# policy p2 now allows api.test instead of other.test
st, h, b = A.call(addr, "POST", "/v1/reload", token=tok)
assert st == 200 and b == {"status": "ok"}, (st, b)
assert curl("other.test") == "403" and curl("api.test") == "200"
cfg = open(T + "/airlock.yaml").read()
open(T + "/airlock.yaml", "w").write(cfg.replace("rules:", "rulez:", 1)
                                     .replace("workers: 2", "workers: two"))
res = A.call(addr, "POST", "/v1/reload", token=tok)
A.expect_error(res, 400, "bad_config")
errs = res[2]["errors"]
assert len(errs) >= 2, errs
for e in errs:
    assert e.startswith(T + "/airlock.yaml:"), e
    parts = e.split(":")
    assert parts[1].isdigit() and parts[2].isdigit(), e
assert any("workers" in e for e in errs) and any("rulez" in e for e in errs), errs
assert curl("api.test") == "200", "old config stopped serving"
# keys only a restart applies: refused as a whole, never half applied
open(T + "/airlock.yaml", "w").write(cfg.replace("workers: 2", "workers: 3"))
res = A.call(addr, "POST", "/v1/reload", token=tok)
A.expect_error(res, 400, "bad_config")
assert res[2]["errors"] == [T + "/airlock.yaml: workers changed: restart "
                            "airlockd to apply it (the running configuration "
                            "stays)"], res[2]
st, h, b = A.call(addr, "GET", "/v1/status", token=tok)
assert b["reloads"] == {"ok": 1, "failed": 2}, b
assert b["sandboxes"] == 2 and b["audit"]["available"] is True, b
open(T + "/airlock.yaml", "w").write(cfg)
print("ok - POST /v1/reload: applied, then refused with FILE:LINE:COL")
PY

# SIGHUP with a broken file: logged with FILE:LINE:COL, old config stays
sed 's/workers: 2/workers: many/' "$T/airlock.yaml" >"$T/bad.yaml"
cp "$T/airlock.yaml" "$T/good.yaml"
cp "$T/bad.yaml" "$T/airlock.yaml"
kill -HUP "$AIRLOCK_PID"
i=0
until grep -q "reload failed" "$T/airlockd.log"; do
	i=$((i + 1)); [ $i -lt 100 ] || fail "no reload failure logged"
	sleep 0.05
done
grep -q "$T/airlock.yaml:[0-9]*:[0-9]*: .*workers" "$T/airlockd.log" ||
    fail "SIGHUP reload error without FILE:LINE:COL"
code=$(curl -sS -o /dev/null -w '%{http_code}' -x "$(cat "$T/named1.url")" \
    "http://api.test:$ORIGIN_PORT/echo")
[ "$code" = 200 ] || fail "after a failed SIGHUP reload: $code"
cp "$T/good.yaml" "$T/airlock.yaml"
ok "SIGHUP with a broken file keeps the running config"

# the admin API on a loopback TCP address instead of a socket
stop_airlockd
sed "s|^listen: {proxy: \"127.0.0.1:$AIRLOCK_PORT\"}|listen: {proxy: \"127.0.0.1:$AIRLOCK_PORT\", admin: \"127.0.0.1:$ADMIN_PORT\"}|" \
    "$T/good.yaml" >"$T/airlock.yaml"
grep -q "admin: \"127.0.0.1:$ADMIN_PORT\"" "$T/airlock.yaml" || fail "sed"
start_airlockd "$T/airlock.yaml"
wait_port "$ADMIN_PORT" 10 || fail "admin TCP port not listening"
"$PYTHON" - <<'PY' || fail "admin API over TCP"
import os
import adminlib as A
addr = "127.0.0.1:" + os.environ["ADMIN_PORT"]
tok = A.token(os.environ["T"] + "/state")
st, h, b = A.call(addr, "GET", "/v1/sandboxes", token=tok)
assert st == 200 and len(b["sandboxes"]) == 2, (st, b)
A.expect_error(A.call(addr, "GET", "/v1/sandboxes"), 401, "unauthorized")
print("ok - admin API on 127.0.0.1")
PY
[ ! -e "$T/state/admin.sock" ] || fail "stale unix socket left from before"

# the admin token never shows up in the log or the audit
stop_airlockd
if grep -F -q "$(cat "$T/state/admin.token")" "$T/airlockd.log" \
    "$T/audit.jsonl" 2>/dev/null; then
	fail "admin token leaked into the log or audit"
fi
ok "admin token not in the log or audit"
finish
