#!/bin/sh
# npm installs a scoped package through airlock (issue 15.2: "no npm tree
# with a scoped package installs"). A small registry on loopback serves
# @scope/name; npm asks for its metadata as "/@scope%2fname" and for the
# tarball as "/@scope/name/-/name-1.0.0.tgz". Under a rule with
# paths: ["/@scope/*"] and under one with ["/*"] the install succeeds and
# the registry sees npm's request line byte for byte; a package of another
# scope is refused (403) and never reaches the registry.
. "$top_srcdir/tests/integration/lib.sh"

command -v npm >/dev/null 2>&1 || skip "npm not found"
AIRLOCK_PORT=$(free_port)
REG_PORT=$(free_port)
export AIRLOCK_PORT REG_PORT T

# the registry: packument and tarball of @scope/name, every request line
# logged to $T/registry.log
cat >"$T/registry.py" <<'PY'
import base64, hashlib, http.server, io, json, os, sys, tarfile
port, T = int(os.environ["REG_PORT"]), os.environ["T"]
buf = io.BytesIO()
with tarfile.open(fileobj=buf, mode="w:gz") as tf:
    for name, data in (("package/package.json", json.dumps(
            {"name": "@scope/name", "version": "1.0.0",
             "main": "index.js"}).encode()),
            ("package/index.js", b"module.exports = 'scoped ok';\n")):
        ti = tarfile.TarInfo(name)
        ti.size = len(data)
        tf.addfile(ti, io.BytesIO(data))
tgz = buf.getvalue()
base = "http://registry.test:%d" % port
doc = {"name": "@scope/name", "dist-tags": {"latest": "1.0.0"},
       "versions": {"1.0.0": {
           "name": "@scope/name", "version": "1.0.0",
           "dist": {"tarball": base + "/@scope/name/-/name-1.0.0.tgz",
                    "shasum": hashlib.sha1(tgz).hexdigest(),
                    "integrity": "sha512-" + base64.b64encode(
                        hashlib.sha512(tgz).digest()).decode()}}}}

class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        with open(T + "/registry.log", "a") as f:
            f.write(self.requestline + "\n")
        if self.path.lower() in ("/@scope%2fname", "/@scope/name"):
            body, ct = json.dumps(doc).encode(), "application/json"
        elif self.path == "/@scope/name/-/name-1.0.0.tgz":
            body, ct = tgz, "application/octet-stream"
        else:
            body, ct = b'{"error":"not found"}', "application/json"
            self.send_response(404)
            self.send_header("Content-Type", ct)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        self.send_response(200)
        self.send_header("Content-Type", ct)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):
        pass

http.server.ThreadingHTTPServer(("127.0.0.1", port), H).serve_forever()
PY
"$PYTHON" "$T/registry.py" 2>"$T/registry.err" &
track_pid $!
wait_port "$REG_PORT" 10 || hard_error "registry did not start: $(cat "$T/registry.err")"

{
	config_common "$AIRLOCK_PORT"
	cat <<YAML
upstream:
  allow_networks: ["127.0.0.1/32"]
  hosts: {"registry.test": "127.0.0.1"}
policies:
  - name: scope
    rules:
      - {host: "registry.test", ports: [$REG_PORT], methods: [GET],
         paths: ["/@scope/*"]}
  - name: star
    rules:
      - {host: "registry.test", ports: [$REG_PORT], paths: ["/*"]}
sandboxes:
  - {id: s1, policy: scope, token: "literal:tok-s1"}
  - {id: s2, policy: star, token: "literal:tok-s2"}
YAML
} >"$T/airlock.yaml"
start_airlockd "$T/airlock.yaml"

# npm_install SANDBOX:TOKEN DIR PACKAGE: npm through the proxy, fresh cache
npm_install()
{
	mkdir -p "$2"
	(cd "$2" && echo '{"name":"t","version":"0.0.0","private":true}' \
	    >package.json &&
	 HOME=$T/home npm install "$3" \
	    --registry="http://registry.test:$REG_PORT/" \
	    --proxy="http://$1@127.0.0.1:$AIRLOCK_PORT/" \
	    --cache="$2/.cache" --no-audit --no-fund --no-update-notifier \
	    --fetch-retries=0 --loglevel=error) >"$2.out" 2>&1
}

for sb in s1:tok-s1 s2:tok-s2; do
	id=${sb%%:*}
	: >"$T/registry.log"
	if npm_install "$sb" "$T/p-$id" @scope/name; then
		ok "$id: npm install @scope/name through airlock"
	else
		check_fail "$id: npm install @scope/name failed: $(tail -5 "$T/p-$id.out")"
		continue
	fi
	got=$(node -e "console.log(require('$T/p-$id/node_modules/@scope/name'))")
	[ "$got" = "scoped ok" ] && ok "$id: the installed package loads" ||
	    check_fail "$id: installed package gave '$got'"
	grep -qx 'GET /@scope%2[fF]name HTTP/1.1' "$T/registry.log" &&
	    ok "$id: the registry saw npm's /@scope%2fname as sent" ||
	    check_fail "$id: registry log: $(cat "$T/registry.log")"
	sent=$(grep -o '/@scope%2[fF]name' "$T/registry.log" | head -n 1)
	if "$PYTHON" - "$T/audit.jsonl" "$id" "$sent" <<'PY'
import sys, itlib
a = itlib.audit_wait(sys.argv[1], lambda r: r.get("sandbox") == sys.argv[2]
                     and r.get("path") == sys.argv[3])
want = "scope#0" if sys.argv[2] == "s1" else "star#0"
if a is None or a.get("decision") != "allow" or a.get("rule") != want \
        or a.get("host") != "registry.test":
    print("audit: %r" % a)
    sys.exit(1)
PY
	then
		ok "$id: audited as allowed with the path as sent and the rule"
	else
		check_fail "$id: no audit record allowing $sent under its rule"
	fi
done

# another scope under "/@scope/*": refused, never at the registry
: >"$T/registry.log"
if npm_install s1:tok-s1 "$T/p-other" @other/pkg; then
	check_fail "npm install @other/pkg succeeded under /@scope/*"
else
	ok "npm install @other/pkg refused under /@scope/*"
fi
if grep -q '@other' "$T/registry.log"; then
	check_fail "@other reached the registry: $(cat "$T/registry.log")"
else
	ok "@other never reached the registry"
fi
if "$PYTHON" - "$T/audit.jsonl" <<'PY'
import sys, itlib
a = itlib.audit_wait(sys.argv[1], lambda r: r.get("sandbox") == "s1" and
                     "@other" in (r.get("path") or ""))
sys.exit(0 if a and a.get("status") == 403 and
         a.get("host") == "registry.test" else 1)
PY
then
	ok "the refusal of @other is audited (403, host, path)"
else
	check_fail "no 403 audit record for @other"
fi
stop_airlockd
finish
