#!/bin/sh
# Secrets: token brokers. oauth2_client_credentials, oauth2_refresh (with a
# rotating refresh token), google_service_account (RS256 JWT bearer grant)
# and github_app (RS256 app JWT -> installation token) against mock token
# endpoints on loopback over verified HTTPS that check every grant, JWT
# signature and claim (python3-cryptography) and count calls. 50 concurrent
# requests at start-up wait for one mint (exactly one endpoint call); the
# token is renewed once before it expires; with the endpoint down the last
# good token is used until it expires, then 502 secret_unavailable with
# the reason; an endpoint in a denied network is never reached; airlockd -t
# mints nothing; mints and failures in /metrics; a reflected token is
# redacted; no minted token, JWT or credential in anything airlockd wrote.
. "$top_srcdir/tests/integration/lib.sh"

command -v openssl >/dev/null 2>&1 || skip "openssl CLI not found"
"$PYTHON" -c 'import cryptography' 2>/dev/null ||
    hard_error "python3-cryptography missing (scripts/install-deps.sh --test)"

sh "$top_srcdir/tests/harness/mkpki.sh" "$T/pki" >"$T/mkpki.log" 2>&1 ||
    hard_error "mkpki.sh: $(cat "$T/mkpki.log")"
"$PYTHON" -m seclib mkleaf "$T/pki" "$T/pki/tok" tokens.test denied.test \
    >"$T/mkleaf.log" 2>&1 || hard_error "mkleaf: $(cat "$T/mkleaf.log")"
for k in google github; do
	openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 \
	    -out "$T/$k.key" 2>/dev/null || hard_error "genpkey"
	openssl pkey -in "$T/$k.key" -pubout -out "$T/$k.pub" 2>/dev/null
	chmod 600 "$T/$k.key"
done

R=$("$PYTHON" -c 'import secrets; print(secrets.token_hex(6))')
CS="cs-LEAK-$R/+&="
RT0="rt-$R-1"
export T R CS RT0
mkdir -p "$T/tok" "$T/cfg"
echo '{"delay": 4, "expires_in": 12}' >"$T/tok/cc.ctl"
echo '{"expires_in": 4}' >"$T/tok/rt.ctl"
start_py_upstream tok token_upstream.py -C "$T/pki/tok.crt" \
    -K "$T/pki/tok.key" -s "$T/tok" --google-pub "$T/google.pub" \
    --github-pub "$T/github.pub" --app-id 4242 --installation 777 \
    --client-id cid-1 --client-secret "$CS" --refresh-token "$RT0" --r "$R"
TOK_PORT=$PY_PORT
echo '{"echo": {"body": "cc={{req:x-cc}} gh={{req:x-gh}}"}}' >"$T/cases.json"
start_secup up -c "$T/cases.json"
UP_PORT=$SECUP_PORT
AIRLOCK_PORT=$(free_port)
export TOK_PORT UP_PORT AIRLOCK_PORT

"$PYTHON" - <<'PY' || hard_error "google key file"
import json, os
E = os.environ
json.dump({"type": "service_account", "project_id": "proj",
           "client_email": "sa@proj.iam.gserviceaccount.com",
           "private_key": open(E["T"] + "/google.key").read(),
           "token_uri": "https://tokens.test:%s/google/token" % E["TOK_PORT"]},
          open(E["T"] + "/cfg/sa.json", "w"))
PY
chmod 600 "$T/cfg/sa.json"

{
	config_common "$AIRLOCK_PORT" sb
	cat <<YAML
upstream:
  ca_file: $T/pki/ca.crt
  allow_networks: ["127.0.0.1/32"]
  hosts: {"api.test": "127.0.0.1", "tokens.test": "127.0.0.1",
          "denied.test": "127.0.0.2"}
secrets:
  - name: cc
    source:
      oauth2_client_credentials:
        token_url: "https://tokens.test:$TOK_PORT/cc/token"
        client_id: cid-1
        client_secret: env:CS
        scope: "read write"
    hosts: ["api.test"]
    allow_plaintext: true   # the upstream is plain HTTP in this test
    inject: {header: X-CC, value: "Bearer \${secret}"}
  - name: rt
    source:
      oauth2_refresh:
        token_url: "https://tokens.test:$TOK_PORT/rt/token"
        client_id: cid-1
        refresh_token: env:RT0
    hosts: ["api.test"]
    allow_plaintext: true
    inject: {header: X-RT, value: "\${secret}"}
  - name: gsa
    source:
      google_service_account:
        key_file: sa.json
        scopes: ["https://www.googleapis.com/auth/cloud-platform",
                 "https://www.googleapis.com/auth/devstorage.read_only"]
    hosts: ["api.test"]
    allow_plaintext: true
    inject: {header: X-Google, value: "Bearer \${secret}"}
  - name: gh
    source:
      github_app:
        app_id: 4242
        private_key: file:$T/github.key
        installation_id: 777
        api_url: "https://tokens.test:$TOK_PORT"
    hosts: ["api.test"]
    allow_plaintext: true
    inject: {header: X-GH, value: "token \${secret}"}
  - name: denied
    source:
      oauth2_client_credentials:
        token_url: "https://denied.test:$TOK_PORT/cc/token"
        client_id: cid-1
        client_secret: env:CS
    hosts: ["denied-up.test"]
    allow_plaintext: true
    inject: {header: X-D, value: "\${secret}"}
policies:
  - name: p
    rules:
      - {host: "api.test", ports: [$UP_PORT], secrets: [cc, rt, gsa, gh]}
      - {host: "denied-up.test", secrets: [denied]}
sandboxes:
  - {id: sb, policy: p}
YAML
} >"$T/cfg/airlock.yaml"

"$AIRLOCKD" -c "$T/cfg/airlock.yaml" -t >"$T/t0.out" 2>&1 ||
    fail "good config rejected: $(cat "$T/t0.out")"
n=$(cat "$T"/tok/*.json 2>/dev/null | wc -c)
[ "$n" = 0 ] && ok "airlockd -t reached no token endpoint" ||
    check_fail "airlockd -t called a token endpoint"

# The burst is ready before airlockd starts (python starts slowly on a
# loaded machine): 50 requests as soon as the proxy port accepts, while
# the first client_credentials mint is under way (the mock delays it 4 s).
"$PYTHON" - >"$T/burst.out" 2>&1 <<'PY' &
import json, os, socket, threading, time
import seclib

E = os.environ
ap, port, T = int(E["AIRLOCK_PORT"]), int(E["UP_PORT"]), E["T"]
open(T + "/burst.ready", "w").close()
end = time.time() + 60
while time.time() < end:
    try:
        socket.create_connection(("127.0.0.1", ap), 0.2).close()
        break
    except OSError:
        time.sleep(0.02)
res = {}
def one(i):
    try:
        r, _ = seclib.once(ap, "http", "api.test", port, "GET", "/x",
                           ["X-Mark: c%d" % i])
        res[i] = r.status
    except Exception as e:
        res[i] = repr(e)
t_send = time.time()
ths = [threading.Thread(target=one, args=(i,)) for i in range(50)]
for th in ths:
    th.start()
for th in ths:
    th.join(30)
with open(T + "/tok/cc.ctl", "w") as f:
    f.write('{"expires_in": 12}')       # answer at once from now on
calls = json.load(open(T + "/tok/cc.json"))["calls"]
json.dump({"t_send": t_send, "res": res, "calls": calls},
          open(T + "/burst.json", "w"))
PY
BURST_PID=$!
track_pid "$BURST_PID"
i=0
while [ ! -e "$T/burst.ready" ] && [ $i -lt 600 ]; do
	sleep 0.05
	i=$((i + 1))
done
start_airlockd "$T/cfg/airlock.yaml"
export AIRLOCK_PID
wait "$BURST_PID" || check_fail "the burst: $(cat "$T/burst.out")"
untrack_pid "$BURST_PID"

"$PYTHON" - <<'PY' || check_fail "token broker checks"
import json, os, threading, time
import adminlib, itlib, seclib

E = os.environ
ap, port, T, R = int(E["AIRLOCK_PORT"]), int(E["UP_PORT"]), E["T"], E["R"]
up = seclib.Upstream(T + "/up.jsonl")
t = itlib.Checks()

def st(name):
    try:
        return json.load(open("%s/tok/%s.json" % (T, name)))
    except (OSError, ValueError):
        return {"calls": 0, "ok": 0, "bad": [], "tokens": [], "jwts": []}

def get(mark, case=None):
    h = ["X-Mark: " + mark]
    if case:
        h.append("X-Test-Case: " + case)
    r, raw = seclib.once(ap, "http", "api.test", port, "GET", "/x", h)
    return r, raw

def hdrs(mark):
    rec = up.one(mark)
    if rec is None:
        return None
    return {h: rec.header(h) for h in ("X-CC", "X-RT", "X-Google", "X-GH")}

# 50 requests at once while the first mint is still under way (the mock
# delays its answer 5 s): they wait, one endpoint call serves them all
b = json.load(open(T + "/burst.json"))
res, t_send = {int(k): v for k, v in b["res"].items()}, b["t_send"]
t.ok(all(res.get(i) == 200 for i in range(50)),
     "50 concurrent requests during the first mint: all 200",
     sorted(set(map(str, res.values()))))
tok1 = "tok-cc-%s-1" % R
byMark = {}
for rec in up.records():
    for m in rec.header_all("X-Mark"):
        byMark.setdefault(m, []).append(rec)
def hd(rec):
    return {h: rec.header(h) for h in ("X-CC", "X-RT", "X-Google", "X-GH")}
seen = [hd(byMark[m][0]) if len(byMark.get(m, [])) == 1 else None
        for m in ("c%d" % i for i in range(50))]
t.ok(all(s is not None and s["X-CC"] == "Bearer " + tok1 for s in seen),
     "all 50 carried the first client_credentials token", seen[:2])
t.ok(b["calls"] == 1, "exactly one token endpoint call for them",
     b["calls"])
t1 = st("cc")["times"][0]
t.ok(t_send < t1 - 0.5, "they were sent while the first mint was under "
     "way (%.1f s before it ended)" % (t1 - t_send))
waited = [x for x in itlib.audit_records(T + "/audit.jsonl")
          if x.get("path") == "/x" and x.get("duration_ms", 0) >= 300]
t.ok(len(waited) >= 45, "and waited for it in the gateway (%d of 50 took "
     ">= 300 ms)" % len(waited))
h = seen[0] or {}
t.ok((h.get("X-RT") or "").startswith("tok-rt-%s-" % R),
     "oauth2_refresh token", h)
t.ok(h.get("X-Google") == "Bearer tok-google-%s-1" % R,
     "google_service_account token (JWT verified by the mock)", h)
t.ok(h.get("X-GH") == "token tok-github-%s-1" % R,
     "github_app installation token (app JWT verified by the mock)", h)

# the token lives 12 s: renewed once, 6 s before it expires; the one
# before stays valid until then and an upstream that kept it is redacted
end = time.time() + 12
while time.time() < end and st("cc")["calls"] < 2:
    time.sleep(0.05)
cs = st("cc")
t.ok(cs["calls"] >= 2, "a renewal before expiry", cs)
with open(T + "/cases.json", "w") as f:
    json.dump({"echo": {"body": "cc={{req:x-cc}} gh={{req:x-gh}}"},
               "old": {"body": "old=" + tok1}}, f)
r, raw = get("old", "old")
if time.time() - t1 < 11.0:
    t.ok(r.status == 200 and tok1.encode() not in raw and
         b"[airlock:redacted:cc]" in raw,
         "the previous token, still valid, is redacted", raw[-120:])
else:
    t.ok(False, "too slow to check the previous token's redaction (%.1f s)"
         % (time.time() - t1))
r, raw = get("refl", "echo")
t.ok(r.status == 200 and b"tok-cc-" not in raw and
     b"[airlock:redacted:cc]" in raw, "a reflected token is redacted",
     raw[-200:])
time.sleep(1.0)
cs = st("cc")
gaps = [round(y - x, 1) for x, y in zip(cs["times"], cs["times"][1:])]
t.ok(gaps and all(5.8 <= g <= 7.0 for g in gaps),
     "one renewal per token, 6 s after its mint (gaps %s)" % gaps)
get("after-renew")
rec = up.one("after-renew")
last = "Bearer " + st("cc")["tokens"][-1]
t.ok(rec is not None and rec.header("X-CC") in (last, "Bearer " +
     st("cc")["tokens"][-2]) and rec.header("X-CC") != "Bearer " + tok1,
     "the renewed token is used", rec and rec.header("X-CC"))
for n in ("cc", "rt", "google", "github"):
    t.ok(not st(n)["bad"], "%s: every grant the mock got was valid" % n,
         st(n)["bad"])
# the refresh token rotates at every answer: the next grant used the new
rs = st("rt")
t.ok(rs["ok"] >= 2 and not rs["bad"],
     "oauth2_refresh renewed with the rotated refresh token", rs)

# the endpoint goes down: the last good token until it expires, then 502
# (12 s after its mint)
with open(T + "/tok/cc.ctl", "w") as f:
    f.write('{"down": true}')
time.sleep(0.3)         # a renewal already under way lands first
cs = st("cc")
tok2, t2 = cs["tokens"][-1], cs["times"][-1]
statuses = []
end = t2 + 16
got502 = None
while time.time() < end:
    m = "d%d" % len(statuses)
    r, raw = get(m)
    statuses.append((round(time.time() - t2, 1), r.status))
    if r.status == 200:
        hh = hdrs(m) or {}
        if hh.get("X-CC") != "Bearer " + tok2:
            statuses.append(("wrong token", hh.get("X-CC")))
    else:
        got502 = (r, raw, time.time() - t2)
        break
    time.sleep(0.3)
t.ok(got502 is not None, "a 502 once the last good token expired", statuses)
t.ok(all(s == 200 for _, s in statuses[:-1]) and
     all(x != "wrong token" for x, _ in statuses),
     "the last good token was used until then", statuses)
if got502:
    r, raw, when = got502
    t.ok(11.0 <= when <= 13.0, "the 502 came when the token expired (%.1f s "
         "after its mint)" % when)
    t.ok(itlib.is_gateway_error(r) and r.status == 502 and
         b'"secret_unavailable"' in raw, "502 secret_unavailable", raw[-300:])
    t.ok(b"HTTP 503 (temporarily_unavailable)" in raw,
         "the reason names the endpoint's answer", raw[-300:])
t.ok(st("cc")["calls"] >= 3, "renewal retried while down", st("cc"))

# an endpoint in a denied network is never connected to
r, raw = seclib.once(ap, "http", "denied-up.test", 80, "GET", "/", [])
t.ok(r.status == 502 and b"denied network" in raw,
     "a token endpoint outside the destination guard: 502 with the reason",
     raw[-300:])

# metrics
tokf = T + "/state/admin.token"
for _ in range(50):
    if os.path.exists(tokf):
        break
    time.sleep(0.1)
stt, _, body = adminlib.call("unix:" + T + "/state/admin.sock", "GET",
                             "/metrics", token=adminlib.token(T + "/state"))
def metric(name):
    for ln in body.splitlines():
        if ln.startswith(name + " "):
            return int(float(ln.split()[1]))
    return None
t.ok((metric("airlock_secret_mints_total") or 0) >= 6,
     "mints counted in /metrics", metric("airlock_secret_mints_total"))
t.ok((metric("airlock_secret_mint_failures_total") or 0) >= 2,
     "failures counted in /metrics",
     metric("airlock_secret_mint_failures_total"))

# audit: what was attached
recs = itlib.audit_records(T + "/audit.jsonl")
a = [x for x in recs if x.get("status") == 200 and x.get("secrets")]
t.ok(a and set(a[0]["secrets"]) >= {"cc", "rt", "gsa", "gh"},
     "audit names the attached broker secrets", a[:1])
t.done()
PY

sleep 0.3
stop_airlockd

"$PYTHON" - <<'PY' || check_fail "leak search"
import base64, glob, json, os, urllib.parse
import itlib

E = os.environ
T = E["T"]
t = itlib.Checks()
vals = {"client_secret": E["CS"], "refresh token 0": E["RT0"]}
for n in ("cc", "rt", "google", "github"):
    s = json.load(open("%s/tok/%s.json" % (T, n)))
    for i, v in enumerate(s["tokens"]):
        vals["%s token %d" % (n, i)] = v
    for i, v in enumerate(s["jwts"]):
        vals["%s JWT %d" % (n, i)] = v
        vals["%s JWT %d signature" % (n, i)] = v.rsplit(".", 1)[1]
for k in ("google", "github"):
    pem = open("%s/%s.key" % (T, k)).read().splitlines()
    vals["%s key line" % k] = pem[2]
t.ok(len(vals) > 12, "there is something to search for (%d values)" %
     len(vals))

def forms(v):
    b = v.encode()
    out = {"raw": b, "form": urllib.parse.quote_plus(b).encode(),
           "url": urllib.parse.quote(b, safe="").encode(),
           "base64": base64.b64encode(b).rstrip(b"="),
           "base64url": base64.urlsafe_b64encode(b).rstrip(b"="),
           "json": b.replace(b"/", b"\\/")}
    return out

targets = {}
for f in ("airlockd.log", "airlockd.out", "audit.jsonl"):
    p = os.path.join(T, f)
    targets[f] = open(p, "rb").read() if os.path.exists(p) else b""
for root, dirs, files in os.walk(os.path.join(T, "state")):
    for f in files:
        p = os.path.join(root, f)
        try:
            targets[os.path.relpath(p, T)] = open(p, "rb").read()
        except OSError:
            pass
t.ok(len(targets["audit.jsonl"]) > 0 and
     b"token minted" in targets["airlockd.log"],
     "the log and audit have content")
for name, data in sorted(targets.items()):
    hits = []
    for k, v in vals.items():
        for fk, fv in forms(v).items():
            if fv in data:
                i = data.find(fv)
                hits.append("%s (%s): %r" % (k, fk,
                                             data[max(0, i - 60):i + 60]))
    t.ok(not hits, "%s: no token, JWT or credential in any form" % name,
         hits[:5])
t.done()
PY

# configuration errors: FILE:LINE:COL, no value printed
cat >"$T/bad.yaml" <<YAML
secrets:
  - name: b1
    source: {oauth2_magic: {token_url: "https://x.test/t"}}
    hosts: ["api.test"]
    inject: {header: X-A, value: "\${secret}"}
  - name: b2
    source:
      oauth2_client_credentials:
        token_url: "http://x.test/t"
        client_id: c
        client_secret: "cs-LEAK-bare-$R"
    hosts: ["api.test"]
    inject: {header: X-B, value: "\${secret}"}
  - name: b3
    source:
      github_app: {app_id: abc, private_key: "literal:k", installation_id: 1}
    hosts: ["api.test"]
    inject: {aws_sigv4: {region: r, service: s}}
YAML
"$AIRLOCKD" -c "$T/bad.yaml" -t >"$T/bad.out" 2>&1
rc=$?
[ "$rc" = 1 ] && ok "bad broker config: -t exits 1" ||
    check_fail "bad broker config: -t exit $rc: $(cat "$T/bad.out")"
for want in "unknown token broker \"oauth2_magic\"" \
    "\"client_secret\" must be env:NAME" "plain http://" \
    "\"app_id\" must be a number" "cannot sign AWS SigV4"; do
	grep -q "^$T/bad.yaml:[0-9]*:[0-9]*: .*$want" "$T/bad.out" &&
	    ok "config error: $want" ||
	    check_fail "no config error \"$want\": $(cat "$T/bad.out")"
done
grep -q "LEAK" "$T/bad.out" && check_fail "a config error printed a value"

check_sanitizers
finish
