#!/bin/sh
# Approval holds on HTTP/2 (issue 21.1): a stream that leaves while held
# for an operator is noticed at once, like an HTTP/1 client (513): a
# stream the client resets (RST_STREAM CANCEL), and the streams of an h2
# connection that closes. Their pending entries go away within 1 s
# (ask.timeout 20 s), each gets its audit record ("client left while held
# for approval"), the origin never sees them; a stream beside them on the
# same connection is still held and completes once approved. Real
# client: python-h2 (Debian python3-h2) through CONNECT, intercepted TLS.
. "$top_srcdir/tests/integration/lib.sh"

SYS_PYTHON=${SYS_PYTHON:-/usr/bin/python3}
"$SYS_PYTHON" -c "import h2" 2>/dev/null ||
    hard_error "python3-h2 missing (scripts/install-deps.sh --test)"
CTL=$top_builddir/src/airlockctl
[ -x "$CTL" ] || hard_error "$CTL not built"
sh "$top_srcdir/tests/harness/mkpki.sh" "$T/pki" >"$T/mkpki.log" 2>&1 ||
    hard_error "mkpki.sh: $(cat "$T/mkpki.log")"
start_origin origin -C "$T/pki/good.crt" -K "$T/pki/good.key"
AIRLOCK_PORT=$(free_port)
{
	config_common "$AIRLOCK_PORT" a
	cat <<YAML
ask: {timeout: 20s}
upstream:
  ca_file: $T/pki/ca.crt
  allow_networks: ["127.0.0.1/32"]
  hosts: {"api.test": "127.0.0.1"}
policies:
  - name: p
    rules:
      - {host: "api.test", ports: [$ORIGIN_PORT], action: ask}
sandboxes:
  - {id: a, policy: p}
YAML
} >"$T/airlock.yaml"
start_airlockd "$T/airlock.yaml"
wait_admin
export AIRLOCK_PORT ORIGIN_PORT T CTL

PYTHONPATH=$top_srcdir/tests/integration "$SYS_PYTHON" - <<'PY' ||
import json, os, subprocess, time
import h2.errors
import itlib, h2lib

ap, op = itlib.env_int("AIRLOCK_PORT"), itlib.env_int("ORIGIN_PORT")
T, CTL = os.environ["T"], os.environ["CTL"]
audit, ca = T + "/audit.jsonl", T + "/state/ca/a/ca.crt"
t = itlib.Checks()

def pending():
    p = subprocess.run([CTL, "-c", T + "/airlock.yaml", "--json", "pending"],
                       capture_output=True, text=True, timeout=30)
    return json.loads(p.stdout)["pending"] if p.returncode == 0 else None

def held(path, limit=5.0):
    end = time.time() + limit
    while time.time() < end:
        m = [e for e in pending() or [] if e["path"] == path]
        if m:
            return m[0]
        time.sleep(0.05)
    return None

def gone_within(paths, limit=1.0):
    t0 = time.time()
    while time.time() - t0 < limit:
        if not any(e["path"] in paths for e in pending() or []):
            return time.time() - t0
        time.sleep(0.05)
    return None

def origin_paths():
    try:
        return [l.split()[1] for l in open(T + "/origin.log")
                if l.startswith(("GET ", "POST "))]
    except FileNotFoundError:
        return []

def left(path):
    r = itlib.audit_wait(audit, lambda r: r.get("path") == path, 5)
    # as for HTTP/1 (513): the reason says it, no status, nothing sent
    t.ok(r is not None and r.get("http") == "2" and "status" not in r and
         r.get("bytes_out") == 0 and
         "client left while held for approval" in r.get("reason", ""),
         "audit of %s: the client left (h2)" % path, str(r))

# 1. a stream reset by the client while held; its neighbour stays held
c = h2lib.H2Conn(ap, "api.test:%d" % op, ca)
t.ok(c.alpn == "h2", "ALPN h2", c.alpn)
s1 = c.request("GET", "/json/8?rst")
s2 = c.request("GET", "/json/16")
e1, e2 = held("/json/8"), held("/json/16")
t.ok(e1 is not None and e2 is not None, "both streams held", str(pending()))
c.h2.reset_stream(s1, h2.errors.ErrorCodes.CANCEL)
c.flush()
dt = gone_within(("/json/8",))
t.ok(dt is not None, "reset stream: pending entry gone within 1 s "
     "(ask.timeout 20 s)", str(pending()))
t.ok(any(e["path"] == "/json/16" for e in pending() or []),
     "the other stream is still held", str(pending()))
left("/json/8")
if e2 is not None:
    p = subprocess.run([CTL, "-c", T + "/airlock.yaml", "approve", e2["id"]],
                       capture_output=True, text=True, timeout=30)
    t.ok(p.returncode == 0, "approve the other stream", p.stderr)
st = c.wait([s2], 10)[0]
t.ok(st.status == 200 and len(st.body) == 16,
     "the approved stream completes on the same connection", repr(st))
c.close()

# 2. the h2 connection closes while two streams are held
c = h2lib.H2Conn(ap, "api.test:%d" % op, ca)
c.request("GET", "/json/32")
c.request("GET", "/json/48")
t.ok(held("/json/32") is not None and held("/json/48") is not None,
     "two streams held on a second connection", str(pending()))
c.close()
dt = gone_within(("/json/32", "/json/48"))
t.ok(dt is not None, "connection closed: both pending entries gone within "
     "1 s", str(pending()))
left("/json/32")
left("/json/48")

paths = origin_paths()
t.ok(not any(p.startswith(("/json/8", "/json/32", "/json/48"))
             for p in paths), "the origin never saw a stream that left",
     str(paths))
t.ok(paths.count("/json/16") == 1, "the origin saw the approved stream "
     "once", str(paths))
t.done()
PY
    check_fail "h2 streams that leave while held"
stop_airlockd
check_sanitizers
finish
