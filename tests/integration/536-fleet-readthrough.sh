#!/bin/sh
# Fleet mode (issue 18.3): the registry's read-through waits. A login with
# an id the gateway does not know waits (the worker does not) for one
# lookup in Redis, bounded by limits.store_timeout, then is served or
# refused 407 (before: refused, the lookup ran in the background and only
# the next login could pass).
#  - a sandbox record put in Redis by hand with no notification (as if
#    the pub/sub message were lost or late): its first login on gateway 2
#    is served;
#  - created through gateway 1's admin API and used on gateway 2 as soon
#    as its record is in Redis, on a connection opened before the
#    creation: the first login is served;
#  - an id Redis does not have, and a wrong token: 407, promptly;
#  - the same over SOCKS5 (RFC 1929 login): accepted at once, an unknown
#    id refused;
#  - Redis gone: an unknown id is refused 407 within store_timeout.
. "$top_srcdir/tests/integration/lib.sh"
. "$top_srcdir/tests/integration/fleetlib.sh"

start_origin
start_redis
for i in 1 2; do
	eval "GW_PORT_$i=\$(free_port)"
	eval "_p=\$GW_PORT_$i"
	S5_PORT=$(free_port)
	cat >"$T/gw$i.yaml" <<YAML
listen: {proxy: "127.0.0.1:$_p", socks5: "127.0.0.1:$S5_PORT"}
state_dir: $T/state$i
workers: 1
gateway: gw$i
audit: {file: $T/audit$i.jsonl}
upstream:
  allow_networks: ["127.0.0.1/32"]
  hosts: {"api.test": "127.0.0.1"}
budget_store: "redis://127.0.0.1:$REDIS_PORT/0"
limits: {store_timeout: 500ms}
policies:
  - name: p
    rules:
      - {host: "api.test", ports: [$ORIGIN_PORT]}
YAML
	start_gateway $i "$T/gw$i.yaml"
done
wait_admin 1
# both registries connected (the first resync done)
_w=0
until [ "$(grep -c 'fleet registry: connected' "$T"/airlockd-*.log |
    awk -F: '{s += $2} END {print s}')" -ge 2 ]; do
	_w=$((_w + 1)); [ $_w -le 100 ] || hard_error "registries not connected"
	sleep 0.05
done
export T GW_PORT_1 GW_PORT_2 ORIGIN_PORT REDIS_PORT S5_PORT

cat >"$T/rt.py" <<'PY'
import base64, hashlib, os, socket, subprocess, sys, time
import adminlib as A
T = os.environ["T"]
OP = int(os.environ["ORIGIN_PORT"])
GW = {i: int(os.environ["GW_PORT_%d" % i]) for i in (1, 2)}


def rcli(*a):
    return subprocess.check_output(
        ["redis-cli", "-p", os.environ["REDIS_PORT"]] + list(a)).decode()


def conn(port):
    return socket.create_connection(("127.0.0.1", port), timeout=5)


def get(s, sid, tok):
    """One GET on connection s: (status, seconds)."""
    auth = base64.b64encode(("%s:%s" % (sid, tok)).encode()).decode()
    t0 = time.monotonic()
    s.sendall(("GET http://api.test:%d/echo HTTP/1.1\r\nHost: api.test:%d"
               "\r\nProxy-Authorization: Basic %s\r\nConnection: close"
               "\r\n\r\n" % (OP, OP, auth)).encode())
    data = b""
    while b"\r\n" not in data:
        b = s.recv(65536)
        if not b:
            break
        data += b
    s.close()
    return (int(data.split(b" ", 2)[1]) if data else None,
            time.monotonic() - t0)


def put(sid, tok):
    """A sandbox record in Redis, as a gateway writes it, unannounced."""
    rcli("HSET", "airlock:sbx:" + sid, "policy", "p", "tok",
         hashlib.sha256(tok.encode()).hexdigest(), "created",
         str(int(time.time())), "addr", "")
    rcli("SADD", "airlock:sbxs", sid)
PY

"$PYTHON" - <<'PY' || check_fail "unannounced record"
import os, sys
sys.path.insert(0, os.environ["T"]); from rt import *
for n in range(3):
    sid, tok = "rt%d" % n, "secret-%d" % n
    s = conn(GW[2])
    put(sid, tok)
    st, dt = get(s, sid, tok)
    assert st == 200, "first login of %s on gateway 2: %s" % (sid, st)
    print("# %s: first login served after %.3f s" % (sid, dt))
st, _ = get(conn(GW[2]), "rt0", "secret-0x")
assert st == 407, "wrong token: %s" % st
PY
ok "a sandbox only Redis knows: its first login is served (the lookup waited for)"

# gateway 2's SOCKS5 listener (the last one made): RFC 1929 login
"$PYTHON" - <<'PY' || check_fail "SOCKS5 login of an unannounced record"
import os, sys
sys.path.insert(0, os.environ["T"]); from rt import *
s = conn(int(os.environ["S5_PORT"]))
put("rs0", "secret-s")
s.sendall(b"\x05\x01\x02")
assert s.recv(2) == b"\x05\x02", "method"
s.sendall(b"\x01\x03rs0\x08secret-s")
got = s.recv(2)
assert got == b"\x01\x00", "first SOCKS5 login of rs0: %r" % got
s.close()
s = conn(int(os.environ["S5_PORT"]))
s.sendall(b"\x05\x01\x02")
assert s.recv(2) == b"\x05\x02", "method"
s.sendall(b"\x01\x06nosuch\x01x")
got = s.recv(2)
assert got == b"\x01\x01", "unknown id over SOCKS5: %r" % got
PY
ok "SOCKS5: a sandbox only Redis knows is accepted on its first login, an unknown id refused"

"$PYTHON" - <<'PY' || check_fail "created on 1, used on 2 at once"
import os, sys
sys.path.insert(0, os.environ["T"]); from rt import *
import time
for n in range(3):
    s = conn(GW[2])
    st, _, b = A.call("unix:%s/state1/admin.sock" % T, "POST",
                      "/v1/sandboxes", body={"id": "ru%d" % n, "policy": "p"},
                      token=A.token(T + "/state1"))
    assert st == 201, (st, b)
    # gateway 1 answers once Redis has the record (create-after-write,
    # 561): this wait ends at once
    t0 = time.monotonic()
    while rcli("EXISTS", "airlock:sbx:ru%d" % n).strip() != "1" and \
            time.monotonic() - t0 < 1:
        time.sleep(0.001)
    st, dt = get(s, "ru%d" % n, b["token"])
    assert st == 200, "first login of ru%d on gateway 2: %s" % (n, st)
    print("# ru%d: first login on gateway 2 served after %.3f s" % (n, dt))
PY
ok "created on gateway 1, used on gateway 2 once its record is in Redis: the first login is served"

"$PYTHON" - <<'PY' || check_fail "unknown id"
import os, sys
sys.path.insert(0, os.environ["T"]); from rt import *
st, dt = get(conn(GW[2]), "nosuch", "x")
assert st == 407, "unknown id: %s" % st
assert dt < 0.5, "unknown id refused after %.3f s" % dt
print("# unknown id refused after %.3f s" % dt)
PY
ok "an id Redis does not have: 407 after one lookup"

stop_redis
"$PYTHON" - <<'PY' || check_fail "Redis gone"
import os, sys, time
sys.path.insert(0, os.environ["T"]); from rt import *
time.sleep(0.3)
st, dt = get(conn(GW[2]), "nosuch2", "x")
assert st == 407, "Redis gone, unknown id: %s" % st
assert dt < 0.9, "refused after %.3f s (store_timeout 500ms)" % dt
st, _ = get(conn(GW[2]), "rt1", "secret-1")
assert st == 200, "rt1, known before, with Redis gone: %s" % st
PY
ok "Redis gone: an unknown id is refused 407 within store_timeout, known ones served"

stop_gateways 1 2
finish
