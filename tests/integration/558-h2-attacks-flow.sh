#!/bin/sh
# The HTTP/2 attack classes 551 does not cover (issue 19 point 4), with real
# frames (python hyperframe/hpack): a WINDOW_UPDATE flood (GOAWAY
# ENHANCE_YOUR_CALM) while a client that downloads and credits its windows
# is not cut; WINDOW_UPDATE of 0 and past 2^31-1 (PROTOCOL_ERROR,
# FLOW_CONTROL_ERROR); more streams than the sandbox's
# max_connections_per_sandbox (RST_STREAM REFUSED_STREAM, the others
# answered); an :authority other than the SNI, and an SNI and :authority
# other than the CONNECT host (403, never forwarded). After each the daemon
# serves another client.
. "$top_srcdir/tests/integration/lib.sh"

SYS_PYTHON=${SYS_PYTHON:-/usr/bin/python3}
"$SYS_PYTHON" -c "import h2, hyperframe, hpack" 2>/dev/null ||
    hard_error "python3-h2 missing (scripts/install-deps.sh --test)"
sh "$top_srcdir/tests/harness/mkpki.sh" "$T/pki" >"$T/mkpki.log" 2>&1 ||
    hard_error "mkpki.sh: $(cat "$T/mkpki.log")"
start_origin origin -C "$T/pki/good.crt" -K "$T/pki/good.key"
AIRLOCK_PORT=$(free_port)
export AIRLOCK_PORT ORIGIN_PORT T
{
	config_common "$AIRLOCK_PORT" a
	cat <<YAML
limits: {h2_max_streams: 10, max_connections_per_sandbox: 4}
upstream:
  ca_file: $T/pki/ca.crt
  allow_networks: ["127.0.0.1/32"]
  hosts: {"api.test": "127.0.0.1", "other.test": "127.0.0.1"}
policies:
  - name: p
    rules:
      - {host: "api.test", ports: [$ORIGIN_PORT]}
      - {host: "other.test", ports: [$ORIGIN_PORT]}
sandboxes:
  - {id: a, policy: p}
YAML
} >"$T/airlock.yaml"
start_airlockd "$T/airlock.yaml"

"$SYS_PYTHON" - <<'PY' || fail "h2 attacks (flow control, streams, authority)"
import os, time, itlib, h2lib
from hyperframe import frame as hf
ap, op = itlib.env_int("AIRLOCK_PORT"), itlib.env_int("ORIGIN_PORT")
T = os.environ["T"]
ca, olog = T + "/state/ca/a/ca.crt", T + "/origin.log"
tgt = "api.test:%d" % op
t = itlib.Checks()
PROTOCOL_ERROR, FLOW_CONTROL, REFUSED, CALM = 1, 3, 7, 11


T0 = time.time()


def still_serves(what):
    print("# %.1fs %s" % (time.time() - T0, what))
    c = h2lib.H2Conn(ap, tgt, ca)
    s = c.request("GET", "/json/12")
    c.wait([s])
    t.ok(c.streams[s].status == 200, what + ": the daemon still serves h2",
         c.streams[s])
    c.close()


def upstream_saw(marker):
    return [x for x in itlib.origin_records(olog) if marker in x]


def wu(sid, n):
    return hf.WindowUpdateFrame(sid, window_increment=n).serialize()


# a WINDOW_UPDATE flood: 20000 frames that ask for nothing
r = h2lib.Raw(ap, tgt, ca)
r.read(1, until=lambda f: isinstance(f, hf.SettingsFrame))
r.send(wu(0, 1) * 20000)
r.read(5, until=lambda f: isinstance(f, hf.GoAwayFrame))
t.ok(r.goaway() == CALM, "20000 WINDOW_UPDATE frames: GOAWAY "
     "ENHANCE_YOUR_CALM", r.goaway())
r.close()
still_serves("after a WINDOW_UPDATE flood")

# a client that credits every DATA frame it gets is not a flood: 2 MB in
# 16 KB DATA frames, a WINDOW_UPDATE on the stream and the connection each
r = h2lib.Raw(ap, tgt, ca)
r.read(1, until=lambda f: isinstance(f, hf.SettingsFrame))
r.send(r.headers(1, r.req_headers(path="/json/2000000")))
got = [0]


def credit(f):
    if isinstance(f, hf.DataFrame) and f.stream_id == 1:
        got[0] += len(f.data)
        if f.flow_controlled_length:
            r.send(wu(1, f.flow_controlled_length) +
                   wu(0, f.flow_controlled_length))
        return "END_STREAM" in f.flags
    return isinstance(f, hf.GoAwayFrame)


r.read(20, until=credit)
t.ok(got[0] == 2000000 and r.goaway() is None, "2 MB downloaded with a "
     "WINDOW_UPDATE pair per DATA frame: whole, no GOAWAY",
     (got[0], r.goaway()))
r.close()

# a WINDOW_UPDATE of 0 and one past 2^31-1 end the connection
for what, frames, want in (
        ("WINDOW_UPDATE increment 0", wu(0, 0), PROTOCOL_ERROR),
        ("connection window past 2^31-1", wu(0, 0x7fffffff), FLOW_CONTROL)):
    r = h2lib.Raw(ap, tgt, ca)
    r.read(1, until=lambda f: isinstance(f, hf.SettingsFrame))
    r.send(frames)
    r.read(5, until=lambda f: isinstance(f, hf.GoAwayFrame))
    t.ok(r.goaway() == want, "%s: GOAWAY %d" % (what, want), r.goaway())
    r.close()
still_serves("after bad WINDOW_UPDATEs")

# streams past max_connections_per_sandbox (4, the h2 connection one of
# them): REFUSED_STREAM on those, the others answered
r = h2lib.Raw(ap, tgt, ca)
r.read(1, until=lambda f: isinstance(f, hf.SettingsFrame))
sids = [1 + 2 * i for i in range(6)]
r.send(b"".join(r.headers(s, r.req_headers(path="/delay/800?m=sbx%d" % s))
                for s in sids))
r.read(8, until=lambda f: all(r.status(s) is not None or
                              r.rst(s) is not None for s in sids))
ok = [s for s in sids if r.status(s) == 200]
refused = [s for s in sids if r.rst(s) == REFUSED]
t.ok(len(ok) == 3 and len(refused) == 3 and r.goaway() is None,
     "6 streams, max_connections_per_sandbox 4: 3 answered, 3 "
     "REFUSED_STREAM", (ok, refused, r.goaway()))
t.ok(len(upstream_saw(b"m=sbx")) == 3, "... only the 3 reached the "
     "upstream", len(upstream_saw(b"m=sbx")))
r.close()
time.sleep(0.3)
still_serves("after streams past the sandbox's limit")

# :authority other than the SNI (the CONNECT host): 403 on that stream
r = h2lib.Raw(ap, tgt, ca)
r.read(1, until=lambda f: isinstance(f, hf.SettingsFrame))
r.authority = "other.test:%d" % op
r.send(r.headers(1, r.req_headers(path="/json/5?m=auth1")))
r.read(5, until=lambda f: r.status(1) is not None)
t.ok(r.status(1) in (403, 421), ":authority other.test, SNI api.test: "
     "%s" % r.status(1), r.status(1))
r.close()
# SNI and :authority agree, but the CONNECT was to another host
try:
    r = h2lib.Raw(ap, tgt, ca, host="other.test")
    r.read(1, until=lambda f: isinstance(f, hf.SettingsFrame))
    r.authority = "other.test:%d" % op
    r.send(r.headers(1, r.req_headers(path="/json/5?m=auth2")))
    r.read(5, until=lambda f: r.status(1) is not None)
    st = r.status(1)
    r.close()
except OSError as e:
    st = "handshake refused: %r" % e
t.ok(st in (403, 421) or (isinstance(st, str) and "refused" in st),
     "CONNECT api.test, SNI and :authority other.test: %s" % st, st)
t.ok(not upstream_saw(b"m=auth"), "... neither forwarded")
still_serves("after a wrong :authority")
t.done()
PY
stop_airlockd
finish
