#!/usr/bin/env python3
"""Claim latency through the admin API (issue 7, point 9).

claimbench.py ADMIN_ADDR TOKEN_FILE N [POLICY] [RATE]

Claims N sandboxes one after another over one keep-alive connection to the
admin API (unix:PATH or HOST:PORT), timing each POST /v1/sandboxes/claim
from the request to the whole answer, then deletes them (not timed). RATE (claims per second) paces them
like a stream of agents arriving; without it they go back to back.
Prints one JSON line: count, warm and cold claims, p50/p90/p99/max in ms,
and sandboxes per second. Run it against a gateway whose launcher.pool.warm
covers N for warm figures, or warm: 0 for the cold path.
"""
import http.client
import json
import socket
import sys
import time


class UnixConn(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("airlock-admin", timeout=60)
        self.unix_path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        s.connect(self.unix_path)
        self.sock = s


def conn(addr):
    if addr.startswith("unix:"):
        return UnixConn(addr[5:])
    host, port = addr.rsplit(":", 1)
    return http.client.HTTPConnection(host, int(port), timeout=60)


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(len(v) * p / 100))]


def main():
    addr, tokfile, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    policy = sys.argv[4] if len(sys.argv) > 4 and sys.argv[4] else None
    rate = float(sys.argv[5]) if len(sys.argv) > 5 else 0
    tok = open(tokfile).read().strip()
    h = {"Authorization": "Bearer " + tok, "Content-Type": "application/json"}
    body = json.dumps({"policy": policy} if policy else {})
    c = conn(addr)
    lat, ids, warm = [], [], 0
    t_start = time.perf_counter()
    for k in range(n):
        if rate > 0:
            due = t_start + k / rate
            now = time.perf_counter()
            if due > now:
                time.sleep(due - now)
        t0 = time.perf_counter()
        c.request("POST", "/v1/sandboxes/claim", body=body, headers=h)
        r = c.getresponse()
        data = r.read()
        lat.append((time.perf_counter() - t0) * 1000)
        if r.status != 200:
            sys.exit("claim: HTTP %d %s" % (r.status, data[:200]))
        a = json.loads(data)
        ids.append(a["id"])
        warm += 1 if a.get("warm") else 0
    elapsed = time.perf_counter() - t_start
    for i in ids:
        c.request("DELETE", "/v1/sandboxes/" + i, headers=h)
        c.getresponse().read()
    print(json.dumps({
        "claims": n, "warm": warm, "cold": n - warm,
        "p50_ms": round(pct(lat, 50), 3), "p90_ms": round(pct(lat, 90), 3),
        "p99_ms": round(pct(lat, 99), 3), "max_ms": round(max(lat), 3),
        "per_second": round(n / elapsed, 1), "paced_at": rate or None}))


if __name__ == "__main__":
    main()
