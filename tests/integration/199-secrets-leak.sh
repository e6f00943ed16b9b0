#!/bin/sh
# Secrets never leak. With distinctive values for every kind of secret, run
# a mix of scenarios over plain HTTP and intercepted HTTPS — injection of
# each form, placeholders, misuse, upstreams reflecting the whole request,
# gateway errors (400, 403, 413, 414, 431, 502, 504), upstream 4xx/5xx, a
# failing exec: refresh, SIGHUP and SIGUSR1 — with verbose logging, then
# search everything airlockd wrote (log, stdout, audit, state_dir) and every
# byte the clients received for each value and its encodings (URL, base64,
# Basic user:pass, JSON-escaped, SigV4 key and token). Configuration errors
# next to secrets do not print values either. While running, the process
# has no core limit and its secret pages are locked.
. "$top_srcdir/tests/integration/lib.sh"

command -v openssl >/dev/null 2>&1 || skip "openssl CLI not found"


HOSTS="api.test other.test basic.test basic2.test query.test bkt.s3.test sqs.test dead.test"
sh "$top_srcdir/tests/harness/mkpki.sh" "$T/pki" >"$T/mkpki.log" 2>&1 ||
    hard_error "mkpki.sh: $(cat "$T/mkpki.log")"
# shellcheck disable=SC2086
"$PYTHON" -m seclib mkleaf "$T/pki" "$T/pki/multi" $HOSTS >"$T/mkleaf.log" 2>&1 ||
    hard_error "mkleaf: $(cat "$T/mkleaf.log")"
"$PYTHON" - "$T/cases.json" <<'PY'
import json, sys
echo = {"body": "{{raw}}", "headers": [["X-Echo-Auth", "{{req:authorization}}"],
                                       ["X-Echo-Q", "{{query:api_key}}"],
                                       ["X-Echo-Tok",
                                        "{{req:x-amz-security-token}}"],
                                       ["X-Echo-Ph", "{{req:x-custom}}"]]}
cases = {
    "echo": dict(echo),
    "echo_chunked": dict(echo, framing="chunked", chunks=[1, 3, 7],
                         delay=0.0005),
    "echo_401": dict(echo, status=401, reason="Unauthorized"),
    "echo_500": dict(echo, status=500, reason="Internal Server Error",
                     framing="chunked", chunks=[5]),
    "echo_eof": dict(echo, framing="eof"),
    "slow": {"wait": 2.5, "body": "late {{raw}}"},
    # malformed answers carrying the value
    "badhead": {"raw": "HTTP/1.1 200 OK\r\nX-Bad {{req:authorization}}\r\n"
                       "Content-Length: 2\r\n\r\nok"},
    "badstatus": {"raw": "HTTP/1.1 2x0 {{req:authorization}}\r\n\r\n"},
    "badchunk": {"raw": "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n"
                        "\r\n{{req:authorization}}\r\n"},
}
json.dump(cases, open(sys.argv[1], "w"))
PY
start_secup up -c "$T/cases.json"
UP_PORT=$SECUP_PORT
start_secup ups -c "$T/cases.json" -C "$T/pki/multi.crt" -K "$T/pki/multi.key"
UPS_PORT=$SECUP_PORT
AIRLOCK_PORT=$(free_port)
DEAD_PORT=$(free_port)

R=$("$PYTHON" -c 'import secrets; print(secrets.token_hex(8))')
SEC_HDR="sk-LEAK-hdr-$R/+="
SEC_BASICU="pw-LEAK-basic-$R/+"
SEC_BASICP="bob:pw-LEAK-basicp-$R"
SEC_Q="q-LEAK-query-$R/+&= x"
SEC_S3="AKIDLEAKS3$R:s3-LEAK-key-$R/K7+bPxR"
SEC_SQS="AKIDLEAKSQS$R:sqs-LEAK-key-$R/Zz+9:sqs-LEAK-tok-$R//+=="
SEC_PH="ph-LEAK-value-$R"
SEC_DEAD="dead-LEAK-$R"
SEC_FILE="file-LEAK-$R-v1"
PH="airlock-ph-leak-$R"
export SEC_HDR SEC_BASICU SEC_BASICP SEC_Q SEC_S3 SEC_SQS SEC_PH SEC_DEAD PH R
export AIRLOCK_PORT UP_PORT UPS_PORT DEAD_PORT T
printf '%s\n' "$SEC_FILE" >"$T/file.key"
chmod 600 "$T/file.key"
cat >"$T/exec.sh" <<EOF
#!/bin/sh
if [ -e "$T/exec.fail" ]; then
	echo "exec-LEAK-$R-stdout-on-failure"
	echo "exec-LEAK-$R-stderr-on-failure" >&2
	exit 3
fi
echo "exec-LEAK-$R"
EOF

{
	config_common "$AIRLOCK_PORT" sb
	cat <<YAML
limits: {body_bytes: 32KiB, header_bytes: 16KiB, upstream_timeout: 1s}
upstream:
  ca_file: $T/pki/ca.crt
  allow_networks: ["127.0.0.1/32"]
  hosts:
YAML
	for h in $HOSTS; do
		echo "    \"$h\": \"127.0.0.1\""
	done
	cat <<YAML
secrets:
  - {name: hdr, allow_plaintext: true, source: env:SEC_HDR, hosts: ["api.test"],
     inject: {header: Authorization, value: "Bearer \${secret}"}}
  - {name: ph, allow_plaintext: true, source: env:SEC_PH, hosts: ["api.test"], placeholder: "$PH",
     sandbox_env: PH_KEY}
  - {name: fil, allow_plaintext: true, source: "file:$T/file.key", hosts: ["api.test"],
     inject: {header: X-File, value: "\${secret}"}}
  - {name: ex, allow_plaintext: true, source: "exec:sh $T/exec.sh", refresh: 200ms,
     hosts: ["api.test"], inject: {header: X-Ex, value: "\${secret}"}}
  - {name: basicu, allow_plaintext: true, source: env:SEC_BASICU, hosts: ["basic.test"],
     inject: {basic: {username: alice}}}
  - {name: basicp, allow_plaintext: true, source: env:SEC_BASICP, hosts: ["basic2.test"],
     inject: {basic: {}}}
  - {name: qkey, allow_plaintext: true, source: env:SEC_Q, hosts: ["query.test"],
     inject: {query: api_key}}
  - {name: s3, allow_plaintext: true, source: env:SEC_S3, hosts: ["*.s3.test"],
     inject: {aws_sigv4: {region: us-east-1, service: s3}}}
  - {name: sqs, allow_plaintext: true, source: env:SEC_SQS, hosts: ["sqs.test"],
     inject: {aws_sigv4: {region: us-east-1, service: sqs}}}
  - {name: dead, allow_plaintext: true, source: env:SEC_DEAD, hosts: ["dead.test"],
     inject: {header: Authorization, value: "Bearer \${secret}"}}
policies:
  - name: p
    rules:
      - {host: "api.test", ports: [$UP_PORT, $UPS_PORT], paths: ["/v1/*", "/r/*"],
         secrets: [hdr, fil, ex]}
      - {host: "basic.test", ports: [$UP_PORT, $UPS_PORT], secrets: [basicu]}
      - {host: "basic2.test", ports: [$UP_PORT, $UPS_PORT], secrets: [basicp]}
      - {host: "query.test", ports: [$UP_PORT, $UPS_PORT], secrets: [qkey]}
      - {host: "*.s3.test", ports: [$UP_PORT, $UPS_PORT], secrets: [s3]}
      - {host: "sqs.test", ports: [$UP_PORT, $UPS_PORT], secrets: [sqs]}
      - {host: "dead.test", ports: [$DEAD_PORT], secrets: [dead]}
      - {host: "other.test", ports: [$UP_PORT, $UPS_PORT]}
sandboxes:
  - {id: sb, policy: p}
YAML
} >"$T/airlock.yaml"
AIRLOCKD_FLAGS=-v start_airlockd "$T/airlock.yaml"
export AIRLOCK_PID

"$PYTHON" - <<'PY' || check_fail "scenario run"
import os, signal, time
import itlib
from seclib import Client

E = os.environ
ap, T, PH = int(E["AIRLOCK_PORT"]), E["T"], E["PH"]
CA = T + "/state/ca/sb/ca.crt"
t = itlib.Checks()
raw_out = open(T + "/client.bin", "ab")

def keep(c):
    raw_out.write(c.received())
    raw_out.flush()

def run(scheme, host, port, reqs):
    """Send [(method, path, headers, body, chunks)] on one connection;
    statuses (None when the connection ended)."""
    try:
        c = Client(ap, scheme, host, port, CA)
    except Exception as e:
        return [repr(e)]
    out = []
    for method, path, hdrs, body, chunks in reqs:
        try:
            r = c.request(method, path, hdrs, body, chunks)
            out.append(r.status)
        except Exception:
            out.append(None)
            break
    keep(c)
    c.close()
    return out

ECHO = ["X-Test-Case: echo"]
for scheme in ("http", "https"):
    port = int(E["UPS_PORT"] if scheme == "https" else E["UP_PORT"])
    S = scheme + ": "
    # injection of every form, the upstream echoing the whole request
    for case in ("echo", "echo_chunked", "echo_401", "echo_500"):
        H = ["X-Test-Case: " + case]
        st = run(scheme, "api.test", port, [
            ("GET", "/v1/a", H + ["Authorization: Bearer own",
                                  "X-Custom: " + PH], b"", None),
            ("POST", "/r/b?x=" + PH, H + ["Cookie: k=" + PH], b"body " + PH.encode(), None),
        ])
        want = {"echo": 200, "echo_chunked": 200, "echo_401": 401,
                "echo_500": 500}[case]
        t.ok(st == [want, want], S + "api.test " + case, st)
        for host in ("basic.test", "basic2.test", "query.test"):
            st = run(scheme, host, port, [
                ("GET", "/x?api_key=own&y=1", H, b"", None),
                ("GET", "/y", H + ["Authorization: Basic b3duOm93bg=="], b"",
                 None)])
            t.ok(st == [want, want], S + host + " " + case, st)
        st = run(scheme, "bkt.s3.test", port, [
            ("PUT", "/k/o%20x", H, b"s3 body", None),
            ("GET", "/k/o?list-type=2", H, b"", None)])
        t.ok(st == [want, want], S + "s3 " + case, st)
        st = run(scheme, "sqs.test", port, [
            ("POST", "/?Action=Send", H + ["Content-Type: text/plain"],
             b"sqs body", None),
            ("POST", "/", H, None, [b"chunked ", b"sqs"])])
        t.ok(st == [want, want], S + "sqs " + case, st)
    # close-delimited echo
    st = run(scheme, "api.test", port, [("GET", "/v1/eof", ["X-Test-Case: "
                                          "echo_eof", "X-Custom: " + PH],
                                         b"", None)])
    t.ok(st == [200], S + "close-delimited echo", st)
    # misuse towards another host, in header, path, query
    st = run(scheme, "other.test", port, [
        ("GET", "/x", ECHO + ["Authorization: Bearer " + PH], b"", None),
        ("GET", "/p/" + PH, ECHO, b"", None),
        ("GET", "/q?k=" + PH, ECHO, b"", None)])
    t.ok(st == [403, 403, 403], S + "misuse → 403", st)
    # policy denial with the placeholder in the path
    st = run(scheme, "api.test", port, [("GET", "/denied/" + PH, ECHO, b"",
                                         None)])
    t.ok(st == [403], S + "denied path", st)
    # SigV4 body over body_bytes
    st = run(scheme, "sqs.test", port, [("POST", "/", ECHO, b"b" * 40000,
                                         None)])
    t.ok(st == [413], S + "413", st)
    # bad requests carrying a placeholder and bound to get secrets
    st = run(scheme, "api.test", port, [
        ("GET", "/v1/x", ECHO + ["X-Custom: " + PH, "Content-Length: 5",
                                 "Transfer-Encoding: chunked"], b"", None)])
    t.ok(st == [400], S + "CL+TE → 400", st)
    st = run(scheme, "api.test", port, [
        ("GET", "/v1/x", ECHO + ["X-Custom: " + PH, "Bad header line"],
         b"", None)])
    t.ok(st == [400], S + "malformed header → 400", st)
    st = run(scheme, "api.test", port, [
        ("GET", "/v1/x", ECHO + ["X-Custom: " + PH, "X-Pad: " + "p" * 20000],
         b"", None)])
    t.ok(st == [431], S + "header block too large → 431", st)
    st = run(scheme, "api.test", port, [
        ("GET", "/v1/x?k=" + PH + "&pad=" + "u" * 20000, ECHO, b"", None)])
    t.ok(st in ([414], [431]), S + "URI too long → 414 (or 431)", st)
    # malformed upstream answers carrying the value
    for case, want in (("badhead", 502), ("badstatus", 502),
                       ("badchunk", None)):
        st = run(scheme, "api.test", port, [
            ("GET", "/v1/" + case, ["X-Test-Case: " + case], b"", None)])
        t.ok(st == [want] if want else st in ([None], [200]),
             S + "malformed upstream answer (%s) → %s" % (case, want), st)
    # upstream too slow: 504
    st = run(scheme, "api.test", port, [
        ("GET", "/v1/slow", ["X-Test-Case: slow", "X-Custom: " + PH], b"",
         None)])
    t.ok(st == [504], S + "slow upstream → 504", st)
    # client gone mid-body of a SigV4 request
    try:
        c = Client(ap, scheme, "sqs.test", port, CA)
        c.raw_request(c.build("POST", "/", ECHO, b"x" * 1000)[:-990])
        time.sleep(0.1)
        keep(c)
        c.close()
    except Exception as e:
        t.ok(False, S + "client gone mid-body", repr(e))
# dead upstream for a bound host: 502 (plain HTTP: CONNECT would be refused
# before any request)
st = run("http", "dead.test", int(E["DEAD_PORT"]), [("GET", "/x", ECHO, b"",
                                                    None)])
t.ok(st == [502], "dead upstream → 502", st)

# a failing exec refresh, a file change and SIGHUP, SIGUSR1
open(T + "/exec.fail", "w").close()
time.sleep(0.8)
with open(T + "/file.key", "w") as f:
    f.write("file-LEAK-%s-v2\n" % E["R"])
os.kill(int(E["AIRLOCK_PID"]), signal.SIGHUP)
time.sleep(0.5)
os.kill(int(E["AIRLOCK_PID"]), signal.SIGUSR1)
time.sleep(0.3)
st = run("http", "api.test", int(E["UP_PORT"]), [("GET", "/v1/after", ECHO,
                                                 b"", None)])
t.ok(st == [200], "requests after reload", st)
raw_out.close()
t.done()
PY

# While it runs: no core files, secret pages locked.
lim=$(awk '/^Max core file size/ { print $5 " " $6 }' "/proc/$AIRLOCK_PID/limits")
[ "$lim" = "0 0" ] && ok "core file size limit 0" ||
    check_fail "core file size limit '$lim', want 0"
if grep -q "cannot lock secret memory" "$T/airlockd.log"; then
	note "mlock refused here (RLIMIT_MEMLOCK): VmLck not checked"
elif is_asan; then
	note "AddressSanitizer makes mlock a no-op: VmLck not checked"
else
	lck=$(awk '/^VmLck:/ { print $2 }' "/proc/$AIRLOCK_PID/status")
	[ "${lck:-0}" -gt 0 ] && ok "secret pages locked (VmLck $lck kB)" ||
	    check_fail "VmLck ${lck:-?} kB: secret memory not locked"
fi
sleep 0.3
stop_airlockd

# Every form of every value, searched in everything airlockd wrote and
# everything the clients received.
"$PYTHON" - <<'PY' || check_fail "leak search"
import base64, os, urllib.parse
import itlib

E = os.environ
T, R = E["T"], E["R"]
t = itlib.Checks()
vals = {k: E[k] for k in ("SEC_HDR", "SEC_BASICU", "SEC_BASICP", "SEC_Q",
                          "SEC_S3", "SEC_SQS", "SEC_PH", "SEC_DEAD")}
for k in ("SEC_S3", "SEC_SQS"):
    for i, part in enumerate(vals[k].split(":")[1:]):
        vals["%s part %d" % (k, i + 1)] = part
vals["file v1"] = "file-LEAK-%s-v1" % R
vals["file v2"] = "file-LEAK-%s-v2" % R
vals["exec"] = "exec-LEAK-%s" % R

def forms(v):
    b = v.encode()
    out = {"raw": b}
    for safe in ("", "-_.~", "/"):
        q = urllib.parse.quote(b, safe=safe).encode()
        out["url(%s)" % safe] = q
        out["url-lower(%s)" % safe] = q.replace(b"%2F", b"%2f").replace(
            b"%2B", b"%2b").replace(b"%3D", b"%3d").replace(b"%3A", b"%3a")
    out["form"] = urllib.parse.quote_plus(b).encode()
    out["base64"] = base64.b64encode(b).rstrip(b"=")
    out["base64url"] = base64.urlsafe_b64encode(b).rstrip(b"=")
    out["base64 alice:"] = base64.b64encode(b"alice:" + b).rstrip(b"=")
    out["json"] = b.replace(b"/", b"\\/")
    return out

targets = {}
for f in ("airlockd.log", "airlockd.out", "audit.jsonl", "client.bin"):
    p = os.path.join(T, f)
    targets[f] = open(p, "rb").read() if os.path.exists(p) else b""
nstate = 0
for root, dirs, files in os.walk(os.path.join(T, "state")):
    for f in files:
        p = os.path.join(root, f)
        try:
            targets[os.path.relpath(p, T)] = open(p, "rb").read()
            nstate += 1
        except OSError:
            pass
t.ok(len(targets["audit.jsonl"]) > 0 and len(targets["client.bin"]) > 0
     and nstate > 0, "there is something to search (%d state files, %d "
     "client bytes)" % (nstate, len(targets["client.bin"])))
for name, data in sorted(targets.items()):
    hits = []
    for k, v in vals.items():
        for fk, fv in forms(v).items():
            if fv in data:
                i = data.find(fv)
                hits.append("%s (%s) at %d: %r" % (k, fk, i,
                                                   data[max(0, i - 80):i + 80]))
    t.ok(not hits, "%s: no secret value in any form" % name, hits[:5])
# the exec command's failure output never reached the log
t.ok(b"on-failure" not in targets["airlockd.log"],
     "the failing command's stdout/stderr is not logged")
# the scenarios happened: the log and audit show them
log, aud = targets["airlockd.log"], targets["audit.jsonl"]
t.ok(b"refresh failed" in log, "a refresh failure was logged")
for st in (b'"status":403', b'"status":413', b'"status":502',
           b'"status":504', b'"status":401', b'"status":500'):
    t.ok(st in aud, "audit has %s" % st.decode())
t.ok(b"[airlock:redacted:" in targets["client.bin"],
     "the clients saw redaction markers")
t.done()
PY

# Configuration errors next to secrets print no value (a bare string is an
# error, and may well be a pasted key).
cat >"$T/bad.yaml" <<YAML
secrets:
  - name: bare
    source: "sk-LEAK-bare-$R"
    hosts: ["api.test"]
    allow_plaintext: true   # also checked over plain HTTP
    inject: {header: X-A, value: "\${secret}"}
  - name: lit
    source: "literal:sk-LEAK-lit-$R"
    hosts: ["api.test"]
    allow_plaintext: true   # also checked over plain HTTP
    inject: {header: X-B, value: "\${secret}", extra: 1}
  - name: lit2
    source: "literal:sk-LEAK-lit2-$R"
    refresh: 5m
    hosts: ["api.test"]
    allow_plaintext: true   # also checked over plain HTTP
    inject: {basic: {username: "a:b"}}
  - name: lit3
    source: "literal:sk-LEAK-lit3-$R"
    hosts: ["api.test"]
    allow_plaintext: true   # also checked over plain HTTP
    inject: {header: X-C, value: "\${secret}"}
    placeholder: "short"
policies:
  - name: p
    rules:
      - {host: "other.test", secrets: [lit3]}
sandboxes:
  - {id: sb, policy: p}
YAML
"$AIRLOCKD" -c "$T/bad.yaml" -t >"$T/bad.out" 2>&1
rc=$?
[ "$rc" = 1 ] && ok "bad secrets config: -t exits 1" ||
    check_fail "bad secrets config: -t exit $rc: $(cat "$T/bad.out")"
n=$(grep -c "^$T/bad.yaml:[0-9]*:[0-9]*: " "$T/bad.out")
[ "$n" -ge 4 ] && ok "bad secrets config: $n problems reported" ||
    check_fail "bad secrets config: $n problems, want >= 4: $(cat "$T/bad.out")"
grep -q "LEAK" "$T/bad.out" &&
    check_fail "config errors print a secret value: $(grep LEAK "$T/bad.out")"
finish
