#!/bin/sh
# Per-listener default_sandbox (issue 15 point 5). Clients that send
# credentials only after a 407 (git's default http.proxyAuthMethod anyauth,
# curl --proxy-anyauth) were captured by listen.default_sandbox: wrong CA,
# wrong policy. A listen.proxy item may be {address, default_sandbox}: here
# one listener serves credential-less local clients as "local", another
# ({default_sandbox: null}) always answers 407 first, so git and curl
# --proxy-anyauth authenticate and run as "dev". A warning at start names
# the listener whose default sandbox would capture such clients.
. "$top_srcdir/tests/integration/lib.sh"

command -v openssl >/dev/null 2>&1 || skip "openssl CLI not found"
command -v git >/dev/null 2>&1 || skip "git not found"
[ -x /usr/lib/git-core/git-http-backend ] || skip "git-http-backend not found"
sh "$top_srcdir/tests/harness/mkpki.sh" "$T/pki" >"$T/mkpki.log" 2>&1 ||
    hard_error "mkpki.sh: $(cat "$T/mkpki.log")"

# a bare repository with two commits, served over HTTPS by git http-backend
mkdir -p "$T/work" "$T/repos"
(
	cd "$T/work" && git init -q -b main . &&
	git config user.email t@example.test && git config user.name t &&
	echo one >a.txt && git add a.txt && git commit -qm one &&
	echo two >>a.txt && git commit -qam two
) >"$T/git-setup.log" 2>&1 || hard_error "git setup: $(cat "$T/git-setup.log")"
git clone -q --bare "$T/work" "$T/repos/proj.git" >>"$T/git-setup.log" 2>&1 ||
    hard_error "git clone --bare failed"
HEAD_SHA=$(git -C "$T/work" rev-parse HEAD)
start_py_upstream git git_https_server.py -r "$T/repos" \
    -C "$T/pki/good.crt" -K "$T/pki/good.key" -l "$T/git.jsonl"
GIT_PORT=$PY_PORT
start_origin origin -C "$T/pki/good.crt" -K "$T/pki/good.key"
TLS_PORT=$ORIGIN_PORT
start_origin plain
PLAIN_PORT=$ORIGIN_PORT

LOCAL_PORT=$(free_port)
AUTH_PORT=$(free_port)
AIRLOCK_PORT=$LOCAL_PORT
cat >"$T/airlock.yaml" <<YAML
listen:
  proxy:
    - "127.0.0.1:$LOCAL_PORT"
    - {address: "127.0.0.1:$AUTH_PORT", default_sandbox: null}
  default_sandbox: local
state_dir: $T/state
workers: 2
audit: {file: $T/audit.jsonl}
upstream:
  ca_file: $T/pki/ca.crt
  allow_networks: ["127.0.0.1/32"]
  hosts: {"api.test": "127.0.0.1"}
policies:
  - name: p
    rules:
      - {host: "api.test", ports: [$TLS_PORT, $GIT_PORT, $PLAIN_PORT]}
  - name: narrow
    rules:
      - {host: "api.test", ports: [$TLS_PORT, $PLAIN_PORT], paths: ["/echo"]}
sandboxes:
  - {id: local, policy: narrow}
  - {id: dev, policy: p, token: "literal:dev-token-1"}
YAML
start_airlockd "$T/airlock.yaml" "$LOCAL_PORT"
wait_port "$AUTH_PORT" 10 || fail "listener $AUTH_PORT not up"
CA_DEV=$T/state/ca/dev/ca.crt
CA_LOCAL=$T/state/ca/local/ca.crt

# --- the warning at start names the listener with a default sandbox
if grep -q "listener 127.0.0.1:$LOCAL_PORT: clients without credentials run as default sandbox \"local\", and 1 other sandbox with tokens exist" "$T/airlockd.log"; then
	ok "start-up warning for the listener with a default sandbox"
else
	check_fail "no start-up warning for 127.0.0.1:$LOCAL_PORT"
fi
grep -q "listener 127.0.0.1:$AUTH_PORT:" "$T/airlockd.log" &&
    check_fail "a warning for the listener without a default sandbox" ||
    ok "no warning for the credentials-only listener"

# audit_sandbox_of CLIENT_LOG: the sandbox of the newest audit record whose
# path is PATH (waits for the writer)
audit_sandbox()
{
	"$PYTHON" - "$T/audit.jsonl" "$1" <<'PY'
import sys, itlib
r = itlib.audit_wait(sys.argv[1], lambda r: r.get("id") == sys.argv[2])
print(r.get("sandbox", "") if r else "NONE")
PY
}

# --- curl without credentials: served as "local" on the local listener,
# 407 on the other
code=$(curl -sS -o /dev/null -D "$T/h1" -w '%{http_code}' \
    -x "http://127.0.0.1:$LOCAL_PORT" --cacert "$CA_LOCAL" \
    "https://api.test:$TLS_PORT/echo")
rid=$(tr -d '\r' <"$T/h1" | awk -F': ' 'tolower($1)=="x-airlock-request-id" {print $2}' | tail -n 1)
[ "$code" = 200 ] && [ "$(audit_sandbox "$rid")" = local ] &&
    ok "no credentials, local listener: served as local" ||
    check_fail "local listener without credentials: $code, sandbox $(audit_sandbox "$rid")"
code=$(curl -sS -o "$T/b2" -D "$T/h2" -w '%{http_code}' \
    -x "http://127.0.0.1:$AUTH_PORT" "http://api.test:$PLAIN_PORT/echo")
if [ "$code" = 407 ] && grep -qi '^Proxy-Authenticate: Basic realm="airlock"' "$T/h2" &&
    grep -q '"error":"proxy_auth_required"' "$T/b2"; then
	ok "no credentials, credentials-only listener: 407 with Proxy-Authenticate"
else
	check_fail "credentials-only listener without credentials: $code $(cat "$T/b2")"
fi

# --- curl --proxy-anyauth: asks without credentials first, then answers
# the 407; runs as dev (dev's CA, dev's policy: /stats is outside local's)
for url in "https://api.test:$TLS_PORT/stats" "http://api.test:$PLAIN_PORT/stats"; do
	case $url in https*) ca="--cacert $CA_DEV";; *) ca="";; esac
	code=$(curl -sS -o /dev/null -D "$T/h3" -w '%{http_code}' $ca \
	    --proxy-anyauth -x "http://dev:dev-token-1@127.0.0.1:$AUTH_PORT" \
	    "$url" 2>"$T/curl3.err")
	rid=$(tr -d '\r' <"$T/h3" | awk -F': ' 'tolower($1)=="x-airlock-request-id" {print $2}' | tail -n 1)
	sb=$(audit_sandbox "$rid")
	if [ "$code" = 200 ] && grep -q '^HTTP/1.1 407' "$T/h3" && [ "$sb" = dev ]; then
		ok "curl --proxy-anyauth $url: 407 first, then served as dev"
	else
		check_fail "curl --proxy-anyauth $url: $code, sandbox $sb: $(cat "$T/curl3.err") $(tr -d '\r' <"$T/h3")"
	fi
done
# the same client on the listener with a default sandbox is captured by
# it (why credentialed clients need their own listener): local's policy
code=$(curl -sS -o /dev/null -w '%{http_code}' --proxy-anyauth \
    -x "http://dev:dev-token-1@127.0.0.1:$LOCAL_PORT" \
    "http://api.test:$PLAIN_PORT/stats")
[ "$code" = 403 ] && ok "--proxy-anyauth on the default-sandbox listener runs as local (403 by its policy)" ||
    check_fail "--proxy-anyauth on the default-sandbox listener: $code, want local's 403"

# --- git over https through the credentials-only listener (anyauth)
gitp()
{
	env -u GIT_DIR HOME="$T" GIT_CONFIG_NOSYSTEM=1 GIT_TERMINAL_PROMPT=0 \
	    GIT_SSL_CAINFO="$CA_DEV" \
	    https_proxy="http://dev:dev-token-1@127.0.0.1:$AUTH_PORT" \
	    git "$@"
}
before=$(wc -l <"$T/audit.jsonl")
if gitp ls-remote "https://api.test:$GIT_PORT/proj.git" >"$T/ls.out" 2>"$T/ls.err" &&
    grep -q "^$HEAD_SHA	refs/heads/main" "$T/ls.out"; then
	ok "git ls-remote through the credentials-only listener"
else
	check_fail "git ls-remote: $(cat "$T/ls.err") $(cat "$T/ls.out")"
fi
if gitp clone -q "https://api.test:$GIT_PORT/proj.git" "$T/clone" 2>"$T/clone.err" &&
    [ "$(git -C "$T/clone" rev-parse HEAD)" = "$HEAD_SHA" ] &&
    grep -q two "$T/clone/a.txt"; then
	ok "git clone through the credentials-only listener"
else
	check_fail "git clone: $(cat "$T/clone.err")"
fi
sleep 0.5
"$PYTHON" - "$T/audit.jsonl" "$before" "$GIT_PORT" "$T/git.jsonl" <<'PY' || check_fail "git audit records"
import json, sys, time, itlib
path, before, gport, glog = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
time.sleep(0.5)
recs = [r for r in itlib.audit_records(path)[before:] if r.get("port") == gport]
t = itlib.Checks()
inner = [r for r in recs if r.get("proto") == "https" and r.get("status") == 200]
t.ok(len(inner) >= 3, "git's requests audited inside TLS", repr(recs))
t.ok(all(r.get("sandbox") == "dev" for r in inner),
     "every git request ran as dev", repr([r.get("sandbox") for r in inner]))
t.ok(any(r.get("path", "").endswith("/git-upload-pack") and
         r.get("method") == "POST" for r in inner),
     "the upload-pack POST went through", repr([r.get("path") for r in inner]))
t.ok(any(r.get("status") == 407 for r in recs) or
     any(r.get("reason", "").startswith("proxy credentials")
         for r in itlib.audit_records(path)[before:]),
     "git was asked for credentials (407) first",
     repr([(r.get("status"), r.get("reason")) for r in recs]))
seen = [json.loads(l) for l in open(glog)]
t.ok(seen and not any(s["proxy_auth"] for s in seen),
     "no Proxy-Authorization reached the git server", repr(seen[:3]))
t.done()
PY

# --- git with the same credentials on the default-sandbox listener gets
# local's CA: the certificate does not verify against dev's
if env -u GIT_DIR HOME="$T" GIT_CONFIG_NOSYSTEM=1 GIT_TERMINAL_PROMPT=0 \
    GIT_SSL_CAINFO="$CA_DEV" \
    https_proxy="http://dev:dev-token-1@127.0.0.1:$LOCAL_PORT" \
    git ls-remote "https://api.test:$GIT_PORT/proj.git" >/dev/null 2>"$T/ls2.err"; then
	check_fail "git on the default-sandbox listener verified dev's CA (not captured?)"
else
	ok "git on the default-sandbox listener is captured by local (wrong CA for dev)"
fi

stop_airlockd
finish
