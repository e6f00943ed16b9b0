#!/bin/sh
# HTTP/2 from the client on intercepted TLS (issue 19 point 1): ALPN picks
# h2; every stream is one exchange with its own policy decision and audit
# record ("http": "2"); a denied stream gets the JSON answer on that
# stream while the others on the same connection go on; request bodies
# (with and without content-length), a large download, HEAD, an
# :authority that names another host than the TLS server (403, never
# forwarded), a secret injected into a stream's header. Real clients:
# curl --http2 and python httpx (http2=True) through CONNECT, and
# python-h2 for many streams on one connection. The upstream is HTTP/1.1.
. "$top_srcdir/tests/integration/lib.sh"

SYS_PYTHON=${SYS_PYTHON:-/usr/bin/python3}
"$SYS_PYTHON" -c "import h2, httpx" 2>/dev/null ||
    hard_error "python3-h2 / python3-httpx missing (scripts/install-deps.sh --test)"
sh "$top_srcdir/tests/harness/mkpki.sh" "$T/pki" >"$T/mkpki.log" 2>&1 ||
    hard_error "mkpki.sh: $(cat "$T/mkpki.log")"
start_origin origin -C "$T/pki/good.crt" -K "$T/pki/good.key"
AIRLOCK_PORT=$(free_port)
export AIRLOCK_PORT ORIGIN_PORT T
printf 'tok-secret-550-value' >"$T/key"; chmod 600 "$T/key"
{
	config_common "$AIRLOCK_PORT" a
	cat <<YAML
upstream:
  ca_file: $T/pki/ca.crt
  allow_networks: ["127.0.0.1/32"]
  hosts: {"api.test": "127.0.0.1", "other.test": "127.0.0.1"}
secrets:
  - {name: k, source: "file:$T/key", hosts: ["api.test"], inject: {header: "X-Api-Key", value: "\${secret}"}}
policies:
  - name: p
    rules:
      - {host: "api.test", ports: [$ORIGIN_PORT], paths: ["/json/*", "/echo", "/size/*", "/upload", "/chunked/*"], secrets: [k]}
      - {host: "other.test", ports: [$ORIGIN_PORT]}
sandboxes:
  - {id: a, policy: p}
YAML
} >"$T/airlock.yaml"
start_airlockd "$T/airlock.yaml"
PROXY=http://127.0.0.1:$AIRLOCK_PORT
CA=$T/state/ca/a/ca.crt
U=https://api.test:$ORIGIN_PORT

# curl --http2 through CONNECT: h2 chosen, 200, then a denied path: 403 JSON
out=$(curl -sS -v --http2 -x "$PROXY" --cacert "$CA" -o "$T/c1" \
    -w '%{http_code} %{http_version}' "$U/json/64" 2>"$T/e1")
[ "$out" = "200 2" ] && [ "$(wc -c <"$T/c1")" = 64 ] &&
    grep -q "ALPN: server accepted h2" "$T/e1" ||
    fail "curl --http2: '$out' $(grep -i -E 'alpn|curl:' "$T/e1")"
ok "curl --http2 through CONNECT: ALPN h2, 200, the body"
out=$(curl -sS --http2 -x "$PROXY" --cacert "$CA" -o "$T/c2" \
    -w '%{http_code} %{http_version}' "$U/status/500")
[ "$out" = "403 2" ] && grep -q '"error":"denied"' "$T/c2" ||
    fail "curl --http2 denied path: '$out' $(cat "$T/c2")"
ok "curl --http2: a denied path → 403 with the JSON reason over h2"
# the restriction to HTTP/1.1 still works for a client that asks for it
out=$(curl -sS --http1.1 -x "$PROXY" --cacert "$CA" -o /dev/null \
    -w '%{http_code} %{http_version}' "$U/json/8")
[ "$out" = "200 1.1" ] || fail "curl --http1.1: '$out'"
ok "curl --http1.1 on the same proxy: 200 over HTTP/1.1"

"$SYS_PYTHON" - <<'PY' || fail "h2 streams"
import os, json, itlib, tlslib, h2lib, httpx
ap, op = itlib.env_int("AIRLOCK_PORT"), itlib.env_int("ORIGIN_PORT")
T = os.environ["T"]
audit, ca, olog = T + "/audit.jsonl", T + "/state/ca/a/ca.crt", T + "/origin.log"
tgt = "api.test:%d" % op
t = itlib.Checks()

# ALPN by default: h2 whatever the client's order, else HTTP/1.x
for offer, want in ((["h2", "http/1.0"], "h2"), (["http/1.1", "h2"], "h2"),
                    (["http/1.1"], "http/1.1"), (None, None)):
    x = tlslib.TLSConn(ap, tgt, tlslib.context(ca, alpn=offer), "api.test")
    t.ok(x.tls.selected_alpn_protocol() == want, "ALPN %s → %s" % (offer, want),
         x.tls.selected_alpn_protocol())
    x.close()
x, e, cl = tlslib.TLSConn.attempt(ap, tgt, tlslib.context(ca, alpn=["spdy/3"]),
                                  "api.test")
rec = tlslib.audit_client(audit, cl)
t.ok(x is None and rec is not None and "neither h2 nor HTTP/1.x" in
     (rec.get("reason") or ""), "ALPN [spdy/3] refused, the reason says why",
     (e, rec))

c = h2lib.H2Conn(ap, tgt, ca)
t.ok(c.alpn == "h2", "ALPN h2 selected", c.alpn)
# many streams at once on one connection, one of them denied
sids = [c.request("GET", "/json/%d" % (100 + i)) for i in range(8)]
bad = c.request("GET", "/status/418")
sids.insert(4, bad)
c.wait(sids)
good = [c.streams[i] for i in sids if i != bad]
t.ok(all(s.status == 200 and len(s.body) == 100 + k and s.ended
         for k, s in enumerate(good)), "8 concurrent streams: 200, each "
     "its own body", good)
d = c.streams[bad]
t.ok(d.status == 403 and json.loads(d.body).get("error") == "denied" and
     "/status/418" in json.loads(d.body).get("reason", ""),
     "the denied stream: 403 with the JSON reason on that stream", d)
t.ok(d.header("content-type") == "application/json" and
     d.header("connection") is None, "its head: JSON, no connection field",
     d.headers)
def client_recs():
    return [r for r in itlib.audit_records(audit)
            if r.get("client") == c.client]
itlib.audit_wait(audit, lambda r: len(client_recs()) >= 9)
recs = client_recs()
t.ok(len(recs) >= 9 and all(r.get("http") == "2" and r.get("proto") ==
     "https" and r.get("tls") == "intercept" for r in recs) and
     len(set(r["id"] for r in recs)) == len(recs),
     "one audit record per stream, http \"2\", distinct ids", recs[:3])
den = [r for r in recs if r.get("path") == "/status/418"]
t.ok(len(den) == 1 and den[0]["decision"] == "deny" and den[0]["status"] == 403,
     "the denied stream audited deny 403", den)
t.ok(not [x for x in itlib.origin_records(olog) if b"/status/418" in x],
     "the denied stream never reached the upstream")

# the same connection goes on after the denial
s = c.request("GET", "/echo")
c.wait([s])
e = c.streams[s]
# the upstream echoes the injected secret: the reflection guard redacts it
t.ok(e.status == 200 and b"GET /echo HTTP/1.1" in e.body and
     b"X-Api-Key: [airlock:redacted:k]" in e.body and
     b"tok-secret-550" not in e.body,
     "after it, a stream on the same connection: 200, HTTP/1.1 upstream, "
     "the secret injected (its echo redacted)", e.body[:300])
t.ok(any(b"tok-secret-550-value" in x for x in itlib.origin_records(olog)),
     "the upstream got the secret's value")

# request bodies: content-length given, and not (chunked to HTTP/1.1)
body = os.urandom(300000)
s1 = c.request("POST", "/upload", [("content-length", str(len(body)))], body)
s2 = c.request("POST", "/upload", [], body)
c.wait([s1, s2], 20)
want = {"bytes": len(body), "sum": itlib.fnv1a(body)}
for s, what in ((s1, "with content-length"), (s2, "without")):
    r = c.streams[s]
    t.ok(r.status == 200 and json.loads(r.body or b"{}") == want,
         "POST 300 KB %s: the upstream got it whole" % what, r)
# a large download and HEAD
s = c.request("GET", "/size/5000000")
c.wait([s], 30)
t.ok(c.streams[s].status == 200 and len(c.streams[s].body) == 5000000,
     "5 MB download over one stream", len(c.streams[s].body))
s = c.request("HEAD", "/size/1000")
c.wait([s])
t.ok(c.streams[s].status == 200 and c.streams[s].body == b"" and
     c.streams[s].ended and c.streams[s].header("content-length") == "1000",
     "HEAD: the head only", c.streams[s])

# :authority naming another host than the TLS server: 403, not forwarded
s = c.request("GET", "/json/5?m=wrongauth", authority="other.test:%d" % op)
c.wait([s])
r = c.streams[s]
t.ok(r.status == 403 and b"TLS server" in r.body, ":authority other than "
     "the SNI → 403", r)
t.ok(not [x for x in itlib.origin_records(olog) if b"m=wrongauth" in x],
     "... never forwarded")
c.close()

# python httpx with http2=True through the proxy
with httpx.Client(proxies="http://127.0.0.1:%d" % ap, verify=ca,
                  http2=True, timeout=10) as hc:
    r = hc.get("https://%s/json/33" % tgt)
    t.ok(r.status_code == 200 and r.http_version == "HTTP/2" and
         len(r.content) == 33, "httpx http2=True: 200 over HTTP/2",
         (r.status_code, r.http_version))
    r = hc.get("https://%s/status/403" % tgt)
    t.ok(r.status_code == 403 and r.json().get("error") == "denied",
         "httpx http2=True: denied → 403 JSON", r.text[:200])
t.done()
PY

# SIGTERM with an h2 connection open: GOAWAY, then a prompt exit
"$SYS_PYTHON" - >"$T/goaway" 2>&1 <<'PY' &
import os, itlib, h2lib
c = h2lib.H2Conn(itlib.env_int("AIRLOCK_PORT"),
                 "api.test:%d" % itlib.env_int("ORIGIN_PORT"),
                 os.environ["T"] + "/state/ca/a/ca.crt")
s = c.request("GET", "/json/3")
c.wait([s])
open(os.environ["T"] + "/h2-open", "w").close()
c.wait_closed(20)
print("goaway", None if c.goaway is None else int(c.goaway[0]))
PY
GPID=$!
track_pid "$GPID"
i=0
while [ ! -e "$T/h2-open" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
[ -e "$T/h2-open" ] || fail "the h2 client did not get its answer"
t0=$(date +%s)
stop_airlockd
t1=$(date +%s)
wait "$GPID"
untrack_pid "$GPID"
grep -q "^goaway 0$" "$T/goaway" || fail "no GOAWAY NO_ERROR at SIGTERM: $(cat "$T/goaway")"
[ $((t1 - t0)) -lt 10 ] || fail "airlockd took $((t1 - t0)) s to stop with an idle h2 connection"
ok "SIGTERM: the idle h2 connection gets GOAWAY NO_ERROR, airlockd stops in $((t1 - t0)) s"
finish
