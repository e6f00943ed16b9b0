#!/bin/sh
# Fleet mode (issue 18, create-after-write): an admin client that goes
# away while its answer waits for Redis. Two gateways share a Redis
# (limits.store_timeout 500ms); the admin clients of gateway 1 send a
# create, a delete or a usage reset and close the socket at once (or
# after 0.1 s, before the answer), many times, while Redis
#  A. sleeps (redis-cli DEBUG SLEEP 2: slow, answers in the end);
#  B. is stopped (SIGSTOP: connected, never answers meanwhile);
#  C. is stopped and gateway 1 gets SIGTERM with those answers pending
#     (a delete among them: done there at once, not yet in Redis).
# After each: gateway 1 is alive and serves its admin API at once, holds
# no descriptor of the clients gone, and every sandbox asked for is in
# the same state on gateway 1, in Redis and on gateway 2 (created on all
# three, or on none); gateway 1 stops cleanly (exit 0, no sanitizer
# report: ASan builds report leaks at exit) and after a restart still
# agrees with Redis and gateway 2, the delete included (sent at start:
# before, the resynchronisation brought the sandbox back, token and all). The fleet holds more than 64
# sandboxes, so each resynchronisation reads a listing longer than a
# budget reply may be.
. "$top_srcdir/tests/integration/lib.sh"
. "$top_srcdir/tests/integration/fleetlib.sh"

# DEBUG SLEEP: refused by default since Redis 7, allowed from loopback
command -v redis-server >/dev/null 2>&1 &&
    [ "$(redis-server --version | sed -n 's/.* v=\([0-9]*\)\..*/\1/p')" \
    -ge 7 ] 2>/dev/null && REDIS_EXTRA="--enable-debug-command local"
set -- $(free_port 3)
REDIS_PORT=$1 GW_PORT_1=$2 GW_PORT_2=$3
start_redis
for i in 1 2; do
	eval "_p=\$GW_PORT_$i"
	cat >"$T/gw$i.yaml" <<YAML
listen: {proxy: "127.0.0.1:$_p"}
state_dir: $T/state$i
workers: 1
gateway: gw$i
audit: {file: $T/audit$i.jsonl}
budget_store: "redis://127.0.0.1:$REDIS_PORT/0"
limits: {store_timeout: 500ms}
policies:
  - name: p
    rules:
      - {host: "api.test", ports: [443]}
YAML
done
start_gateways 1 2
export T REDIS_PORT REDIS_PID GW_PID_1

cat >"$T/dc.py" <<'PY'
import json, os, signal, socket, subprocess, sys, threading, time
import adminlib as A
import itlib
T = os.environ["T"]


def adm(i):
    return "unix:%s/state%d/admin.sock" % (T, i)


def tok(i):
    return A.token("%s/state%d" % (T, i))


def call(i, method, path, body=None):
    return A.call(adm(i), method, path, body=body, token=tok(i))


def hang_up(method, path, body=None, linger=0.0):
    """Send one request to gateway 1's admin API and close the socket at
    once (or after <linger> s), never reading the answer."""
    data = json.dumps(body).encode() if body is not None else b""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect("%s/state1/admin.sock" % T)
    s.sendall(("%s %s HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer %s\r\n"
               "Content-Type: application/json\r\nContent-Length: %d\r\n"
               "\r\n" % (method, path, tok(1), len(data))).encode() + data)
    if linger:
        time.sleep(linger)
    s.close()


def storm(prefix, n, victims=()):
    """n creates of prefix0..prefix<n-1>, plus a delete or a reset of each
    victim, from concurrent clients that hang up before the answer."""
    th = []
    for k in range(n):
        th.append(threading.Thread(target=hang_up, args=(
            "POST", "/v1/sandboxes", {"id": "%s%d" % (prefix, k),
                                      "policy": "p"}, 0.1 * (k % 2))))
    for v, delete in victims:
        th.append(threading.Thread(target=hang_up, args=(
            ("DELETE", "/v1/sandboxes/%s" % v) if delete else
            ("POST", "/v1/sandboxes/%s/usage/reset" % v))))
    for t in th:
        t.start()
    for t in th:
        t.join()


def alive():
    """Gateway 1 runs and answers its admin API at once."""
    os.kill(int(os.environ["GW_PID_1"]), 0)
    t0 = time.monotonic()
    st, _, _ = A.call(adm(1), "GET", "/healthz")
    assert st == 200, ("healthz", st)
    st, _, b = call(1, "GET", "/v1/sandboxes")
    assert st == 200, ("list", st, b)
    dt = time.monotonic() - t0
    assert dt < 2, "the admin API answered after %.2f s" % dt


def settle(i=1, limit=20):
    """A create on gateway i confirmed by Redis: every change queued there
    before it is in Redis too (changes are sent in order)."""
    t0 = time.monotonic()
    sid = "settle%d" % int(t0 * 1000)
    while True:
        st, _, b = call(i, "POST", "/v1/sandboxes", {"id": sid,
                                                      "policy": "p"})
        if st == 201:
            return sid
        assert st == 503, (st, b)
        assert time.monotonic() - t0 < limit, "Redis never confirmed"
        time.sleep(0.1)


def in_redis(ids):
    """{id: (its record is there, it is in the set)}, one redis-cli."""
    cmds = "".join("EXISTS airlock:sbx:%s\nSISMEMBER airlock:sbxs %s\n" %
                   (i, i) for i in ids)
    out = subprocess.run(["redis-cli", "-p", os.environ["REDIS_PORT"]],
                         input=cmds.encode(), stdout=subprocess.PIPE,
                         check=True).stdout.decode().split()
    assert len(out) == 2 * len(ids), out
    return {i: (out[2 * k] == "1", out[2 * k + 1] == "1")
            for k, i in enumerate(ids)}


def consistent(ids, limit=5):
    """Each id is on gateway 1, in Redis and on gateway 2, or on none of
    them; returns the ids that exist."""
    t0 = time.monotonic()
    while True:
        bad, there = [], []
        red = in_redis(ids)
        for sid in ids:
            on1 = call(1, "GET", "/v1/sandboxes/" + sid)[0] == 200
            inr, ins = red[sid]
            on2 = call(2, "GET", "/v1/sandboxes/" + sid)[0] == 200
            if not on1 == inr == ins == on2:
                bad.append((sid, on1, inr, ins, on2))
            elif on1:
                there.append(sid)
        if not bad:
            return there
        assert time.monotonic() - t0 < limit, \
            "(id, on gateway 1, record in Redis, in the set, on " \
            "gateway 2): %s" % bad
        time.sleep(0.1)


def check(fn):
    return itlib.check(fn, T + "/failed")


def fds():
    return len(os.listdir("/proc/%s/fd" % os.environ["GW_PID_1"]))


def wait_fds(n, limit=5):
    """Gateway 1 back to <n> descriptors: none kept for a client gone."""
    t0 = time.monotonic()
    while fds() > n:
        assert time.monotonic() - t0 < limit, \
            "gateway 1 holds %d descriptors, %d before" % (fds(), n)
        time.sleep(0.05)


def rounds(prefix, nrounds, n, victims=()):
    """nrounds storms of n creates; victims (id, delete?) spread over
    them."""
    ids = []
    for r in range(nrounds):
        storm("%s%d_" % (prefix, r), n, victims[r::nrounds])
        ids += ["%s%d_%d" % (prefix, r, k) for k in range(n)]
    return ids
PY

"$PYTHON" - <<'PY'
import os, signal, subprocess, sys, time
sys.path.insert(0, os.environ["T"]); from dc import *
# both registries connected, both admin APIs up
t0 = time.monotonic()
while sum(open(T + "/airlockd-%d.log" % i).read().count(
        "fleet registry: connected") > 0 for i in (1, 2)) < 2 or \
        not all(os.path.exists(T + "/state%d/admin.token" % i)
                for i in (1, 2)):
    if time.monotonic() - t0 > 10:
        sys.exit(99)
    time.sleep(0.05)
# the fleet has more than 64 sandboxes (a listing over the budget
# replies' bound: the registry's resynchronisation must still read it)
for k in range(70):
    st, _, b = call(1 + k % 2, "POST", "/v1/sandboxes", {"id": "f%d" % k,
                                                          "policy": "p"})
    assert st == 201, (st, b)
victims = []
for k in range(12):
    st, _, b = call(1, "POST", "/v1/sandboxes", {"id": "v%d" % k,
                                                  "policy": "p"})
    assert st == 201, (st, b)
    victims.append("v%d" % k)
REDIS = int(os.environ["REDIS_PID"])


def slow():
    """A: Redis asleep (DEBUG SLEEP 2), 60 creates and 12 deletes or resets hung up: alive, no descriptor kept, gateway 1, Redis and gateway 2 agree"""
    base = fds()
    t0 = time.monotonic()
    slp = subprocess.Popen(["redis-cli", "-p", os.environ["REDIS_PORT"],
                            "DEBUG", "SLEEP", "2"], stdout=subprocess.PIPE)
    time.sleep(0.2)
    ids = rounds("a", 3, 20, [(v, k % 2 == 0) for k, v in
                              enumerate(victims)])
    alive()
    out = slp.communicate()[0].decode().strip()
    assert out == "OK" and time.monotonic() - t0 > 1.5, \
        "DEBUG SLEEP 2: %r after %.2f s" % (out, time.monotonic() - t0)
    alive()
    wait_fds(base)
    settle()
    there = consistent(ids + victims)
    gone = [v for v in victims if v not in there]
    print("# A: %d of %d created, %d of %d victims deleted" % (
        len([i for i in there if i in ids]), len(ids), len(gone),
        len(victims)))
    for k, v in enumerate(victims):
        assert (v in gone) == (k % 2 == 0), (
            v, "deleted" if v in gone else "still there")


def stopped():
    """B: Redis stopped (SIGSTOP), 60 creates hung up: alive meanwhile, no descriptor kept, nothing left anywhere once Redis is back"""
    os.kill(REDIS, signal.SIGSTOP)
    try:
        base = fds()
        ids = rounds("b", 3, 20)
        alive()
        time.sleep(0.6)		# past store_timeout: every wait ended
        alive()
        wait_fds(base)
    finally:
        os.kill(REDIS, signal.SIGCONT)
    settle()
    there = consistent(ids)
    assert there == [], ("not confirmed, yet created", there)
    alive()


def sigterm():
    """C: Redis stopped, 20 creates and a delete hung up, then SIGTERM while they wait"""
    os.kill(REDIS, signal.SIGSTOP)
    ids = rounds("c", 2, 10, [("v1", True)])
    os.kill(int(os.environ["GW_PID_1"]), signal.SIGTERM)
    open(T + "/c.ids", "w").write(" ".join(ids))


for fn in (slow, stopped, sigterm):
    check(fn)
PY
case $? in
0)	;;
99)	hard_error "the fleet did not come up" ;;
*)	check_fail "setting up the sandboxes" ;;
esac
py_failed

# C: a clean exit (and no leak report under ASan); restarted, gateway 1
# agrees with Redis and gateway 2
wait_exit "$GW_PID_1" 30
[ "$WAIT_STATUS" -eq 0 ] ||
    check_fail "C: gateway 1 exited $WAIT_STATUS after SIGTERM"
grep -E -q 'runtime error:|AddressSanitizer|LeakSanitizer' \
    "$T/airlockd-1.log" && check_fail "C: sanitizer report in gateway 1's log"
kill -CONT "$REDIS_PID"
start_gateway 1 "$T/gw1.yaml"
wait_admin 1
export GW_PID_1
"$PYTHON" - <<'PY' || check_fail "C: gateway 1 restarted"
import os, sys
sys.path.insert(0, os.environ["T"]); from dc import *
ids = open(T + "/c.ids").read().split()


def restarted():
    """C: after the restart, gateway 1 serves at once, agrees with Redis and gateway 2, and the delete it could not send before is done"""
    alive()
    settle()
    there = consistent(ids + ["v1"])
    assert "v1" not in there, "deleted before the restart, back after it"
    print("# C: %d of %d created" % (len(there), len(ids)))


check(restarted)
PY
py_failed

stop_gateways 1 2
finish
