#!/usr/bin/env python3
"""Write a large airlock config to stdout: SANDBOXES sandboxes spread over
POLICIES policies of RULES rules each (defaults 1000, 100, 5), for
bench/cfgbench (docs/benchmarks.md "Config load")."""
import sys

nsbx = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
npol = int(sys.argv[2]) if len(sys.argv) > 2 else 100
nrules = int(sys.argv[3]) if len(sys.argv) > 3 else 5
out = ["listen:", "  proxy: 127.0.0.1:3128", "limits:",
       "  header_timeout: 30s", "  max_connections: 20000", "secrets:"]
for i in range(npol):
    out += ["  - name: key%d" % i, "    source: literal:sk-bench-%08d" % i,
            "    hosts: [api%d.example.com]" % i,
            "    inject: {header: Authorization, value: \"Bearer ${secret}\"}"]
out.append("policies:")
for p in range(npol):
    out += ["  - name: pol%d" % p, "    caps: {usd: 10, requests: 1000}",
            "    rules:"]
    for r in range(nrules):
        out += ["      - host: \"*.svc%d-%d.example.com\"" % (p, r),
                "        methods: [GET, POST]", "        paths: [\"/v1/*\"]"]
    out += ["      - host: api%d.example.com" % p,
            "        secrets: [key%d]" % p]
out.append("sandboxes:")
for s in range(nsbx):
    out += ["  - id: sbx%d" % s, "    policy: pol%d" % (s % npol),
            "    addresses: [\"10.%d.%d.%d\"]" % (s >> 16 & 255, s >> 8 & 255,
                                                s & 255)]
out += ["pricing:", "  - model: \"gpt-*\"", "    input: 2.5", "    output: 10"]
print("\n".join(out))
