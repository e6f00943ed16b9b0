"""Hand-built DNS queries for tests/integration/290-dns-stub.sh.

    dnsprobe.py query PORT NAME TYPE [--src IP] [--id N]
        one query; prints {"rcode", "flags", "answers": [[type, ttl,
        data]], "qname"} as JSON, or {"rcode": null} when nothing came back
    dnsprobe.py flood PORT COUNT [--name NAME]
        COUNT queries as fast as the socket takes them; prints counts of
        the answers by rcode, how many got none, and the seconds the
        sending took
    dnsprobe.py malformed PORT
        malformed and odd packets, one at a time, each followed by a good
        query that must still be answered; prints what each got
    dnsprobe.py names PORT COUNT [--src IP]
        COUNT different allowed names (nN.example.com); prints the
        distinct addresses they got
    dnsprobe.py audit FILE
        checks every record of an audit file; prints counts

The stub answers only 127.0.0.1's sandbox in the test config; other
sources use --src (any 127/8 address works on Linux loopback).
"""

import json
import random
import socket
import struct
import sys
import time

TYPES = {"A": 1, "NS": 2, "CNAME": 5, "SOA": 6, "PTR": 12, "MX": 15,
         "TXT": 16, "AAAA": 28, "SRV": 33, "HTTPS": 65, "ANY": 255}
RCODES = ["NOERROR", "FORMERR", "SERVFAIL", "NXDOMAIN", "NOTIMP", "REFUSED"]


def encode_name(name):
    out = b""
    for label in name.rstrip(".").split("."):
        raw = label.encode("latin-1")
        out += bytes([len(raw)]) + raw
    return out + b"\0"


def header(qid, flags=0x0100, qd=1, an=0, ns=0, ar=0):
    return struct.pack(">HHHHHH", qid, flags, qd, an, ns, ar)


def query(name, qtype, qid=None, qclass=1, flags=0x0100):
    if qid is None:
        qid = random.randint(0, 0xffff)
    if isinstance(qtype, str):
        qtype = TYPES[qtype]
    return qid, header(qid, flags) + encode_name(name) + \
        struct.pack(">HH", qtype, qclass)


def read_name(pkt, off, depth=0):
    labels = []
    while True:
        n = pkt[off]
        if n & 0xc0 == 0xc0:
            ptr = ((n & 0x3f) << 8) | pkt[off + 1]
            if depth > 20:
                raise ValueError("loop")
            rest, _ = read_name(pkt, ptr, depth + 1)
            labels.append(rest)
            return ".".join(x for x in labels if x), off + 2
        off += 1
        if n == 0:
            return ".".join(labels), off
        labels.append(pkt[off:off + n].decode("latin-1"))
        off += n


def parse(pkt):
    qid, flags, qd, an, _ns, _ar = struct.unpack(">HHHHHH", pkt[:12])
    rc = flags & 0xf
    res = {"id": qid, "rcode": RCODES[rc] if rc < len(RCODES) else rc,
           "flags": flags, "tc": bool(flags & 0x0200), "qname": None,
           "answers": []}
    try:
        res.update(parse_sections(pkt, qd, an))
    except (IndexError, ValueError, struct.error):
        res["cut"] = True     # truncated (TC) or not parseable
    return res


def parse_sections(pkt, qd, an):
    off = 12
    qname = None
    for _ in range(qd):
        name, off = read_name(pkt, off)
        if qname is None:
            qname = name
        off += 4
    answers = []
    for _ in range(an):
        _name, off = read_name(pkt, off)
        rtype, _rclass, ttl, rdlen = struct.unpack(">HHIH",
                                                   pkt[off:off + 10])
        off += 10
        rdata = pkt[off:off + rdlen]
        off += rdlen
        if rtype == 1 and rdlen == 4:
            data = socket.inet_ntoa(rdata)
        else:
            data = rdata.hex()
        answers.append([rtype, ttl, data])
    return {"qname": qname, "answers": answers}


def sock(src="127.0.0.1", timeout=1.0):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((src, 0))
    s.settimeout(timeout)
    return s


def exchange(port, pkt, src="127.0.0.1", timeout=1.0, qid=None):
    """Send one packet; the parsed answer with our id, or None."""
    s = sock(src, timeout)
    try:
        s.sendto(pkt, ("127.0.0.1", port))
        end = time.time() + timeout
        while time.time() < end:
            try:
                data, _ = s.recvfrom(4096)
            except socket.timeout:
                return None
            if qid is None or (len(data) >= 2 and
                               struct.unpack(">H", data[:2])[0] == qid):
                return parse(data)
        return None
    finally:
        s.close()


def cmd_query(args):
    port, name, qtype = int(args[0]), args[1], args[2]
    src = "127.0.0.1"
    qid = None
    rest = args[3:]
    while rest:
        if rest[0] == "--src":
            src = rest[1]
        elif rest[0] == "--id":
            qid = int(rest[1])
        rest = rest[2:]
    qid, pkt = query(name, qtype, qid)
    r = exchange(port, pkt, src, qid=qid)
    print(json.dumps(r if r is not None else {"rcode": None}))


def cmd_flood(args):
    port, count = int(args[0]), int(args[1])
    name = "api.test"
    if len(args) > 3 and args[2] == "--name":
        name = args[3]
    s = sock(timeout=0.05)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
    start = time.time()
    ids = set()
    counts = {}
    got = 0
    for i in range(count):
        qid, pkt = query(name, "A", qid=i & 0xffff)
        ids.add(qid)
        s.sendto(pkt, ("127.0.0.1", port))
        if i % 20 == 19:
            # a breath now and then: the stub's socket buffer would drop
            # a flood this fast, which tests nothing of the stub
            time.sleep(0.002)
        # drain as we go, so the socket buffer never drops answers
        while True:
            try:
                data, _ = s.recvfrom(4096)
            except (socket.timeout, BlockingIOError):
                break
            r = parse(data)
            counts[r["rcode"]] = counts.get(r["rcode"], 0) + 1
            got += 1
            s.settimeout(0)
        s.settimeout(0)
    sent = time.time() - start
    s.settimeout(0.5)
    while True:
        try:
            data, _ = s.recvfrom(4096)
        except (socket.timeout, BlockingIOError):
            break
        r = parse(data)
        counts[r["rcode"]] = counts.get(r["rcode"], 0) + 1
        got += 1
    counts["none"] = count - got
    counts["seconds"] = round(sent, 3)
    print(json.dumps(counts, sort_keys=True))


def cmd_names(args):
    port, count = int(args[0]), int(args[1])
    src = args[3] if len(args) > 3 and args[2] == "--src" else "127.0.0.1"
    addrs = {}
    for i in range(count):
        name = "n%d.example.com" % i
        qid, pkt = query(name, "A")
        r = exchange(port, pkt, src, qid=qid)
        if r is None or not r["answers"]:
            addrs[name] = None
        else:
            addrs[name] = r["answers"][0][2]
        time.sleep(0.025)    # stay under 50/s
    vals = [v for v in addrs.values() if v]
    print(json.dumps({"names": count, "answered": len(vals),
                      "distinct": len(set(vals))}))


def malformed_cases():
    """(label, packet, expected): expected is an rcode name, or None for
    'no answer at all'."""
    good = encode_name("api.test") + struct.pack(">HH", 1, 1)
    cases = []
    for n in range(12):
        cases.append(("header cut at %d" % n, header(1)[:n], None))
    cases.append(("header only, qdcount 1", header(2), None))
    # libevent's parser drops a query without a question
    cases.append(("qdcount 0", header(3, qd=0), None))
    cases.append(("question without type", header(4) +
                  encode_name("api.test"), None))
    cases.append(("label length 64", header(5) + b"\x40" + b"a" * 64 +
                  b"\0" + struct.pack(">HH", 1, 1), None))
    cases.append(("label past the end", header(6) + b"\x3fabc", None))
    cases.append(("label length 200", header(7) + b"\xc8" + b"a" * 30,
                  None))
    cases.append(("pointer to itself", header(8) + b"\xc0\x0c" +
                  struct.pack(">HH", 1, 1), None))
    cases.append(("pointer loop of two", header(9) + b"\x01a\xc0\x0e" +
                  b"\x01b\xc0\x0c" + struct.pack(">HH", 1, 1), None))
    cases.append(("pointer out of the packet", header(10) + b"\xff\xff" +
                  struct.pack(">HH", 1, 1), None))
    # reads the flags as a label holding a NUL: an empty, invalid name
    cases.append(("pointer into the header", header(11) + b"\xc0\x02" +
                  struct.pack(">HH", 1, 1), "NXDOMAIN"))
    long_name = b"".join(b"\x3f" + b"a" * 63 for _ in range(5)) + b"\0"
    cases.append(("name over 255 bytes", header(12) + long_name +
                  struct.pack(">HH", 1, 1), None))
    cases.append(("NUL inside a label", header(13) + b"\x07api\0bad" +
                  b"\x04test\0" + struct.pack(">HH", 1, 1), "NXDOMAIN"))
    cases.append(("dot inside a label", header(14) + b"\x07api.bad" +
                  b"\x04test\0" + struct.pack(">HH", 1, 1), "NXDOMAIN"))
    cases.append(("binary label", header(15) + b"\x04\xff\xfe\x00\x01" +
                  b"\x04test\0" + struct.pack(">HH", 1, 1), "NXDOMAIN"))
    cases.append(("two questions", header(16, qd=2) + good + good,
                  "FORMERR"))
    cases.append(("four questions", header(17, qd=4) + good * 4,
                  "FORMERR"))
    cases.append(("five questions (socket filter)", header(18, qd=5) +
                  good * 5, None))
    cases.append(("qdcount 65535, one question", header(19, qd=65535) +
                  good, None))
    cases.append(("a response (QR set)", header(20, flags=0x8100) + good,
                  None))
    for op in (1, 2, 4, 5, 15):
        cases.append(("opcode %d (socket filter)" % op,
                      header(21 + op, flags=0x0100 | (op << 11)) + good,
                      None))
    cases.append(("trailing garbage", header(40) + good + b"\xde\xad" * 50,
                  "NOERROR"))
    cases.append(("answer records in a query", header(41, an=3, ns=2,
                  ar=9) + good, "NOERROR"))
    cases.append(("class CH", header(42) + encode_name("version.bind") +
                  struct.pack(">HH", 16, 3), "REFUSED"))
    cases.append(("type 0", header(43) + encode_name("api.test") +
                  struct.pack(">HH", 0, 1), "REFUSED"))
    return cases


def opcode_overflow():
    """A STATUS query whose echoed questions do not fit libevent's 1500
    byte answer buffer: 127 one-byte labels fill its compression table,
    then questions that point to a 250-byte name must be written out in
    full. Without the socket filter libevent answers NOTIMP itself and
    leaks the request."""
    # 120 + 10 label suffixes: libevent's 128-entry table is full
    fill = b"\x01a" * 120 + b"\0" + struct.pack(">HH", 1, 1)
    fill += b"\x01c" * 10 + b"\0" + struct.pack(">HH", 1, 1)
    big = b"".join(b"\x3e" + b"b" * 62 for _ in range(4)) + b"\0"
    pkt = header(60, flags=0x1100, qd=3) + fill
    big_off = len(pkt)
    pkt += big + struct.pack(">HH", 1, 1)
    n = 3
    while len(pkt) + 6 <= 1400:
        pkt += struct.pack(">H", 0xc000 | big_off) + struct.pack(">HH", 1, 1)
        n += 1
    return pkt[:4] + struct.pack(">H", n) + pkt[6:]


def cmd_malformed(args):
    port = int(args[0])
    results = []
    rng = random.Random(290)
    cases = malformed_cases()
    cases.append(("STATUS query overflowing libevent's answer",
                  opcode_overflow(), None))
    cases.append(("QUERY overflowing libevent's answer (socket filter)",
                  opcode_overflow()[:2] + b"\x01\x00" + opcode_overflow()[4:],
                  None))
    for i in range(100):
        # half noise, half a plausible header over noise (for the parser)
        n = rng.randint(0, 600)
        body = bytes(rng.getrandbits(8) for _ in range(n))
        if i % 2:
            body = header(100 + i, qd=rng.randint(0, 4)) + body
        cases.append(("random %d" % i, body, "any"))
    for label, pkt, want in cases:
        r = exchange(port, pkt, timeout=0.1 if want in (None, "any")
                     else 1.0)
        got = r["rcode"] if r is not None else None
        qid, good = query("api.test", "A")
        alive = exchange(port, good, qid=qid)
        ok_alive = alive is not None and alive["rcode"] == "NOERROR"
        ok = ok_alive and (want == "any" or got == want)
        results.append({"case": label, "want": want, "got": got,
                        "alive": ok_alive, "ok": ok})
        time.sleep(0.045)   # stay under the sandbox's rate limit
    print(json.dumps(results))


def cmd_audit(args):
    """Every line must be JSON with the DNS fields; prints a summary."""
    path = args[0]
    out = {"lines": 0, "bad": [], "rcodes": {}, "limit_records": 0,
           "limit_refused": 0, "limit_dropped": 0, "unknown": 0,
           "by_sandbox": {}}
    with open(path, "rb") as f:
        for n, raw in enumerate(f, 1):
            out["lines"] += 1
            try:
                r = json.loads(raw.decode("utf-8"))
            except ValueError as e:
                out["bad"].append("line %d: %s" % (n, e))
                continue
            for k in ("ts", "id", "client", "mode", "proto", "decision",
                      "dns_rcode"):
                if k not in r:
                    out["bad"].append("line %d: no %s" % (n, k))
            if r.get("proto") != "dns" or r.get("mode") != "transparent":
                out["bad"].append("line %d: proto/mode" % n)
            for k in ("status", "port", "method", "path"):
                if k in r:
                    out["bad"].append("line %d: has %s" % (n, k))
            rc = r.get("dns_rcode")
            out["rcodes"][rc] = out["rcodes"].get(rc, 0) + 1
            sb = r.get("sandbox", "-")
            out["by_sandbox"][sb] = out["by_sandbox"].get(sb, 0) + 1
            reason = r.get("reason", "")
            if reason.startswith("dns rate limit: "):
                out["limit_records"] += 1
                cnt = int(reason.split()[3])
                if "dropped unanswered" in reason:
                    out["limit_dropped"] += cnt
                else:
                    out["limit_refused"] += cnt
            elif reason == "unknown source address":
                out["unknown"] += 1
    print(json.dumps(out, sort_keys=True))


def main():
    cmds = {"query": cmd_query, "flood": cmd_flood,
            "malformed": cmd_malformed, "names": cmd_names,
            "audit": cmd_audit}
    if len(sys.argv) < 2 or sys.argv[1] not in cmds:
        sys.stderr.write(__doc__)
        sys.exit(2)
    cmds[sys.argv[1]](sys.argv[2:])


if __name__ == "__main__":
    main()
