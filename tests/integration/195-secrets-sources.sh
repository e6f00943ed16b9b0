#!/bin/sh
# Secrets: sources. exec: with refresh picks up a new value, keeps the last
# good one while the command fails (logged without the value) and recovers;
# env: and file: (relative to the config's directory, trailing newline
# trimmed) work; a new file value is taken on SIGHUP, and a reload whose
# file is group/other-readable keeps the old configuration. Config checks:
# a secret file readable by group or others, a rule naming a secret whose
# hosts do not cover the rule's host, an unknown secret name, a missing
# environment variable: airlockd -t exits 1 with FILE:LINE:COL and never
# prints a value.
. "$top_srcdir/tests/integration/lib.sh"


# pos FILE TEXT [NTH]: "LINE:COL" (1-based) of the NTH (default 1st)
# occurrence of TEXT in FILE.
pos()
{
	"$PYTHON" - "$1" "$2" "${3:-1}" <<'EOF'
import sys
n = int(sys.argv[3])
for i, line in enumerate(open(sys.argv[1]), 1):
    j = line.find(sys.argv[2])
    while j >= 0:
        n -= 1
        if n == 0:
            print("%d:%d" % (i, j + 1))
            sys.exit(0)
        j = line.find(sys.argv[2], j + 1)
sys.exit(1)
EOF
}

start_secup up
UP_PORT=$SECUP_PORT
AIRLOCK_PORT=$(free_port)
R=$("$PYTHON" -c 'import secrets; print(secrets.token_hex(6))')
SEC_ENV="env-LEAK-$R"
export SEC_ENV AIRLOCK_PORT UP_PORT T R

mkdir -p "$T/cfg/keys"
printf 'file-LEAK-%s-v1\n' "$R" >"$T/cfg/keys/file.key"
chmod 600 "$T/cfg/keys/file.key"
echo 1 >"$T/counter"
cat >"$T/exec.sh" <<EOF
#!/bin/sh
if [ -e "$T/exec.fail" ]; then
	echo "exec-LEAK-$R-failing-stdout"
	echo "exec-LEAK-$R-failing-stderr" >&2
	exit 1
fi
printf 'exec-LEAK-$R-%s\n' "\$(cat "$T/counter")"
EOF

{
	config_common "$AIRLOCK_PORT" sb
	cat <<YAML
upstream:
  allow_networks: ["127.0.0.1/32"]
  hosts: {"api.test": "127.0.0.1"}
secrets:
  - name: ex
    source: "exec:sh $T/exec.sh"
    refresh: 300ms
    hosts: ["api.test"]
    allow_plaintext: true   # also checked over plain HTTP
    inject: {header: X-Ex, value: "\${secret}"}
  - name: envs
    source: env:SEC_ENV
    hosts: ["api.test"]
    allow_plaintext: true   # also checked over plain HTTP
    inject: {header: X-Env, value: "\${secret}"}
  - name: fil
    source: file:keys/file.key
    hosts: ["api.test"]
    allow_plaintext: true   # also checked over plain HTTP
    inject: {header: X-File, value: "\${secret}"}
policies:
  - name: p
    rules:
      - {host: "api.test", ports: [$UP_PORT], secrets: [ex, envs, fil]}
sandboxes:
  - {id: sb, policy: p}
YAML
} >"$T/cfg/airlock.yaml"
"$AIRLOCKD" -c "$T/cfg/airlock.yaml" -t >"$T/t0.out" 2>&1 ||
    fail "good config rejected: $(cat "$T/t0.out")"
start_airlockd "$T/cfg/airlock.yaml"
export AIRLOCK_PID

"$PYTHON" - <<'PY' || check_fail "exec/env/file source checks"
import os, signal, time
import itlib, seclib

E = os.environ
ap, port, T, R = int(E["AIRLOCK_PORT"]), int(E["UP_PORT"]), E["T"], E["R"]
up = seclib.Upstream(T + "/up.jsonl")
t = itlib.Checks()
n = [0]

def get():
    """One request; the injected headers as the upstream saw them."""
    n[0] += 1
    m = "m%d" % n[0]
    r, _ = seclib.once(ap, "http", "api.test", port, "GET", "/x",
                       ["X-Mark: " + m])
    rec = up.one(m)
    if r.status != 200 or rec is None:
        return None
    return {h: rec.header_all(h) for h in ("X-Ex", "X-Env", "X-File")}

def ex_value():
    g = get()
    return g["X-Ex"] if g else None

def log():
    with open(T + "/airlockd.log", "rb") as f:
        return f.read()

def wait_ex(want, secs):
    seen = []
    end = time.time() + secs
    while time.time() < end:
        v = ex_value()
        seen.append(v)
        if v == [want]:
            return seen, True
        time.sleep(0.1)
    return seen, False

g = get()
t.ok(g is not None and g["X-Ex"] == ["exec-LEAK-%s-1" % R],
     "exec: first value, trailing newline trimmed", g)
t.ok(g is not None and g["X-Env"] == ["env-LEAK-" + R], "env: value", g)
t.ok(g is not None and g["X-File"] == ["file-LEAK-%s-v1" % R],
     "file: relative to the config's directory, newline trimmed", g)

# a new value from the command is picked up within a few refreshes
with open(T + "/counter", "w") as f:
    f.write("2\n")
seen, ok = wait_ex("exec-LEAK-%s-2" % R, 4)
t.ok(ok, "exec refresh: the new value is used", seen)
t.ok(all(v in (["exec-LEAK-%s-1" % R], ["exec-LEAK-%s-2" % R])
         for v in seen), "exec refresh: only good values in between", seen)

# the command fails: the last good value stays
open(T + "/exec.fail", "w").close()
with open(T + "/counter", "w") as f:
    f.write("3\n")
time.sleep(1.3)         # four refresh periods
vals = []
for i in range(5):
    vals.append(ex_value())
    time.sleep(0.1)
t.ok(all(v == ["exec-LEAK-%s-2" % R] for v in vals),
     "exec failing: requests keep the last good value", vals)
L = log()
warn = [l for l in L.splitlines() if b"refresh" in l and b'"ex"' in l and
        (b"fail" in l or b"exit" in l)]
t.ok(warn, "exec failing: airlockd logs a refresh failure naming the secret",
     L[-2000:])
t.ok(b"LEAK" not in L, "exec failing: the log holds no value, no command "
     "output", [l for l in L.splitlines() if b"LEAK" in l])
# it works again: the new value
os.unlink(T + "/exec.fail")
seen, ok = wait_ex("exec-LEAK-%s-3" % R, 4)
t.ok(ok, "exec recovered: the new value is used", seen)
L = log()
t.ok(b"LEAK" not in L, "exec recovered: no value in the log")

# SIGHUP: a new file value is loaded
fk = T + "/cfg/keys/file.key"
with open(fk, "w") as f:
    f.write("file-LEAK-%s-v2\n" % R)
os.kill(int(E["AIRLOCK_PID"]), signal.SIGHUP)
end = time.time() + 5
g = None
while time.time() < end:
    g = get()
    if g and g["X-File"] == ["file-LEAK-%s-v2" % R]:
        break
    time.sleep(0.1)
t.ok(g and g["X-File"] == ["file-LEAK-%s-v2" % R],
     "reload: the new file value is used", g)
# a reload whose secret file became group-readable: the old config stays
with open(fk, "w") as f:
    f.write("file-LEAK-%s-v3\n" % R)
os.chmod(fk, 0o640)
nlog = len(log())
os.kill(int(E["AIRLOCK_PID"]), signal.SIGHUP)
time.sleep(1.0)
g = get()
t.ok(g and g["X-File"] == ["file-LEAK-%s-v2" % R] and
     g["X-Env"] == ["env-LEAK-" + R],
     "reload refused: requests keep the old configuration's values", g)
L = log()[nlog:]
t.ok(b"file.key" in L or b'"fil"' in L,
     "reload refused: the log says why", L)
t.ok(b"LEAK" not in log(), "reload refused: no value in the log")
os.chmod(fk, 0o600)
t.done()
PY
stop_airlockd
grep -q "LEAK" "$T/airlockd.log" "$T/audit.jsonl" "$T/airlockd.out" &&
    check_fail "a value in the log, audit or stdout"

# ---- configuration checks: airlockd -t
# check_t NAME WANT_LINE:COL PATTERN [VALUE...]: -t on $T/NAME.yaml exits 1,
# prints FILE:LINE:COL: ...PATTERN..., no VALUE.
check_t()
{
	_n=$1
	_f=$T/$1.yaml
	_want=$2
	_pat=$3
	shift 3
	[ -n "$_want" ] || hard_error "$_n: no position to expect"
	"$AIRLOCKD" -c "$_f" -t >"$T/$_n.out" 2>&1
	_rc=$?
	[ "$_rc" = 1 ] && ok "$_n: -t exits 1" ||
	    check_fail "$_n: -t exit $_rc, want 1: $(cat "$T/$_n.out")"
	if grep -q "^$_f:$_want: .*$_pat" "$T/$_n.out"; then
		ok "$_n: $_f:$_want: ...$_pat"
	else
		check_fail "$_n: want '$_f:$_want: ...$_pat' in: $(cat "$T/$_n.out")"
	fi
	for _v in "$@"; do
		grep -qF -e "$_v" "$T/$_n.out" &&
		    check_fail "$_n: -t output holds the value $_v"
	done
}

# file readable by group / others
for mode in 644 640 604; do
	printf 'mode-LEAK-%s\n' "$R" >"$T/cfg/keys/m$mode.key"
	chmod "$mode" "$T/cfg/keys/m$mode.key"
	cat >"$T/mode$mode.yaml" <<YAML
secrets:
  - name: other
    source: env:SEC_ENV
    hosts: ["api.test"]
    allow_plaintext: true   # also checked over plain HTTP
    inject: {header: X-Other, value: "\${secret}"}
  - name: loose
    source: file:$T/cfg/keys/m$mode.key
    hosts: ["api.test"]
    allow_plaintext: true   # also checked over plain HTTP
    inject: {header: X-Loose, value: "\${secret}"}
policies:
  - name: p
    rules:
      - {host: "api.test", secrets: [loose]}
sandboxes:
  - {id: sb, policy: p}
YAML
	# the position of the secret's mapping, or of its source value
	p1=$(pos "$T/mode$mode.yaml" "name: loose")
	p2=$(pos "$T/mode$mode.yaml" "file:$T")
	"$AIRLOCKD" -c "$T/mode$mode.yaml" -t >"$T/mode$mode.out" 2>&1
	rc=$?
	[ "$rc" = 1 ] && ok "file mode $mode: -t exits 1" ||
	    check_fail "file mode $mode: -t exit $rc, want 1: $(cat "$T/mode$mode.out")"
	if grep -Eq "^$T/mode$mode.yaml:($p1|$p2): .*loose.*(group|others|mode)" \
	    "$T/mode$mode.out"; then
		ok "file mode $mode: FILE:LINE:COL names the secret and the reason"
	else
		check_fail "file mode $mode: want $T/mode$mode.yaml:$p1 (or $p2): in: $(cat "$T/mode$mode.out")"
	fi
	grep -q LEAK "$T/mode$mode.out" && check_fail "file mode $mode: value printed"
done
# the daemon itself refuses to start on it, same message, no value
AIRLOCK_PORT2=$(free_port)
{
	config_common "$AIRLOCK_PORT2" sb
	sed -n '/^secrets:/,$p' "$T/mode644.yaml"
} >"$T/mode644d.yaml"
"$AIRLOCKD" -c "$T/mode644d.yaml" >"$T/d.out" 2>"$T/d.err" &
dpid=$!
track_pid "$dpid"
wait_exit "$dpid" 10
[ "$WAIT_STATUS" != 0 ] && [ "$WAIT_STATUS" != 124 ] &&
    ok "daemon with a 0644 secret file exits ($WAIT_STATUS)" ||
    check_fail "daemon with a 0644 secret file: status $WAIT_STATUS"
grep -q "mode644d.yaml:[0-9]*:[0-9]*: .*loose" "$T/d.err" ||
    check_fail "daemon: no FILE:LINE:COL for the loose file: $(cat "$T/d.err")"
grep -q LEAK "$T/d.err" "$T/d.out" && check_fail "daemon printed the value"

# rule / binding mismatch, unknown secret, missing variable
cat >"$T/bind.yaml" <<YAML
secrets:
  - name: bound
    source: "literal:lit-LEAK-$R"
    hosts: ["api.test", "*.svc.test"]
    allow_plaintext: true   # also checked over plain HTTP
    inject: {header: X-B, value: "\${secret}"}
  - name: fine
    source: "literal:lit2-LEAK-$R"
    hosts: ["*"]
    allow_plaintext: true   # also checked over plain HTTP
    inject: {header: X-F, value: "\${secret}"}
policies:
  - name: p
    rules:
      - {host: "api.test", secrets: [fine, bound]}
      - {host: "a.svc.test", secrets: [bound]}
      - {host: "other.test", secrets: [fine, bound]}
sandboxes:
  - {id: sb, policy: p}
YAML
check_t bind "$(pos "$T/bind.yaml" "bound]" 3)" '"bound".*other\.test' \
    "lit-LEAK-$R" "lit2-LEAK-$R"
# only that one: the covered rules are fine
[ "$(grep -c "^$T/bind.yaml:[0-9]*:[0-9]*: " "$T/bind.out")" = 1 ] && ok "bind: one problem reported" ||
    check_fail "bind: want exactly one problem: $(cat "$T/bind.out")"

cat >"$T/bind2.yaml" <<YAML
secrets:
  - name: bound
    source: "literal:lit-LEAK-$R"
    hosts: ["api.test"]
    allow_plaintext: true   # also checked over plain HTTP
    inject: {header: X-B, value: "\${secret}"}
policies:
  - name: p
    rules:
      - {host: "*.api.test", secrets: [bound]}
      - {host: "*", secrets: [bound]}
      - {host: "api.test", secrets: [nosuch]}
sandboxes:
  - {id: sb, policy: p}
YAML
check_t bind2 "$(pos "$T/bind2.yaml" "bound]" 1)" '"bound".*\*\.api\.test' \
    "lit-LEAK-$R"
check_t bind2 "$(pos "$T/bind2.yaml" "bound]" 2)" '"bound"' "lit-LEAK-$R"
check_t bind2 "$(pos "$T/bind2.yaml" "nosuch]")" '"nosuch"' "lit-LEAK-$R"

cat >"$T/env.yaml" <<YAML
secrets:
  - name: e
    source: env:AIRLOCK_TEST_NO_SUCH_VAR_$R
    hosts: ["api.test"]
    allow_plaintext: true   # also checked over plain HTTP
    inject: {header: X-E, value: "\${secret}"}
policies:
  - name: p
    rules:
      - {host: "api.test", secrets: [e]}
sandboxes:
  - {id: sb, policy: p}
YAML
"$AIRLOCKD" -c "$T/env.yaml" -t >"$T/env.out" 2>&1
rc=$?
[ "$rc" = 1 ] && grep -q "^$T/env.yaml:[0-9]*:[0-9]*: .*AIRLOCK_TEST_NO_SUCH_VAR_$R" "$T/env.out" &&
    ok "env: a missing variable is an error naming it" ||
    check_fail "env: missing variable: exit $rc: $(cat "$T/env.out")"
finish
