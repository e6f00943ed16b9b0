#!/bin/sh
# Fleet mode (issue 18, create-after-write): the admin API of the
# gateway that creates, deletes or resets a sandbox answers once Redis has
# the change, so a login on another gateway right after the answer is
# known there (before: refused once inside a ~1 ms window).
#  - 20 times: create on gateway 1, then at once (no sleep) a request
#    with the new token through gateway 2 and gateway 3: served;
#  - a delete on gateway 1 is refused on 2 and 3 right after its 204;
#  - Redis stopped (SIGSTOP: connected, silent): a creation answers
#    503 budget_unavailable within about store_timeout, and the sandbox
#    is not left on gateway 1 (nor in Redis once it answers again).
# Its time is mostly processes starting (a python costs seconds on a
# loaded machine): the gateways start together, one python runs the checks.
. "$top_srcdir/tests/integration/lib.sh"
. "$top_srcdir/tests/integration/fleetlib.sh"

start_origin
set -- $(free_port 4)
REDIS_PORT=$1 GW_PORT_1=$2 GW_PORT_2=$3 GW_PORT_3=$4
start_redis
for i in 1 2 3; do
	eval "_p=\$GW_PORT_$i"
	cat >"$T/gw$i.yaml" <<YAML
listen: {proxy: "127.0.0.1:$_p"}
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
done
start_gateways 1 2 3
export T GW_PORT_1 GW_PORT_2 GW_PORT_3 ORIGIN_PORT REDIS_PORT REDIS_PID

"$PYTHON" - <<'PY'
import base64, glob, os, signal, socket, subprocess, sys, time
import adminlib as A
from itlib import check
T = os.environ["T"]
OP = int(os.environ["ORIGIN_PORT"])
GW = {i: int(os.environ["GW_PORT_%d" % i]) for i in (1, 2, 3)}
REDIS = int(os.environ["REDIS_PID"])
ADM = "unix:%s/state1/admin.sock" % T


def rcli(*a):
    return subprocess.check_output(
        ["redis-cli", "-p", os.environ["REDIS_PORT"]] + list(a)).decode()


def get(gw, sid, tok):
    """One GET through gateway gw: its status."""
    auth = base64.b64encode(("%s:%s" % (sid, tok)).encode()).decode()
    s = socket.create_connection(("127.0.0.1", GW[gw]), timeout=5)
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
    return int(data.split(b" ", 2)[1]) if data else None


# the three registries connected, gateway 1's admin API up
t0 = time.monotonic()
while True:
    n = sum(open(f).read().count("fleet registry: connected")
            for f in glob.glob(T + "/airlockd-*.log"))
    if n >= 3 and os.path.exists(T + "/state1/admin.sock") and \
            os.path.getsize(T + "/state1/admin.token") > 0:
        break
    if time.monotonic() - t0 > 10:
        print("ERROR: registries not connected (%d) or no admin API" % n)
        sys.exit(99)
    time.sleep(0.05)
print("# the fleet up after %.1f s" % (time.monotonic() - t0), flush=True)
TOK = A.token(T + "/state1")


def create_use():
    """20 sandboxes created on gateway 1: each served at once on gateways 2 and 3"""
    for n in range(20):
        sid = "caw%d" % n
        st, _, b = A.call(ADM, "POST", "/v1/sandboxes",
                          body={"id": sid, "policy": "p"}, token=TOK)
        assert st == 201, (st, b)
        for gw in (2, 3):
            st = get(gw, sid, b["token"])
            assert st == 200, "%s, right after its 201, on gateway %d: " \
                "%s" % (sid, gw, st)


def delete_refused():
    """deleted on gateway 1: out of Redis when it answers 204, refused on 2 and 3"""
    st, _, b = A.call(ADM, "POST", "/v1/sandboxes",
                      body={"id": "cawd", "policy": "p"}, token=TOK)
    assert st == 201, (st, b)
    for gw in (2, 3):
        assert get(gw, "cawd", b["token"]) == 200, "cawd on %d" % gw
    st, _, _ = A.call(ADM, "DELETE", "/v1/sandboxes/cawd", token=TOK)
    assert st == 204, st
    assert rcli("EXISTS", "airlock:sbx:cawd").strip() == "0", \
        "still in Redis"
    for gw in (2, 3):
        st = get(gw, "cawd", b["token"])
        assert st == 407, "cawd after its 204, on gateway %d: %s" % (gw, st)


def redis_silent():
    """Redis silent: a creation answers 503 budget_unavailable in time, nothing left on gateway 1"""
    os.kill(REDIS, signal.SIGSTOP)
    try:
        t0 = time.monotonic()
        st, _, b = A.call(ADM, "POST", "/v1/sandboxes",
                          body={"id": "cawx", "policy": "p"}, token=TOK)
        dt = time.monotonic() - t0
        print("# Redis silent: %s after %.3f s: %s" % (st, dt, b))
        assert st == 503, (st, b)
        assert b.get("error") == "budget_unavailable", b
        assert "request_id" in b and "reason" in b, b
        assert dt < 1.5, "answered after %.3f s (store_timeout 500ms)" % dt
        st, _, b = A.call(ADM, "GET", "/v1/sandboxes/cawx", token=TOK)
        assert st == 404, ("left on gateway 1", st, b)
        assert not os.path.exists(T + "/state1/sandboxes/cawx.json"), \
            "its file"
    finally:
        os.kill(REDIS, signal.SIGCONT)


def redis_back():
    """once Redis answers again, the refused sandbox is in neither Redis nor gateway 2"""
    # a later creation on gateway 1 is confirmed (changes reach Redis in
    # order, so whatever gateway 1 queued for cawx, its announcement if
    # it had begun and then its retraction, is in Redis by then)
    t0 = time.monotonic()
    while True:
        st, _, b = A.call(ADM, "POST", "/v1/sandboxes",
                          body={"id": "cawy", "policy": "p"}, token=TOK)
        if st == 201 or time.monotonic() - t0 > 8:
            break
        time.sleep(0.1)
    assert st == 201, ("a creation once Redis is back", st, b)
    assert rcli("EXISTS", "airlock:sbx:cawx").strip() == "0", \
        "the refused sandbox is in Redis after all"
    t0 = time.monotonic()
    while True:
        st, _, b = A.call("unix:%s/state2/admin.sock" % T, "GET",
                          "/v1/sandboxes/cawx", token=A.token(T + "/state2"))
        if st == 404 or time.monotonic() - t0 > 2:
            break
        time.sleep(0.05)
    assert st == 404, ("the refused sandbox on gateway 2", st, b)


for fn in (create_use, delete_refused, redis_silent, redis_back):
    check(fn, T + "/failed")
PY
case $? in
0)	;;
99)	hard_error "the fleet did not come up" ;;
*)	check_fail "the checks did not run to their end" ;;
esac
py_failed

stop_gateways 1 2 3
finish
