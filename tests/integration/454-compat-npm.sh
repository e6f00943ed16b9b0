#!/bin/sh
# Client compatibility (issue 15, point 8): npm install through the
# explicit proxy (--proxy/--https-proxy with credentials, cafile = the
# sandbox CA) from a local registry mock (compat_registry.py, HTTPS as
# registry.test): packuments and tarballs over intercepted TLS.
#   plain:  compat-plain, no scoped name
#   scoped: compat-top, which depends on @scope/name; npm asks for its
#           packument as /@scope%2fname (issue 15 point 2: %2F allowed,
#           sent upstream as the client wrote it)
# Each: npm's exit status, the package in node_modules (and require()
# works), what the registry got, the audit records.
. "$top_srcdir/tests/integration/lib.sh"
. "$top_srcdir/tests/integration/compat.sh"

command -v npm >/dev/null 2>&1 || skip "npm not found"
command -v node >/dev/null 2>&1 || skip "node not found"
compat_pki
start_py_upstream registry compat_registry.py -l "$T/registry.jsonl" \
    -C "$T/pki/compat.crt" -K "$T/pki/compat.key" \
    -u "https://registry.test:PORT/"
REG_PORT=$PY_PORT
AIRLOCK_PORT=$(free_port)
COMPAT_CONFIG=$T/airlock.yaml
{
	config_common "$AIRLOCK_PORT"
	cat <<YAML
upstream:
  ca_file: $T/pki/ca.crt
  allow_networks: ["127.0.0.1/32"]
  hosts: {"registry.test": "127.0.0.1"}
policies:
  - name: p
    rules:
      - {host: "registry.test", ports: [$REG_PORT], methods: [GET]}
sandboxes:
  - {id: n, policy: p, token: "literal:tok-n"}
YAML
} >"$COMPAT_CONFIG"
start_airlockd "$COMPAT_CONFIG"
export T REG_PORT

PROXY=http://n:tok-n@127.0.0.1:$AIRLOCK_PORT
: >"$T/npmrc"
HOME=$T/home
mkdir -p "$HOME"
export HOME

# npm_case NAME PACKAGE EXPECT-JS: npm install PACKAGE in a fresh project.
npm_case()
{
	_n=$1
	_pkg=$2
	_expect=$3
	_dir=$T/proj-$_n
	mkdir -p "$_dir"
	echo '{"name": "p", "version": "1.0.0", "private": true}' >"$_dir/package.json"
	_n0=$(wc -l <"$T/audit.jsonl" 2>/dev/null || echo 0)
	: >"$T/registry.jsonl"
	if (cd "$_dir" && timeout 120 npm install "$_pkg" \
	    --userconfig "$T/npmrc" --cache "$T/npm-cache-$_n" \
	    --registry "https://registry.test:$REG_PORT/" \
	    --proxy "$PROXY" --https-proxy "$PROXY" \
	    --cafile "$T/state/ca/n/ca.crt" --strict-ssl=true \
	    --no-audit --no-fund --no-update-notifier --fetch-retries=0 \
	    --loglevel=http) >"$T/npm-$_n.out" 2>&1; then
		ok "$_n: npm install $_pkg"
	else
		check_fail "$_n: npm install $_pkg failed: $(grep -i 'err' "$T/npm-$_n.out" | head -n 4 | tr '\n' ' ' | cut -c1-400)"
	fi
	_got=$(cd "$_dir" && node -e "process.stdout.write(require('$_pkg'))" 2>&1)
	[ "$_got" = "$_expect" ] && ok "$_n: require('$_pkg') → $_expect" ||
	    check_fail "$_n: require('$_pkg'): $_got"
	"$PYTHON" - "$_n" "$_dir" "$_n0" "$_pkg" <<'PY' || check_fail "$_n: node_modules, registry and audit checks"
import json, os, sys, time, itlib
name, pdir, n0, top = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
T, rp = os.environ["T"], itlib.env_int("REG_PORT")
t = itlib.Checks()
scoped = top == "compat-top"
want_pkgs = [top] + (["@scope/name"] if scoped else [])
for p in want_pkgs:
    try:
        with open(os.path.join(pdir, "node_modules", p, "package.json")) as f:
            v = json.load(f).get("version")
    except (OSError, ValueError) as e:
        v = repr(e)
    t.ok(v == "1.0.0", name + ": node_modules/%s is 1.0.0" % p, v)
with open(T + "/registry.jsonl") as f:
    reqs = [json.loads(x) for x in f if x.strip()]
seen = [(r["target"], r["status"]) for r in reqs]
want = [("/" + top, 200), ("/%s/-/%s-1.0.0.tgz" % (top, top), 200)]
if scoped:
    want += [("/@scope%2fname", 200), ("/@scope/name/-/name-1.0.0.tgz", 200)]
for w in want:
    t.ok(w in seen, name + ": the registry got %s → %d" % w, seen)
t.ok(all(r["status"] == 200 for r in reqs),
     name + ": nothing the registry got was unknown to it", seen)
hdrs = [k.lower() for r in reqs for k, _ in r["headers"]]
t.ok("proxy-authorization" not in hdrs,
     name + ": no Proxy-Authorization at the registry")
time.sleep(0.5)
recs = [r for r in itlib.audit_records(T + "/audit.jsonl")[n0:]
        if r.get("method") == "GET"]
paths = [(r.get("path"), r.get("status")) for r in recs]
# the audit may name the scoped packument as sent or with %2F decoded
for p in [["/" + top]] + ([["/@scope%2fname", "/@scope/name"]] if scoped
                          else []):
    r = [x for x in recs if (x.get("path") or "").lower() in p]
    p = " or ".join(p)
    t.ok(r and r[0].get("status") == 200 and r[0].get("sandbox") == "n" and
         r[0].get("tls") == "intercept" and r[0].get("decision") == "allow",
         name + ": audit GET %s 200 allow sandbox n intercept" % p, paths)
t.ok(len([r for r in recs if (r.get("path") or "").endswith(".tgz") and
          r.get("status") == 200]) == len(want_pkgs),
     name + ": the tarballs are audited", paths)
t.done()
PY
}

npm_case plain compat-plain "I am compat-plain"
daemon_check "npm install compat-plain"
npm_case scoped compat-top "I am compat-top + I am @scope/name"
daemon_check "npm install compat-top (@scope/name)"
stop_airlockd
finish
