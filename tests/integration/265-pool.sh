#!/bin/sh
# Scheduler with launcher.backend none (a sandbox is an identity: id, token,
# CA): the warm pool fills to pool.warm, a claim hands out a warm sandbox at
# once and the pool refills, an empty pool falls back to the cold path,
# prewarm prepares ahead, claimed sandboxes idle past idle_timeout are
# evicted (never one with an open connection), pool.max bounds the policy,
# warm sandboxes are never persisted and are removed at shutdown.
. "$top_srcdir/tests/integration/lib.sh"

start_origin
AIRLOCK_PORT=$(free_port)
export AIRLOCK_PORT ORIGIN_PORT T

{
	config_common "$AIRLOCK_PORT"
	cat <<YAML
upstream:
  allow_networks: ["127.0.0.1/32"]
  hosts: {"api.test": "127.0.0.1"}
launcher:
  backend: none
  pool: {warm: 2, max: 6, idle_timeout: 3s}
policies:
  - name: p
    rules:
      - {host: "api.test", ports: [$ORIGIN_PORT]}
  - name: q
    rules:
      - {host: "api.test", ports: [$ORIGIN_PORT]}
YAML
} >"$T/airlock.yaml"
start_airlockd "$T/airlock.yaml"

"$PYTHON" - <<'PY' || fail "pool checks"
import base64, os, socket, subprocess, time
import adminlib as A
T = os.environ["T"]
addr = "unix:%s/state/admin.sock" % T
tok = A.token(T + "/state")
oport = os.environ["ORIGIN_PORT"]

def pool(policy):
    st, h, b = A.call(addr, "GET", "/v1/pool", token=tok)
    assert st == 200, (st, b)
    return [p for p in b["policies"] if p["policy"] == policy][0]

def wait_warm(policy, n, secs=10):
    end = time.time() + secs
    while time.time() < end:
        p = pool(policy)
        if p["warm"] >= n:
            return p
        time.sleep(0.05)
    raise AssertionError("pool %s never reached %d warm: %r" % (policy, n, p))

def curl(url):
    return subprocess.run(["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}",
                           "-x", url, "http://api.test:%s/echo" % oport],
                          capture_output=True, text=True).stdout

def listing():
    st, h, b = A.call(addr, "GET", "/v1/sandboxes", token=tok)
    return {s["id"]: s for s in b["sandboxes"]}

# both policies fill to pool.warm; warm sandboxes are not persisted
wait_warm("p", 2); wait_warm("q", 2)
warm_ids = [i for i, s in listing().items() if s["state"] == "warm"]
assert len(warm_ids) == 4, listing()
for i in warm_ids:
    assert os.path.exists("%s/state/ca/%s/ca.crt" % (T, i)), i
    assert not os.path.exists("%s/state/sandboxes/%s.json" % (T, i)), i
print("ok - pools filled to warm=2 per policy, CAs minted, not persisted")

# a claim hands out one of the warm ones, and it works at once
st, h, c = A.call(addr, "POST", "/v1/sandboxes/claim", {"policy": "p"}, token=tok)
assert st == 200 and c["warm"] is True and c["id"] in warm_ids, (st, c)
assert c["state"] == "launched" and c["policy"] == "p"
# hold a connection of it open: it must never be evicted while in use
s = socket.create_connection(("127.0.0.1", int(os.environ["AIRLOCK_PORT"])))
cred = base64.b64encode(("%s:%s" % (c["id"], c["token"])).encode()).decode()
s.sendall(("GET http://api.test:%s/echo HTTP/1.1\r\nHost: api.test\r\n"
           "Proxy-Authorization: Basic %s\r\n\r\n" % (oport, cred)).encode())
assert s.recv(65536).startswith(b"HTTP/1.1 200")
assert curl(c["proxy_url"]) == "200"
assert os.path.exists("%s/state/sandboxes/%s.json" % (T, c["id"]))
env = c["env"]
assert env["AIRLOCK_SANDBOX_ID"] == c["id"] and env["AIRLOCK_GATEWAY"] == "127.0.0.1"
assert env["HTTPS_PROXY"] == c["proxy_url"], env
wait_warm("p", 2)
print("ok - warm claim, usable at once, persisted; pool refilled")

# drain faster than it refills: every claim still answers, unique ids
ids = set()
for _ in range(4):
    st, h, c2 = A.call(addr, "POST", "/v1/sandboxes/claim", {"policy": "q"},
                       token=tok)
    assert st == 200, (st, c2)
    ids.add(c2["id"])
assert len(ids) == 4
p = pool("q")
assert p["claims"] == 4, p
assert p["claims_cold"] <= 2, p   # the first two at least were warm
print("ok - 4 claims in a row: %d cold" % p["claims_cold"])

# pool.max bounds warm + launched of a policy (q has 4 launched)
time.sleep(0.5)
p = pool("q")
assert p["warm"] + p["launched"] <= 6, p

# prewarm prepares ahead of demand (bounded by max)
before = pool("p")
st, h, b = A.call(addr, "POST", "/v1/pool/prewarm", {"policy": "p", "count": 2},
                  token=tok)
assert st == 202 and b["scheduled"] == 2, (st, b)
wait_warm("p", before["warm"] + 1)
st, h, b = A.call(addr, "POST", "/v1/pool/prewarm", {"policy": "p", "count": 50},
                  token=tok)
assert st == 202 and b["scheduled"] < 50, (st, b)   # clipped to pool.max
for body in ({"policy": "p", "count": 0}, {"policy": "p", "count": "2"},
             {"policy": "nope"}, {"policy": "p", "extra": 1}):
    A.expect_error(A.call(addr, "POST", "/v1/pool/prewarm", body, token=tok),
                   400, "bad_request")
print("ok - prewarm: 202, the warm pool grows, clipped to max; bad bodies 400")

# idle eviction: the idle q sandboxes go after idle_timeout (3 s), the p one
# with an open connection stays
end = time.time() + 15
while time.time() < end and pool("q")["evicted"] < 4:
    time.sleep(0.2)
cur = listing()
for i in ids:
    assert i not in cur, "idle launched sandbox %s not evicted" % i
assert c["id"] in cur, "a sandbox with an open connection was evicted"
assert pool("q")["evicted"] == 4, pool("q")
assert curl(c2["proxy_url"]) == "407", "evicted sandbox's token still works"
print("ok - idle claimed sandboxes evicted; one in use kept")
s.close()
PY

# shutdown removes the warm sandboxes' CAs; claimed ones stay
stop_airlockd
left=$(ls "$T/state/ca" | wc -l)
persisted=$(ls "$T/state/sandboxes" | wc -l)
[ "$left" = "$persisted" ] ||
    fail "$left CA directories left for $persisted persisted sandboxes"
ok "warm sandboxes removed at shutdown ($persisted claimed one kept)"

# backend qemu without its guest image is refused with FILE:LINE:COL
sed 's/backend: none/backend: qemu/' "$T/airlock.yaml" >"$T/qemu.yaml"
"$AIRLOCKD" -c "$T/qemu.yaml" -t >"$T/t.out" 2>&1 && fail "backend qemu accepted without kernel/initrd"
grep -q "qemu.yaml:[0-9]*:[0-9]*: launcher backend \"qemu\" needs" \
    "$T/t.out" || fail "no FILE:LINE:COL for backend qemu: $(cat "$T/t.out")"
ok "launcher.backend qemu without listeners and guest image refused"
finish
