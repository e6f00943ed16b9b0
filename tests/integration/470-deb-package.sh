#!/bin/sh
# The Debian package (debian/, docs/operations.md "Installing the
# package"): built with dpkg-buildpackage from the files make dist ships
# (a copy outside the source tree, which stays as it was), installed with
# dpkg -i into this machine, airlockd -t on the installed config, airlockd
# started by hand as the packaged user _airlock, requests through it (a
# denial, inside TLS too, and after an operator's edit and a reload, an
# allowed one), its audit log rotated by the installed logrotate file,
# stopped cleanly, and dpkg --purge leaving nothing behind.
#
# Root only, and it changes this machine while it runs (a package, a
# system user): it skips when an airlock package, the user or its
# directories are there already, and purges whatever it installed on any
# exit.
. "$top_srcdir/tests/integration/lib.sh"

[ "$(id -u)" -eq 0 ] || skip "needs root (dpkg -i into this machine)"
# dpkg needs root's sbin directories (ldconfig, start-stop-daemon)
PATH=$PATH:/usr/local/sbin:/usr/sbin:/sbin
export PATH
command -v dpkg-buildpackage >/dev/null 2>&1 ||
    skip "dpkg-buildpackage not found (Debian: dpkg-dev; scripts/install-deps.sh --test)"
command -v dh >/dev/null 2>&1 ||
    skip "dh not found (Debian: debhelper; scripts/install-deps.sh --test)"
command -v setpriv >/dev/null 2>&1 || skip "setpriv not found (util-linux)"
st=$(dpkg-query -W -f='${db:Status-Abbrev}' airlock 2>/dev/null)
case $st in
"" | un*) ;;
*) skip "the airlock package is on this machine already ($st): not touching it" ;;
esac
getent passwd _airlock >/dev/null && skip "user _airlock exists already"
getent group _airlock >/dev/null && skip "group _airlock exists already"
for p in /etc/airlock /var/lib/airlock /var/log/airlock \
    /etc/logrotate.d/airlock; do
	[ -e "$p" ] && skip "$p exists already: not touching it"
done
if pidof systemd >/dev/null 2>&1; then
	note "systemd runs here; airlockd is still started by hand (the unit is installed, not enabled)"
else
	note "no systemd here: airlockd started by hand as _airlock"
fi

# make in a make check: the parent's jobserver and flags are not ours
unset MAKEFLAGS MFLAGS MAKELEVEL 2>/dev/null || true
CONF=/etc/airlock/airlock.yaml

# sect: a group of checks starts; sect_ok MSG: "ok - MSG" when none of
# them failed
sect() { _sect_mark=$_it_failed; }
sect_ok() { [ "$_it_failed" != "$_sect_mark" ] || ok "$*"; }

# dpkg_retry LOG ARGS...: dpkg ARGS, again while another dpkg holds its lock
dpkg_retry()
{
	_log=$1
	shift
	_i=0
	until dpkg "$@" >"$_log" 2>&1; do
		grep -q 'lock' "$_log" || return 1
		_i=$((_i + 1))
		[ "$_i" -le 60 ] || return 1
		sleep 2
	done
}

# On any exit: airlockd stopped and the package purged before lib.sh's
# cleanup, so that no test leaves a package, a user or /etc/airlock here.
pkg_installed=""
_pkg_cleanup()
{
	_prc=$?
	if [ -n "${AIRLOCK_PID:-}" ]; then
		kill -9 "$AIRLOCK_PID" 2>/dev/null
		wait "$AIRLOCK_PID" 2>/dev/null
	fi
	if [ -n "$pkg_installed" ]; then
		rm -f /etc/airlock/test-470.yaml
		# the user did not exist before this test: its processes are ours
		pkill -KILL -u _airlock 2>/dev/null && sleep 0.5
		dpkg_retry "$T/dpkg-cleanup.log" --purge airlock ||
		    echo "# 470: dpkg --purge airlock failed: $(tail -n 3 "$T/dpkg-cleanup.log")" >&2
	fi
	(exit "$_prc")
	_it_cleanup
}
trap _pkg_cleanup EXIT

# audit_has HOST [FILE]: a record for HOST in FILE (default the installed
# audit.file)
audit_has()
{
	"$PYTHON" - "$1" "${2:-/var/log/airlock/audit.jsonl}" <<'PY' 2>/dev/null
import json, sys
host, path = sys.argv[1], sys.argv[2]
for line in open(path):
    if line.strip() and json.loads(line).get("host") == host:
        sys.exit(0)
sys.exit(1)
PY
}

# --- build, from a copy of what make dist ships -----------------------
src_state()
{
	git -C "$top_srcdir" status --porcelain --ignored 2>/dev/null |
	    grep -v '^!! _build/' | sort
}
sect
src_before=$(src_state)
mkdir -p "$T/pkg" || hard_error "mkdir"
make -C "$top_builddir" distdir distdir="$T/pkg/airlock" \
    >"$T/distdir.log" 2>&1 ||
    fail "make distdir: $(tail -n 5 "$T/distdir.log")"
[ -x "$T/pkg/airlock/debian/rules" ] ||
    fail "debian/rules is not in the distributed files"
note "building the package (DEB_BUILD_OPTIONS=nocheck; see $T/build.log)"
(cd "$T/pkg/airlock" &&
    DEB_BUILD_OPTIONS="nocheck noddebs parallel=2" \
    nice dpkg-buildpackage -us -uc -b) >"$T/build.log" 2>&1 ||
    fail "dpkg-buildpackage failed: $(tail -n 15 "$T/build.log")"
deb=$(ls "$T"/pkg/airlock_*.deb 2>/dev/null | head -n 1)
[ -n "$deb" ] && [ -f "$deb" ] || fail "no .deb in $T/pkg: $(ls "$T/pkg")"
sect_ok "dpkg-buildpackage -us -uc -b built $(basename "$deb")"
[ "$(src_state)" = "$src_before" ] ||
    check_fail "the source tree changed during the package build"

sect
dpkg-deb -c "$deb" | awk '{ print $6 }' >"$T/contents" ||
    fail "dpkg-deb -c"
for f in ./usr/sbin/airlockd ./usr/bin/airlockctl \
    ./usr/share/man/man8/airlockd.8.gz ./usr/share/man/man8/airlockctl.8.gz \
    ./usr/share/man/man5/airlock.yaml.5.gz \
    ./lib/systemd/system/airlockd.service ./etc/logrotate.d/airlock \
    ./etc/airlock/airlock.yaml ./usr/share/doc/airlock/operations.md; do
	grep -qx "$f" "$T/contents" || check_fail "the package has no $f"
done
dpkg-deb -f "$deb" Depends | grep -q adduser ||
    check_fail "the package does not depend on adduser"
sect_ok "it holds airlockd, airlockctl, the man pages, the unit, the logrotate file, the config"

# --- install --------------------------------------------------------------
sect
pkg_installed=1
dpkg_retry "$T/dpkg-i.log" -i "$deb" ||
    fail "dpkg -i: $(tail -n 10 "$T/dpkg-i.log")"
sect_ok "dpkg -i installed it"

sect
pw=$(getent passwd _airlock) || fail "postinst created no user _airlock"
uid=$(echo "$pw" | cut -d: -f3)
[ "$uid" -lt 1000 ] || check_fail "_airlock is not a system user (uid $uid)"
[ "$(echo "$pw" | cut -d: -f6)" = /var/lib/airlock ] ||
    check_fail "home of _airlock: $pw"
case $(echo "$pw" | cut -d: -f7) in
*/nologin | */false) ;;
*) check_fail "_airlock has a login shell: $pw" ;;
esac
getent group _airlock >/dev/null || check_fail "no group _airlock"
# mode owner:group of each path
for want in "/var/lib/airlock 700 _airlock:_airlock" \
    "/var/log/airlock 700 _airlock:_airlock" \
    "/etc/airlock 750 root:_airlock" \
    "/etc/airlock/airlock.yaml 640 root:_airlock"; do
	set -- $want
	got=$(stat -c '%a %U:%G' "$1" 2>/dev/null)
	[ "$got" = "$2 $3" ] || check_fail "$1: $got, not $2 $3"
done
grep -qx 'User=_airlock' /lib/systemd/system/airlockd.service &&
    grep -qx 'ExecStart=/usr/sbin/airlockd -c /etc/airlock/airlock.yaml' \
    /lib/systemd/system/airlockd.service ||
    check_fail "the unit does not run /usr/sbin/airlockd as _airlock"
grep -q '^state_dir: /var/lib/airlock$' "$CONF" &&
    grep -q '^  file: /var/log/airlock/audit.jsonl$' "$CONF" ||
    check_fail "the installed config keeps its state elsewhere"
[ "$(/usr/sbin/airlockd --version)" = "airlockd $(sed -n \
    's/^airlock (\([^)]*\)).*/\1/p;q' "$T/pkg/airlock/debian/changelog")" ] ||
    check_fail "airlockd --version: $(/usr/sbin/airlockd --version)"

sect_ok "postinst: system user _airlock, /var/lib/airlock and /var/log/airlock 0700 its own, $CONF 0640 root:_airlock; the unit runs /usr/sbin/airlockd as _airlock"

sect
# the installed default config is accepted, by root and by the service user
out=$(/usr/sbin/airlockd -t -c "$CONF" 2>&1) ||
    fail "airlockd -t -c $CONF: $out"
[ "$out" = "$CONF: configuration OK" ] || check_fail "airlockd -t said: $out"
as_airlock() { setpriv --reuid=_airlock --regid=_airlock --clear-groups "$@"; }
out=$(as_airlock /usr/sbin/airlockd -t -c "$CONF" 2>&1) ||
    check_fail "airlockd -t as _airlock: $out"
if setpriv --reuid=nobody --regid=nogroup --clear-groups \
    cat "$CONF" >/dev/null 2>&1; then
	check_fail "another user can read $CONF"
fi
sect_ok "airlockd -t accepts the installed $CONF"

# --- run it as _airlock -----------------------------------------------------
# The installed config's port; when something else holds it, the same file
# with another port (the rest, state and audit included, unchanged).
port=3128
run_conf=$CONF
if ! "$PYTHON" -c 'import socket; socket.socket().bind(("127.0.0.1", 3128))' \
    2>/dev/null; then
	port=$(free_port)
	run_conf=/etc/airlock/test-470.yaml
	sed "s|\"127.0.0.1:3128\"|\"127.0.0.1:$port\"|" "$CONF" >"$run_conf"
	chgrp _airlock "$run_conf" && chmod 0640 "$run_conf"
	note "127.0.0.1:3128 is taken here: running on $port"
fi

start_packaged()
{
	# setpriv execs airlockd: $! is the daemon itself
	setpriv --reuid=_airlock --regid=_airlock --clear-groups \
	    /usr/sbin/airlockd -c "$run_conf" \
	    >>"$T/airlockd.out" 2>>"$T/airlockd.log" &
	AIRLOCK_PID=$!
	track_pid "$AIRLOCK_PID"
	wait_port "$port" 30 "$AIRLOCK_PID" ||
	    fail "the packaged airlockd did not listen on $port: $(tail -n 5 "$T/airlockd.log")"
}
sect
start_packaged
[ "$(ps -o user= -p "$AIRLOCK_PID" | tr -d ' ')" = _airlock ] ||
    check_fail "airlockd does not run as _airlock: $(ps -o user=,cmd= -p "$AIRLOCK_PID")"
_i=0
until [ -S /var/lib/airlock/admin.sock ] && [ -s /var/lib/airlock/admin.token ]; do
	_i=$((_i + 1))
	[ "$_i" -le 200 ] || fail "no admin socket under /var/lib/airlock"
	sleep 0.05
done
for f in /var/lib/airlock/ca/local/ca.crt /var/lib/airlock/tokens/local \
    /var/log/airlock/audit.jsonl; do
	[ "$(stat -c %U "$f" 2>/dev/null)" = _airlock ] ||
	    check_fail "$f: missing or not the service user's"
done
out=$(airlockctl -c "$run_conf" status 2>&1) ||
    check_fail "airlockctl -c $run_conf status: $out"
echo "$out" | grep -q '^status  *ok$' || check_fail "airlockctl status: $out"
sect_ok "airlockd runs as _airlock; airlockctl status through /var/lib/airlock/admin.sock"

sect
# a request through it: denied by the example policy, with SPEC's JSON
code=$(curl -sS -o "$T/denied.json" -w '%{http_code}' --max-time 20 \
    -x "http://127.0.0.1:$port" http://denied.example/) ||
    fail "curl through the packaged airlockd failed"
[ "$code" = 403 ] && [ "$(json_field "$(cat "$T/denied.json")" error)" = denied ] ||
    check_fail "plain HTTP to a denied host: $code $(cat "$T/denied.json")"
# and inside TLS, with the sandbox's CA from the state directory
code=$(curl -sS -o "$T/denied-tls.json" -w '%{http_code}' --max-time 20 \
    --cacert /var/lib/airlock/ca/local/ca.crt \
    -x "http://127.0.0.1:$port" https://denied.example/) ||
    check_fail "HTTPS through the packaged airlockd: curl failed"
[ "$code" = 403 ] &&
    [ "$(json_field "$(cat "$T/denied-tls.json")" error)" = denied ] ||
    check_fail "HTTPS to a denied host: $code $(cat "$T/denied-tls.json")"
audit_has denied.example ||
    check_fail "no audit record in /var/log/airlock/audit.jsonl"
sect_ok "denied requests answered 403 with JSON and audited in /var/log/airlock"

sect
# an operator's edit of the installed file and a reload: a local origin is
# allowed, and a request reaches it
start_origin
python3 - "$run_conf" "$ORIGIN_PORT" <<'PY' || fail "editing $run_conf"
import sys
path, port = sys.argv[1], sys.argv[2]
text = open(path).read()
edits = [("  hosts: {}\n", '  hosts: {"origin.test": "127.0.0.1"}\n'),
         ("  allow_networks: []\n", '  allow_networks: ["127.0.0.1/32"]\n'),
         ("    rules:\n", "    rules:\n      - {host: origin.test, ports: [%s], "
          "methods: [GET]}\n" % port)]
for old, new in edits:
    if text.count(old) != 1:
        sys.exit("%r is not in the installed config exactly once" % old)
    text = text.replace(old, new)
open(path, "w").write(text)
PY
out=$(airlockctl -c "$run_conf" reload 2>&1) || fail "airlockctl reload: $out"
code=$(curl -sS -o "$T/allowed.body" -w '%{http_code}' --max-time 20 \
    -x "http://127.0.0.1:$port" "http://origin.test:$ORIGIN_PORT/size/100") ||
    fail "curl to the allowed origin failed"
[ "$code" = 200 ] && [ "$(wc -c <"$T/allowed.body")" -eq 100 ] ||
    check_fail "allowed request after the reload: $code"
sect_ok "after editing $run_conf and airlockctl reload, a request reaches the origin"

# --- the installed logrotate file rotates the audit log ----------------------
if ! command -v logrotate >/dev/null 2>&1; then
	note "logrotate not installed: rotation not checked"
elif [ -d /run/systemd/system ]; then
	note "systemd runs here: the postrotate signals the unit, not this airlockd; rotation not checked"
else
	sect
	logrotate -f -s "$T/logrotate.state" /etc/logrotate.d/airlock \
	    >"$T/logrotate.log" 2>&1 ||
	    check_fail "logrotate: $(cat "$T/logrotate.log")"
	rotated=$(ls /var/log/airlock/audit.jsonl-* 2>/dev/null | head -n 1)
	[ -n "$rotated" ] || check_fail "logrotate left no audit.jsonl-DATE"
	# SIGUSR1 reaches airlockd asynchronously: a request until its record
	# lands in the new file
	_i=0
	until audit_has after-rotation.example; do
		_i=$((_i + 1))
		[ "$_i" -le 40 ] || break
		curl -s -o /dev/null --max-time 10 -x "http://127.0.0.1:$port" \
		    http://after-rotation.example/
		sleep 0.25
	done
	audit_has after-rotation.example ||
	    check_fail "after logrotate, airlockd does not write the new audit.jsonl"
	[ "$(stat -c '%a %U' /var/log/airlock/audit.jsonl)" = "600 _airlock" ] ||
	    check_fail "new audit.jsonl: $(stat -c '%a %U' /var/log/airlock/audit.jsonl)"
	out=$(airlockctl audit verify "$rotated" /var/log/airlock/audit.jsonl 2>&1) ||
	    check_fail "the hash chain across the rotation: $out"
	sect_ok "logrotate -f with /etc/logrotate.d/airlock: SIGUSR1, new file, chain intact"
fi

# --- stop cleanly ------------------------------------------------------------
sect
stop_airlockd TERM
AIRLOCK_PID=""
grep -q 'airlockd info: stopped' "$T/airlockd.log" ||
    check_fail "no 'stopped' line in the log"
sect_ok "SIGTERM: exit 0"
[ "$run_conf" = "$CONF" ] || rm -f "$run_conf"

# --- purge: nothing is left ---------------------------------------------------
sect
dpkg_retry "$T/dpkg-purge.log" --purge airlock ||
    fail "dpkg --purge: $(tail -n 10 "$T/dpkg-purge.log")"
pkg_installed=""
st=$(dpkg-query -W -f='${db:Status-Abbrev}' airlock 2>/dev/null)
case $st in
"" | un*) ;;
*) check_fail "after purge dpkg still knows airlock: $st" ;;
esac
getent passwd _airlock >/dev/null && check_fail "user _airlock left after purge"
getent group _airlock >/dev/null && check_fail "group _airlock left after purge"
for p in /etc/airlock /var/lib/airlock /var/log/airlock \
    /etc/logrotate.d/airlock /usr/sbin/airlockd /usr/bin/airlockctl \
    /lib/systemd/system/airlockd.service /usr/share/doc/airlock \
    /usr/share/man/man8/airlockd.8.gz; do
	[ -e "$p" ] && check_fail "$p left after dpkg --purge"
done
sect_ok "dpkg --purge: no package, user, group, /etc/airlock, /var/lib/airlock or /var/log/airlock left"
finish
