#!/bin/sh
# Fleet mode (issue 18.3, 18.2): a spliced CONNECT tunnel and the fleet.
#  - a sandbox created on gateway 1 opens a spliced TLS tunnel through
#    gateway 2 (its policy has a requests cap: the tunnel is admitted by
#    the shared store, its request counted in Redis);
#  - the sandbox is deleted through gateway 1's admin API: the open tunnel
#    on gateway 2 is closed within 1 s;
#  - the tunnel's bytes are settled in the shared counters when it ends.
. "$top_srcdir/tests/integration/lib.sh"
. "$top_srcdir/tests/integration/fleetlib.sh"

command -v openssl >/dev/null 2>&1 || hard_error "openssl CLI not found"
sh "$top_srcdir/tests/harness/mkpki.sh" "$T/pki" >"$T/mkpki.log" 2>&1 ||
    hard_error "mkpki.sh: $(cat "$T/mkpki.log")"
start_origin origin -C "$T/pki/good.crt" -K "$T/pki/good.key"
start_redis
for i in 1 2; do
	eval "GW_PORT_$i=\$(free_port)"
	eval "_p=\$GW_PORT_$i"
	cat >"$T/gw$i.yaml" <<YAML
listen: {proxy: "127.0.0.1:$_p"}
state_dir: $T/state$i
workers: 1
gateway: gw$i
audit: {file: $T/audit$i.jsonl}
upstream:
  ca_file: $T/pki/ca.crt
  allow_networks: ["127.0.0.1/32"]
  hosts: {"api.test": "127.0.0.1"}
budget_store: "redis://127.0.0.1:$REDIS_PORT/0"
limits: {store_timeout: 500ms}
policies:
  - name: p
    rules:
      - {host: "api.test", ports: [$ORIGIN_PORT], intercept: false}
    caps: {requests: 100}
YAML
	start_gateway $i "$T/gw$i.yaml"
done
wait_admin 1 2
export T GW_PORT_1 GW_PORT_2 ORIGIN_PORT REDIS_PORT

"$PYTHON" - <<'PY' || check_fail "tunnel vs deletion"
import base64, os, socket, ssl, subprocess, time
import adminlib as A
T = os.environ["T"]
OP = int(os.environ["ORIGIN_PORT"])


def rcli(*a):
    return subprocess.check_output(
        ["redis-cli", "-p", os.environ["REDIS_PORT"]] + list(a)).decode()


st, _, b = A.call("unix:%s/state1/admin.sock" % T, "POST", "/v1/sandboxes",
                  body={"id": "tv", "policy": "p"},
                  token=A.token(T + "/state1"))
assert st == 201, (st, b)
raw = socket.create_connection(("127.0.0.1", int(os.environ["GW_PORT_2"])),
                               timeout=5)
auth = base64.b64encode(("tv:" + b["token"]).encode()).decode()
raw.sendall(("CONNECT api.test:%d HTTP/1.1\r\nHost: api.test:%d\r\n"
             "Proxy-Authorization: Basic %s\r\n\r\n" % (OP, OP, auth)).encode())
head = b""
while b"\r\n\r\n" not in head:
    chunk = raw.recv(4096)
    assert chunk, "closed during CONNECT: %r" % head
    head += chunk
assert head.startswith(b"HTTP/1.1 200"), head[:80]
ctx = ssl.create_default_context(cafile=T + "/pki/ca.crt")
s = ctx.wrap_socket(raw, server_hostname="api.test")
s.sendall(("GET /echo HTTP/1.1\r\nHost: api.test:%d\r\n\r\n" % OP).encode())
got = s.recv(65536)
assert got.startswith(b"HTTP/1.1 200"), got[:80]
req = rcli("HGET", "airlock:{tv}:w:0", "req").strip()
assert req == "1", "the tunnel's request in Redis: %r" % req
time.sleep(0.2)
s.settimeout(0.2)
try:
    s.recv(65536)      # the rest of the answer, if any
except (socket.timeout, ssl.SSLError):
    pass
st, _, _ = A.call("unix:%s/state1/admin.sock" % T, "DELETE",
                  "/v1/sandboxes/tv", token=A.token(T + "/state1"))
assert st in (200, 204), st
t0 = time.monotonic()
s.settimeout(2)
closed = False
try:
    while True:
        if s.recv(65536) == b"":
            closed = True
            break
except (ConnectionResetError, ssl.SSLError, OSError) as e:
    closed = not isinstance(e, socket.timeout)
dt = time.monotonic() - t0
assert closed, "the tunnel on gateway 2 is still open after %.2f s" % dt
assert dt < 1.0, "the tunnel closed after %.2f s" % dt
print("# the tunnel on gateway 2 closed %.3f s after the deletion" % dt)
# its bytes reach the shared counters when it ends
t0 = time.monotonic()
while time.monotonic() - t0 < 3:
    v = rcli("HMGET", "airlock:{tv}:w:0", "in", "out").split()
    if len(v) == 2 and all(x.isdigit() and int(x) > 0 for x in v):
        break
    time.sleep(0.05)
assert len(v) == 2 and all(x.isdigit() and int(x) > 0 for x in v), \
    "the tunnel's bytes in Redis: %r" % v
PY
ok "a spliced tunnel of a fleet sandbox: admitted through Redis, closed within 1 s of its deletion on another gateway, its bytes settled"

stop_gateways 1 2
finish
