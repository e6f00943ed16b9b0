#!/bin/sh
# Reloads reach open intercepted TLS sessions (issue 14, point 8). python's
# http.client keeps one HTTPS session per sandbox open through the proxy
# (CONNECT with set_tunnel, keep-alive) while the config changes under it:
#   - secret files rewritten + SIGHUP: the next request of the session
#     carries the new values (injected header and substituted placeholder)
#   - caps.requests: 0 + POST /v1/reload: the next request is 402
#   - the rule removed + SIGHUP: the next request is 403 inside TLS (and
#     on a plain HTTP keep-alive connection of the explicit proxy), while
#     a request in flight across that reload (slow upstream) completes 200
#     under the config it started with
#   - the same reload removes sandbox c, changes the token of sandbox d
#     (their sessions get 403) and moves sandbox e to another policy that
#     still allows the host (its session goes on, 200)
# Every step checks that the session is the same TLS connection.
. "$top_srcdir/tests/integration/lib.sh"

command -v openssl >/dev/null 2>&1 || skip "openssl CLI not found"
sh "$top_srcdir/tests/harness/mkpki.sh" "$T/pki" >"$T/mkpki.log" 2>&1 ||
    hard_error "mkpki.sh: $(cat "$T/mkpki.log")"
start_origin plain
HTTP_PORT=$ORIGIN_PORT
start_origin origin -C "$T/pki/good.crt" -K "$T/pki/good.key"
TLS_PORT=$ORIGIN_PORT
AIRLOCK_PORT=$(free_port)
export AIRLOCK_PORT TLS_PORT HTTP_PORT T

# the configs and secret files are written by the python below
cat >"$T/cfg.py" <<'PY'
"""write(step, gen): the config of <step> and secret files of <gen>.
step 0: the start; 1: caps.requests 0 on policy p; 2: the api.test rule
of p gone, sandbox c gone, d's token changed, e under policy q."""
import os

T = os.environ["T"]
AP, TP = os.environ["AIRLOCK_PORT"], os.environ["TLS_PORT"]
HP = os.environ["HTTP_PORT"]


def put(path, text, mode=0o644):
    fd = os.open(path + ".tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    os.write(fd, text.encode())
    os.close(fd)
    os.rename(path + ".tmp", path)


def write(step, gen=None):
    if gen is not None:
        for s in ("bearer", "ph"):
            put("%s/%s.secret" % (T, s), "%s-value-gen%d" % (s, gen), 0o600)
    rule = ('{host: "api.test", ports: [%s], paths: ["/echo", "/delay/*"], '
            'secrets: [bearer]}' % TP)
    # plain HTTP too, for a keep-alive connection on the explicit proxy
    rule += '\n      - {host: "api.test", ports: [%s], paths: ["/echo"]}' % HP
    if step >= 2:
        rule = '{host: "other.test", ports: [%s]}' % TP
    caps = "    caps: {requests: 0}\n" if step == 1 else ""
    sbx_c = ('  - {id: c, policy: p, token: "literal:tok-c"}\n'
             if step < 2 else "")
    put(T + "/airlock.yaml", """listen: {proxy: "127.0.0.1:%(ap)s"}
state_dir: %(T)s/state
workers: 2
audit: {file: %(T)s/audit.jsonl}
upstream:
  ca_file: %(T)s/pki/ca.crt
  allow_networks: ["127.0.0.1/32"]
  hosts: {"api.test": "127.0.0.1"}
secrets:
  - name: bearer
    source: file:bearer.secret
    hosts: ["api.test"]
    inject: {header: Authorization, value: "Bearer ${secret}"}
  - name: ph
    source: file:ph.secret
    hosts: ["api.test"]
    placeholder: "airlock:ph"
policies:
  - name: p
    rules:
      - %(rule)s
%(caps)s  - name: q
    rules:
      - {host: "api.test", ports: [%(tp)s], paths: ["/echo"], secrets: [bearer]}
sandboxes:
  - {id: a, policy: p, token: "literal:tok-a"}
  - {id: b, policy: p, token: "literal:tok-b"}
%(sbx_c)s  - {id: d, policy: p, token: "literal:%(tok_d)s"}
  - {id: e, policy: %(pol_e)s, token: "literal:tok-e"}
""" % {"ap": AP, "tp": TP, "T": T, "rule": rule, "caps": caps,
       "sbx_c": sbx_c, "tok_d": "tok-d-new" if step >= 2 else "tok-d",
       "pol_e": "q" if step >= 2 else "p"})


if __name__ == "__main__":
    write(0, 1)
PY
PYTHONPATH=$T:$PYTHONPATH
export PYTHONPATH
"$PYTHON" "$T/cfg.py" || hard_error "cannot write the config"
start_airlockd "$T/airlock.yaml"
wait_admin
export AIRLOCK_PID

"$PYTHON" - <<'PY' || fail "reload reaches open TLS sessions"
import base64, http.client, json, os, signal, ssl, threading, time
import adminlib as A
import cfg
import itlib

T = os.environ["T"]
ap, tp = itlib.env_int("AIRLOCK_PORT"), itlib.env_int("TLS_PORT")
pid = itlib.env_int("AIRLOCK_PID")
audit = T + "/audit.jsonl"
addr = "unix:%s/state/admin.sock" % T
tok = A.token(T + "/state")
t = itlib.Checks()


def session(sid, token):
    ctx = ssl.create_default_context(cafile="%s/state/ca/%s/ca.crt" % (T, sid))
    c = http.client.HTTPSConnection("127.0.0.1", ap, context=ctx, timeout=20)
    cred = base64.b64encode(("%s:%s" % (sid, token)).encode()).decode()
    c.set_tunnel("api.test", tp, headers={"Proxy-Authorization":
                                          "Basic " + cred})
    return c


seq = [0]


def get(c, path, headers=None):
    """One request on session <c>: (response, body, what the upstream
    got). Echoed secrets come back redacted, so the origin's own log
    tells what went upstream (records found by an X-Seq header)."""
    seq[0] += 1
    h = dict(headers or {}, **{"X-Seq": str(seq[0])})
    c.request("GET", path, headers=h)
    r = c.getresponse()
    body = r.read()
    mark = b"X-Seq: %d\r\n" % seq[0]
    up = b""
    end = time.time() + (5 if r.status == 200 else 0)
    while True:
        got = [x for x in itlib.origin_records(T + "/origin.log") if mark in x]
        if got or time.time() >= end:
            break
        time.sleep(0.05)
    return r, body, got[0] if got else b""


def reloads_ok():
    code, h, b = A.call(addr, "GET", "/v1/status", token=tok)
    assert code == 200, (code, b)
    return b["reloads"]["ok"], b["reloads"]["failed"]


def reload(how, step, secrets=None):
    """Write config <step> (and secrets), reload by <how>, wait until the
    gateway took it."""
    cfg.write(step, secrets)
    ok0, failed0 = reloads_ok()
    if how == "hup":
        os.kill(pid, signal.SIGHUP)
    else:
        code, h, b = A.call(addr, "POST", "/v1/reload", token=tok)
        assert code == 200, (code, b)
    end = time.time() + 15
    while time.time() < end:
        ok, failed = reloads_ok()
        assert failed == failed0, "reload %d failed" % step
        if ok > ok0:
            time.sleep(0.3)	# the workers take it from their loops
            return
        time.sleep(0.05)
    raise AssertionError("reload %d not taken" % step)


def same(c, sock, what):
    t.ok(c.sock is sock and sock.fileno() != -1,
         "%s: still the same connection" % what)


def denied(r, body, status, code, what, reason_part=None):
    try:
        j = json.loads(body)
    except ValueError:
        j = {}
    good = (r.status == status and j.get("error") == code and
            j.get("request_id") == r.getheader("X-Airlock-Request-Id"))
    if reason_part is not None:
        good = good and reason_part in j.get("reason", "")
    t.ok(good, what, (r.status, body[:300]))
    return j


def plain(c):
    """A request on the plain keep-alive connection <c> (sandbox a)."""
    c.request("GET", "http://api.test:%d/echo" % itlib.env_int("HTTP_PORT"),
              headers={"Proxy-Authorization": "Basic " + base64.b64encode(
                  b"a:tok-a").decode()})
    r = c.getresponse()
    return r, r.read()


# --- open a session per sandbox, one request each; and a plain one
pc = http.client.HTTPConnection("127.0.0.1", ap, timeout=20)
r, body = plain(pc)
t.ok(r.status == 200, "plain keep-alive connection: 200", (r.status, body))
psock = pc.sock
sess = {}
for sid in "abcde":
    c = session(sid, "tok-" + sid)
    r, body, up = get(c, "/echo", {"X-Key": "airlock:ph"})
    t.ok(r.status == 200 and b"Bearer bearer-value-gen1" in up,
         "sandbox %s: 200 with the secret of generation 1" % sid,
         (r.status, body[:300]))
    sess[sid] = (c, c.sock)
ca, sa = sess["a"]
t.ok(b"X-Key: ph-value-gen1" in get(ca, "/echo", {"X-Key": "airlock:ph"})[2],
     "placeholder substituted with generation 1")
same(ca, sa, "second request")

# --- rotate the secrets (file: sources rewritten), SIGHUP
reload("hup", 0, secrets=2)
r, body, up = get(ca, "/echo", {"X-Key": "airlock:ph"})
t.ok(r.status == 200 and b"Authorization: Bearer bearer-value-gen2" in up,
     "after the rotation the upstream gets the new injected secret",
     up[:400])
t.ok(b"X-Key: ph-value-gen2" in up,
     "after the rotation the placeholder becomes the new value", up[:400])
t.ok(up and b"gen1" not in up, "no old secret value goes upstream",
     up[:400])
same(ca, sa, "rotation")

# --- caps.requests: 0, POST /v1/reload
reload("api", 1)
r, body, up = get(ca, "/echo")
denied(r, body, 402, "budget_exceeded",
       "caps.requests 0 after a reload: next request in the session 402")
same(ca, sa, "caps reload")
r, body = plain(pc)
denied(r, body, 402, "budget_exceeded",
       "... and on an open plain HTTP keep-alive connection")
same(pc, psock, "plain connection, caps reload")

# --- the rule goes (SIGHUP) while sandbox b has a request in flight
reload("hup", 0)
r, body, up = get(ca, "/echo")
t.ok(r.status == 200, "caps lifted again: 200", (r.status, body[:200]))
t.ok(plain(pc)[0].status == 200, "caps lifted again: 200 on the plain one")
cb, sb = sess["b"]
slow = {}


def slow_request():
    t0 = time.time()
    try:
        rr, bb, _ = get(cb, "/delay/3000")
        slow["r"] = (rr.status, bb, rr.getheader("X-Airlock-Request-Id"))
    except Exception as e:
        slow["r"] = ("error %r" % e, b"", None)
    slow["t"] = time.time() - t0


th = threading.Thread(target=slow_request)
th.start()
time.sleep(0.8)
reload("hup", 2)
r, body, up = get(ca, "/echo")
j = denied(r, body, 403, "denied",
           "rule removed by a reload: next request in the session is a JSON "
           "403 inside TLS")
same(ca, sa, "rule removal")
r, body = plain(pc)
denied(r, body, 403, "denied",
       "... and on an open plain HTTP keep-alive connection")
same(pc, psock, "plain connection, rule removal")
rec = itlib.audit_wait(audit, lambda x: x.get("id") == j.get("request_id"), 10)
t.ok(rec is not None and rec.get("decision") == "deny" and
     rec.get("status") == 403 and rec.get("sandbox") == "a" and
     rec.get("tls") == "intercept", "the 403 is audited", rec)
th.join(20)
st, bb, rid = slow.get("r", (None, b"", None))
t.ok(st == 200 and bb == b"ok",
     "a request in flight across the reload completes under its config",
     (st, bb[:200], slow.get("t")))
t.ok(slow.get("t", 0) >= 2.5, "it was still in flight at the reload",
     slow.get("t"))
rec = itlib.audit_wait(audit, lambda x: x.get("id") == rid, 10)
t.ok(rec is not None and rec.get("decision") == "allow" and
     rec.get("status") == 200 and rec.get("rule") == "p#0",
     "the in-flight request is audited under the old rule", rec)
r, body, up = get(cb, "/echo")
denied(r, body, 403, "denied", "and the next request of that session is 403")
same(cb, sb, "after the in-flight request")

# --- sandboxes the same reload changed
cc, sc = sess["c"]
r, body, up = get(cc, "/echo")
denied(r, body, 403, "denied", "sandbox removed from the file: its session "
       "gets 403", "no longer configured")
cd, sd = sess["d"]
r, body, up = get(cd, "/echo")
denied(r, body, 403, "denied", "sandbox whose token changed: its session "
       "gets 403", "token")
ce, se = sess["e"]
r, body, up = get(ce, "/echo")
t.ok(r.status == 200 and b"Bearer bearer-value-gen2" in up,
     "sandbox moved to another policy that allows the host: 200",
     (r.status, body[:300]))
same(ce, se, "policy change")
r, body, up = get(ce, "/delay/10")
denied(r, body, 403, "denied", "... judged by its new policy (no /delay/*)")
for sid in sess:
    sess[sid][0].close()
pc.close()
t.done()
PY
stop_airlockd
finish
