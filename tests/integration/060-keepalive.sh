#!/bin/sh
# Keep-alive on both sides with idle upstream reuse, HTTP/1.0 clients,
# pipelining, chunked request and response bodies, close-delimited
# responses, HEAD, and Expect: 100-continue.
. "$top_srcdir/tests/integration/lib.sh"

start_origin
AIRLOCK_PORT=$(free_port)
export AIRLOCK_PORT ORIGIN_PORT T
{
	config_common "$AIRLOCK_PORT" local
	cat <<YAML
upstream:
  allow_networks: ["127.0.0.1/32"]
  hosts: {"api.test": "127.0.0.1"}
policies:
  - name: p
    rules:
      - {host: "api.test", ports: [$ORIGIN_PORT], paths: ["/size/*", "/chunked/*", "/close/*", "/echo", "/upload", "/stats", "/status/*"]}
sandboxes:
  - {id: local, policy: p}
YAML
} >"$T/airlock.yaml"
start_airlockd "$T/airlock.yaml"
PROXY=http://127.0.0.1:$AIRLOCK_PORT
U=http://api.test:$ORIGIN_PORT
D=http://127.0.0.1:$ORIGIN_PORT

# curl: several URLs, one proxy connection
out=$(curl -sS -x "$PROXY" -o /dev/null -o /dev/null -o /dev/null -o /dev/null \
    -w '%{http_code} %{num_connects} %{size_download}\n' \
    "$U/size/100" "$U/size/200" "$U/chunked/3000" "$U/size/400") ||
    fail "curl with four URLs"
want="200 1 100
200 0 200
200 0 3000
200 0 400"
[ "$out" = "$want" ] || fail "curl keep-alive: got
$out
want
$want"
ok "curl: four requests on one proxy connection"

# chunked, close-delimited and fixed-length responses arrive intact
bad=
for path in chunked/1000000 close/1000000 size/1000000 chunked/1 close/1 \
    chunked/0 close/0 size/0; do
	curl -sS -o "$T/direct" "$D/$path" || hard_error "curl $path direct"
	if ! curl -sS -x "$PROXY" -o "$T/via" "$U/$path"; then
		bad="$bad $path(curl failed)"
	elif ! cmp -s "$T/via" "$T/direct"; then
		bad="$bad $path($(wc -c <"$T/via") bytes)"
	fi
done
if [ -z "$bad" ]; then
	ok "chunked, close-delimited and sized responses intact"
else
	check_fail "responses not relayed intact:$bad"
fi

# chunked request body
head -c 1500000 /dev/urandom >"$T/upload.bin"
sum=$("$PYTHON" -m itlib fnv1a "$T/upload.bin")
out=$(curl -sS -x "$PROXY" -H 'Transfer-Encoding: chunked' -H 'Content-Type: application/octet-stream' \
    --data-binary @"$T/upload.bin" "$U/upload") || fail "curl chunked upload"
[ "$(json_field "$out" bytes)" = 1500000 ] || fail "chunked upload: $out"
[ "$(json_field "$out" sum)" = "$sum" ] || fail "chunked upload sum: $out, want $sum"
ok "chunked request body intact"

# Expect: 100-continue (curl sends it for bodies over 1 MiB, and waits a
# second for the 100 before sending anyway)
out=$(curl -sS -x "$PROXY" -H 'Expect: 100-continue' -H 'Content-Type: application/octet-stream' \
    --data-binary @"$T/upload.bin" -w ' %{time_total}' "$U/upload") ||
    fail "curl upload with Expect"
body=${out% *}
tt=${out##* }
[ "$(json_field "$body" sum)" = "$sum" ] || fail "Expect upload: $body"
awk "BEGIN { exit !($tt < 0.9) }" ||
    fail "Expect: 100-continue upload took ${tt}s: no 100 Continue relayed?"
ok "Expect: 100-continue upload (${tt}s)"

"$PYTHON" - <<'PY' || check_fail "keep-alive checks"
import http.client, os, socket, time, itlib
from itlib import req, connect, Reader, read_response, exchange
ap, op = itlib.env_int("AIRLOCK_PORT"), itlib.env_int("ORIGIN_PORT")
t = itlib.Checks()
A = "api.test:%d" % op
U = "http://" + A

def stats():
    return itlib.origin_stats(ap, "api.test", op)

# http.client: ten requests on one connection
s0 = stats()
c = http.client.HTTPConnection("127.0.0.1", ap, timeout=10)
good = 0
for i in range(10):
    c.request("GET", U + "/size/%d" % (1000 + i))
    r = c.getresponse()
    b = r.read()
    good += r.status == 200 and len(b) == 1000 + i
c.request("POST", U + "/upload", body=b"x" * 100000)
r = c.getresponse()
good += r.status == 200 and r.read().startswith(b'{"bytes":100000,')
c.close()
s1 = stats()
t.ok(good == 11, "http.client: 11 requests on one connection", good)
dreq = s1["requests"] - s0["requests"]
dconn = s1["connections"] - s0["connections"]
t.ok(dreq == 12 and dconn <= 2,
     "upstream connections reused: %d requests over %d new connections"
     % (dreq, dconn))

# separate client connections, one after another: idle upstream reuse
s0 = stats()
for i in range(10):
    r = itlib.roundtrip(ap, req("GET", U + "/size/10", ["Connection: close"]))
    if r is None or r.status != 200:
        t.ok(False, "sequential request %d" % i, repr(r))
s1 = stats()
dreq = s1["requests"] - s0["requests"]
dconn = s1["connections"] - s0["connections"]
t.ok(dreq == 11 and dconn <= 3,
     "idle upstream reuse across client connections: %d requests, %d new "
     "upstream connections" % (dreq, dconn))

# HTTP/1.0 without keep-alive: body, then the connection closes
rs, closed = exchange(ap, req("GET", U + "/size/5000", version="HTTP/1.0"),
                      1, close_wait=3)
t.ok(rs and rs[0].status == 200 and len(rs[0].body) == 5000,
     "HTTP/1.0: body", repr(rs))
t.ok(closed, "HTTP/1.0 without keep-alive: connection closed")
# HTTP/1.0 and a chunked upstream response: no chunked towards 1.0
s = connect(ap)
s.sendall(req("GET", U + "/chunked/70000", version="HTTP/1.0"))
rd = Reader(s)
r = read_response(rd)
rest = rd.read_all()
s.close()
t.ok(r.status == 200 and r.header("Transfer-Encoding") is None and
     len(r.body) == 70000 and not rest and
     r.body[:52] == b"abcdefghijklmnopqrstuvwxyz" * 2,
     "HTTP/1.0 client gets a de-chunked body", repr(r)[:300])
t.ok(r.version in ("HTTP/1.0", "HTTP/1.1"), "status line version", r.version)

# HTTP/1.0 with Connection: keep-alive: two requests, one connection
s = connect(ap)
rd = Reader(s)
ok10 = 0
for n in (300, 400):
    s.sendall(req("GET", U + "/size/%d" % n, ["Connection: keep-alive"],
                  version="HTTP/1.0"))
    try:
        r = read_response(rd)
        ok10 += r.status == 200 and len(r.body) == n
    except itlib.Closed:
        break
s.close()
t.ok(ok10 == 2, "HTTP/1.0 keep-alive: two responses on one connection", ok10)

# pipelining: three requests in one send, answered in order (the middle
# one is denied by policy and answered by the gateway itself)
data = (req("GET", U + "/size/11") + req("GET", U + "/forbidden") +
        req("POST", U + "/echo?n=3", body=b"abc"))
rs, _ = exchange(ap, data, 3, methods=["GET", "GET", "POST"])
t.ok(len(rs) == 3 and rs[0].status == 200 and len(rs[0].body) == 11 and
     rs[1].status == 403 and rs[2].status == 200 and
     rs[2].body.startswith(b"POST /echo?n=3 ") and
     rs[2].header("X-Body-Bytes") == "3",
     "pipelined requests answered in order", repr(rs))
# pipelined with the body of the first split across sends
s = connect(ap)
s.sendall(req("POST", U + "/upload", body=b"y" * 10)[:-4])
time.sleep(0.2)
s.sendall(b"yyyy" + req("GET", U + "/size/7"))
rd = Reader(s)
r1, r2 = read_response(rd, "POST"), read_response(rd)
s.close()
t.ok(r1.status == 200 and r1.body.startswith(b'{"bytes":10,') and
     r2.status == 200 and r2.body == b"abcdefg",
     "body split across sends, then a pipelined request", repr((r1, r2)))

# HEAD: headers only, the connection stays usable
s = connect(ap)
rd = Reader(s)
s.sendall(req("HEAD", U + "/size/1000"))
r = read_response(rd, "HEAD")
t.ok(r.status == 200 and r.header("Content-Length") == "1000" and
     r.body == b"", "HEAD: Content-Length, no body", repr(r))
s.sendall(req("GET", U + "/size/5"))
r = read_response(rd)
t.ok(r.status == 200 and r.body == b"abcde", "request after HEAD", repr(r))
s.sendall(req("HEAD", U + "/chunked/1000"))
r = read_response(rd, "HEAD")
s.sendall(req("GET", U + "/size/3"))
r2 = read_response(rd)
s.close()
t.ok(r.status == 200 and r.body == b"" and r2.body == b"abc",
     "HEAD of a chunked resource, then a request", repr((r, r2)))

# Expect: 100-continue by hand: the 100 (from the origin or the gateway)
# arrives before the body is sent
s = connect(ap)
s.sendall(req("POST", U + "/upload", ["Expect: 100-continue",
                                       "Content-Length: 5"]))
s.settimeout(3)
try:
    first = s.recv(4096)
except socket.timeout:
    first = b""
t.ok(first.startswith(b"HTTP/1.1 100 "), "100 Continue before the body",
     repr(first))
s.settimeout(10)
s.sendall(b"hello")
rd = Reader(s)
rd.buf = first[first.find(b"\r\n\r\n") + 4:] if first.startswith(
    b"HTTP/1.1 100 ") else first
r = read_response(rd, "POST")
s.close()
t.ok(r.status == 200 and r.body.startswith(b'{"bytes":5,'),
     "upload after 100 Continue", repr(r))

# a response status the origin chooses passes through (keep-alive kept)
s = connect(ap)
rd = Reader(s)
for code in (204, 404, 500, 304):
    s.sendall(req("GET", U + "/status/%d" % code))
    r = read_response(rd)
    t.ok(r.status == code, "status %d relayed" % code, repr(r))
s.close()
t.done()
PY
stop_airlockd
finish
