"""Helpers for the fault suite (tests/integration/33x-34x-fault-*.sh), on
top of itlib: read a response to its end whatever happens and say whether
it was complete, airlockd's open descriptors and memory, the admin
/metrics over the unix socket, latency samples.
"""

import json
import os
import socket
import ssl
import time

import itlib


def slurp(sock, limit):
    """Every byte until the peer ends the stream; (bytes, how, seconds):
    how is "eof" (FIN or TLS close), "reset" (RST or a TLS session cut
    without close_notify) or "timeout" (still open after <limit> s)."""
    t0 = time.time()
    got = b""
    sock.settimeout(limit)
    how = "eof"
    try:
        while True:
            d = sock.recv(65536)
            if not d:
                break
            got += d
            sock.settimeout(max(0.05, limit - (time.time() - t0)))
    except socket.timeout:
        how = "timeout"
    except (ConnectionResetError, BrokenPipeError):
        how = "reset"
    except ssl.SSLError:
        # SSLEOFError and friends: the session ended without close_notify
        how = "reset"
    return got, how, time.time() - t0


def parse(got):
    """What a client makes of <got>: dict with status (None: no head),
    headers (lower-case names), body (decoded), complete (the framing said
    the message ended exactly here; EOF-delimited bodies count as complete
    only when nothing else said otherwise, and the caller checks how the
    stream ended)."""
    out = {"status": None, "headers": {}, "body": b"", "complete": False,
           "framing": None}
    i = got.find(b"\r\n\r\n")
    if i < 0:
        return out
    lines = got[:i].split(b"\r\n")
    try:
        out["status"] = int(lines[0].split(b" ")[1])
    except (IndexError, ValueError):
        return out
    for ln in lines[1:]:
        k, _, v = ln.decode("latin-1").partition(":")
        out["headers"][k.strip().lower()] = v.strip()
    rest = got[i + 4:]
    h = out["headers"]
    if "chunked" in h.get("transfer-encoding", "").lower():
        out["framing"] = "chunked"
        body = b""
        while True:
            j = rest.find(b"\r\n")
            if j < 0:
                break
            try:
                n = int(rest[:j].split(b";")[0], 16)
            except ValueError:
                break
            if n == 0:
                out["complete"] = rest[j + 2:j + 4] == b"\r\n"
                break
            if len(rest) < j + 2 + n + 2:
                body += rest[j + 2:j + 2 + n]
                break
            body += rest[j + 2:j + 2 + n]
            rest = rest[j + 2 + n + 2:]
        out["body"] = body
    elif "content-length" in h:
        out["framing"] = "length"
        n = int(h["content-length"])
        out["body"] = rest[:n]
        out["complete"] = len(rest) >= n
    else:
        out["framing"] = "eof"
        out["body"] = rest
        out["complete"] = True
    return out


def json_body(p):
    try:
        return json.loads(p["body"].decode())
    except (ValueError, UnicodeDecodeError):
        return None


def fd_count(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


def accept_queue(port):
    """Connections waiting in the accept queues of the listening sockets
    on 127.0.0.1:<port> (the rx_queue of LISTEN rows in /proc/net/tcp)."""
    n = 0
    with open("/proc/net/tcp") as f:
        for ln in f.readlines()[1:]:
            v = ln.split()
            if v[3] == "0A" and int(v[1].split(":")[1], 16) == port:
                n += int(v[4].split(":")[1], 16)
    return n


def status_kb(pid, key):
    with open("/proc/%d/status" % pid) as f:
        for ln in f:
            if ln.startswith(key + ":"):
                return int(ln.split()[1])
    return None


def metrics(sock_path, token_file):
    """GET /metrics on the admin unix socket: {name{labels}: value}."""
    with open(token_file) as f:
        tok = f.read().strip()
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(10)
    s.connect(sock_path)
    s.sendall(b"GET /metrics HTTP/1.1\r\nHost: airlock\r\nAuthorization: "
              b"Bearer " + tok.encode() + b"\r\nConnection: close\r\n\r\n")
    got, _, _ = slurp(s, 10)
    s.close()
    p = parse(got)
    if p["status"] != 200:
        raise RuntimeError("metrics: %r" % got[:200])
    out = {}
    for ln in p["body"].decode().splitlines():
        if ln.startswith("#") or not ln.strip():
            continue
        k, _, v = ln.rpartition(" ")
        out[k] = float(v)
    return out


def wait_for(pred, limit, step=0.05):
    """Poll <pred> until true or <limit> seconds; its last value."""
    end = time.time() + limit
    while True:
        v = pred()
        if v or time.time() > end:
            return v
        time.sleep(step)


def median(xs):
    s = sorted(xs)
    return s[len(s) // 2] if s else None


def pct(xs, p):
    s = sorted(xs)
    return s[min(len(s) - 1, int(len(s) * p))] if s else None
