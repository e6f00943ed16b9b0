#!/bin/sh
# Client compatibility (issue 15, point 8): git clone and push over https
# through the explicit proxy, with credentials in https_proxy. git uses
# libcurl's "anyauth" for the proxy: its first CONNECT carries no
# credentials, and only after the 407 does it send them. The upstream is
# `git http-backend` behind compat_git_server.py (HTTPS, the test PKI);
# git trusts only the sandbox CA (GIT_SSL_CAINFO).
#   A. an authenticated listener, no default_sandbox anywhere: the 407,
#      then clone and push as sandbox g; what git got (the files, the
#      pushed commit in the bare repository), what the server saw (the
#      smart-HTTP requests, no Proxy-Authorization) and the audit records.
#   B. issue 15 point 5: listen.proxy with a plain listener (the global
#      default_sandbox "local" applies) and a map {address,
#      default_sandbox: null}: a warning at start, git through the second
#      is sandbox g (clone and push), curl without credentials is "local"
#      on the first and 407 on the second.
. "$top_srcdir/tests/integration/lib.sh"
. "$top_srcdir/tests/integration/compat.sh"

command -v git >/dev/null 2>&1 || skip "git not found"
GHB=$(git --exec-path)/git-http-backend
[ -x "$GHB" ] || skip "$GHB not found"
compat_pki

# the bare repository the server exports, with one commit
REPOS=$T/repos
mkdir -p "$REPOS"
git init -q --bare -b main "$REPOS/proj.git" || hard_error "git init --bare"
git -C "$REPOS/proj.git" config http.receivepack true
git init -q -b main "$T/seed" &&
    echo "seeded by 452" >"$T/seed/README" &&
    git -C "$T/seed" add README &&
    git -C "$T/seed" -c user.name=t -c user.email=t@t commit -qm seed &&
    git -C "$T/seed" push -q "$REPOS/proj.git" main ||
    hard_error "seeding the repository"

start_py_upstream gitsrv compat_git_server.py -l "$T/gitsrv.jsonl" \
    -C "$T/pki/compat.crt" -K "$T/pki/compat.key" -r "$REPOS" -b "$GHB"
GIT_PORT=$PY_PORT
AIRLOCK_PORT=$(free_port)
AIRLOCK_PORT2=$(free_port)
export T GIT_PORT

# Everything git reads from the environment: no user config, the sandbox
# CA only, credentials in https_proxy.
GIT_CONFIG_NOSYSTEM=1
HOME=$T/home
mkdir -p "$HOME"
GIT_TERMINAL_PROMPT=0
export GIT_CONFIG_NOSYSTEM HOME GIT_TERMINAL_PROMPT

policies()
{
	cat <<YAML
upstream:
  ca_file: $T/pki/ca.crt
  allow_networks: ["127.0.0.1/32"]
  hosts: {"git.test": "127.0.0.1", "api.test": "127.0.0.1"}
policies:
  - name: gitp
    rules:
      - {host: "git.test", ports: [$GIT_PORT], methods: [GET, POST], paths: ["/proj.git/*"]}
  - name: localp
    rules:
      - {host: "api.test", ports: [$GIT_PORT]}
sandboxes:
  - {id: g, policy: gitp, token: "literal:tok-g"}
  - {id: local, policy: localp}
YAML
}

# git_round WHAT PROXY-PORT SANDBOX: clone, commit, push through the proxy
# as g, with the checks of what git, the server and the audit saw.
git_round()
{
	_what=$1
	_pp=$2
	_tag=$3
	_dir=$T/clone-$_tag
	: >"$T/gitsrv.jsonl"
	_n0=$(wc -l <"$T/audit.jsonl" 2>/dev/null || echo 0)
	if https_proxy=http://g:tok-g@127.0.0.1:$_pp \
	    GIT_SSL_CAINFO=$T/state/ca/g/ca.crt \
	    git clone -q "https://git.test:$GIT_PORT/proj.git" "$_dir" \
	    >"$T/git-$_tag.out" 2>&1; then
		ok "$_what: git clone"
	else
		check_fail "$_what: git clone failed: $(tail -n 5 "$T/git-$_tag.out" | tr '\n' ' ')"
		return 0
	fi
	[ "$(cat "$_dir/README" 2>/dev/null)" = "seeded by 452" ] &&
	    ok "$_what: the clone has the repository's file" ||
	    check_fail "$_what: clone README: $(cat "$_dir/README" 2>&1)"
	echo "pushed via $_tag" >"$_dir/$_tag.txt"
	git -C "$_dir" add "$_tag.txt" &&
	    git -C "$_dir" -c user.name=t -c user.email=t@t commit -qm "$_tag" ||
	    hard_error "local commit"
	_head=$(git -C "$_dir" rev-parse HEAD)
	if https_proxy=http://g:tok-g@127.0.0.1:$_pp \
	    GIT_SSL_CAINFO=$T/state/ca/g/ca.crt \
	    git -C "$_dir" push -q origin main >"$T/git-push-$_tag.out" 2>&1; then
		ok "$_what: git push"
	else
		check_fail "$_what: git push failed: $(tail -n 5 "$T/git-push-$_tag.out" | tr '\n' ' ')"
	fi
	_got=$(git -C "$REPOS/proj.git" rev-parse main)
	[ "$_got" = "$_head" ] &&
	    ok "$_what: the server's repository has the pushed commit" ||
	    check_fail "$_what: server main is $_got, pushed $_head"
	"$PYTHON" - "$_what" "$_n0" <<'PY' || check_fail "$_what: server and audit checks"
import json, os, sys, time, itlib
what, n0 = sys.argv[1], int(sys.argv[2])
T, gp = os.environ["T"], itlib.env_int("GIT_PORT")
t = itlib.Checks()
with open(T + "/gitsrv.jsonl") as f:
    reqs = [json.loads(x) for x in f if x.strip()]
seen = [(r["method"], r["target"], r["status"]) for r in reqs]
want = [("GET", "/proj.git/info/refs?service=git-upload-pack", 200),
        ("POST", "/proj.git/git-upload-pack", 200),
        ("GET", "/proj.git/info/refs?service=git-receive-pack", 200),
        ("POST", "/proj.git/git-receive-pack", 200)]
for w in want:
    t.ok(w in seen, what + ": the server got %s %s → %d" % w, seen)
hdrs = [k.lower() for r in reqs for k, _ in r["headers"]]
t.ok("proxy-authorization" not in hdrs,
     what + ": no Proxy-Authorization reached the server", hdrs)
t.ok(all(dict((k.lower(), v) for k, v in r["headers"]).get("host") ==
         "git.test:%d" % gp for r in reqs),
     what + ": Host git.test:%d on every request" % gp)
time.sleep(0.5)
recs = itlib.audit_records(T + "/audit.jsonl")[n0:]
end = time.time() + 5
while len([r for r in recs if r.get("path", "").startswith("/proj.git/")]) \
        < 4 and time.time() < end:
    time.sleep(0.2)
    recs = itlib.audit_records(T + "/audit.jsonl")[n0:]
inner = [r for r in recs if r.get("path", "").startswith("/proj.git/")]
t.ok(len(inner) >= 4, what + ": the smart-HTTP requests are audited",
     [(r.get("method"), r.get("path")) for r in recs])
bad = [r for r in inner if (r.get("sandbox"), r.get("decision"),
       r.get("status"), r.get("proto"), r.get("tls"), r.get("rule"),
       r.get("host")) != ("g", "allow", 200, "https", "intercept",
                          "gitp#0", "git.test")]
t.ok(inner and not bad,
     what + ": each is sandbox g, allow, 200, https, intercept, gitp#0", bad)
# anyauth: a CONNECT without credentials first, answered 407
t.ok(any(r.get("method") == "CONNECT" and r.get("status") == 407
         for r in recs),
     what + ": git's first CONNECT (no credentials) got the 407",
     [(r.get("method"), r.get("status"), r.get("sandbox")) for r in recs])
t.ok(not any(r.get("sandbox") == "local" for r in recs),
     what + ": nothing of git's ran as the default sandbox",
     [r for r in recs if r.get("sandbox") == "local"])
t.done()
PY
}

# --- A: one authenticated listener
COMPAT_CONFIG=$T/a.yaml
{ config_common "$AIRLOCK_PORT"; policies; } >"$COMPAT_CONFIG"
start_airlockd "$COMPAT_CONFIG"
git_round "A (authenticated listener)" "$AIRLOCK_PORT" a
daemon_check "git clone and push (A)"
stop_airlockd

# --- B: a credential-less listener next to an authenticated one
COMPAT_CONFIG=$T/b.yaml
{
	echo "listen:"
	echo "  proxy: [\"127.0.0.1:$AIRLOCK_PORT\", {address: \"127.0.0.1:$AIRLOCK_PORT2\", default_sandbox: null}]"
	echo "  default_sandbox: local"
	echo "state_dir: $T/state"
	echo "workers: 2"
	echo "audit: {file: $T/audit.jsonl}"
	policies
} >"$COMPAT_CONFIG"
if ! "$AIRLOCKD" -c "$COMPAT_CONFIG" -t >"$T/b-check.out" 2>&1; then
	check_fail "B: a listener map {address, default_sandbox} is refused (issue 15 point 5): $(head -n 3 "$T/b-check.out" | tr '\n' ' ')"
	finish
fi
: >"$T/airlockd.log"
start_airlockd "$COMPAT_CONFIG" "$AIRLOCK_PORT"
wait_port "$AIRLOCK_PORT2" 10 || check_fail "B: nothing listens on $AIRLOCK_PORT2"
grep -i 'warn' "$T/airlockd.log" | grep -q 'default_sandbox' &&
    ok "B: a warning at start names default_sandbox on a listener that also serves credentialed sandboxes" ||
    check_fail "B: no start warning about default_sandbox: $(grep -i warn "$T/airlockd.log" | head -n 3)"
git_round "B (authenticated listener beside a default one)" "$AIRLOCK_PORT2" b
daemon_check "git clone and push (B)"
# curl without credentials: the default sandbox on the first listener,
# 407 on the second
code=$(curl -sS -m 10 -x "http://127.0.0.1:$AIRLOCK_PORT" -o "$T/c1" \
    -D "$T/h1" -w '%{http_code}' "http://api.test:$GIT_PORT/") || code=failed
rid=$(sed -n 's/^[Xx]-[Aa]irlock-[Rr]equest-[Ii]d: *//p' "$T/h1" | tr -d '\r')
rec=$(audit_wait_id "$rid" 2>/dev/null) || rec=
if [ -n "$rec" ] && [ "$(audit_field "$rec" sandbox)" = local ] &&
    [ "$(audit_field "$rec" decision)" = allow ]; then
	ok "B: no credentials on the first listener → the default sandbox ($code)"
else
	check_fail "B: no credentials on the first listener: $code, audit '$rec'"
fi
code=$(curl -sS -m 10 -x "http://127.0.0.1:$AIRLOCK_PORT2" -o "$T/c2" \
    -D "$T/h2" -w '%{http_code}' "http://api.test:$GIT_PORT/") || code=failed
[ "$code" = 407 ] && grep -qi '^Proxy-Authenticate: Basic' "$T/h2" &&
    ok "B: no credentials on the second listener → 407" ||
    check_fail "B: no credentials on the second listener: $code $(cat "$T/h2")"
stop_airlockd
finish
