# contain-lib.sh: the gateway-mode setup the containment tests (460-469,
# issue 24) share, sourced after lib.sh. Sets CT_NUM (the test's number)
# first; optional CT_LAUNCHER_EXTRA (more YAML lines under launcher:, two
# spaces indented), CT_RULES_EXTRA (more rules of policy default) and
# CT_POOL. Own address range 10.<CT_NUM-220>.0.0/16,
# interface prefix t<CT_NUM>-, nft table airlock_t<CT_NUM>; a secret file
# under /etc (so the /etc masks are exercised) removed at exit.
# After ct_start: ctl, ct_stop, AIRLOCK_PID, TLS_PORT, SECRET, CT_ETC,
# CT_NET.

[ "$(id -u)" = 0 ] || fail "needs root (namespaces, nftables); CI runs as root"
command -v nft >/dev/null 2>&1 || fail "nft not installed (scripts/install-deps.sh --test)"
AIRLOCKCTL=$top_builddir/src/airlockctl
CT_NET=10.$((CT_NUM - 220))
CT_PREFIX=t$CT_NUM-
CT_ETC=/etc/airlock-t$CT_NUM.$$
SECRET=real-secret-$$-$(date +%s)
export T SECRET
chmod 0711 "$T"

_ct_cleanup()
{
	_grc=$?
	[ -n "${AIRLOCK_PID:-}" ] && kill -TERM "$AIRLOCK_PID" 2>/dev/null &&
	    wait_exit "$AIRLOCK_PID" 20
	nft delete table inet "airlock_t$CT_NUM" 2>/dev/null
	rm -rf "$CT_ETC"
	(exit "$_grc")
	_it_cleanup
}
trap _ct_cleanup EXIT

ct_start()
{
	[ -n "${CT_POOL:-}" ] || CT_POOL='{warm: 1, max: 4}'
	sh "$top_srcdir/tests/harness/mkpki.sh" "$T/pki" >"$T/mkpki.log" 2>&1 ||
	    hard_error "mkpki.sh: $(cat "$T/mkpki.log")"
	start_origin tls -C "$T/pki/good.crt" -K "$T/pki/good.key"
	TLS_PORT=$ORIGIN_PORT
	AIRLOCK_PORT=$(free_port)
	TPORT=$(free_port)
	DPORT=$(free_port)
	# 0711: the workload could reach the file if it were there
	mkdir -p "$CT_ETC" && chmod 0711 "$CT_ETC"
	printf '%s' "$SECRET" >"$CT_ETC/key" && chmod 0600 "$CT_ETC/key"
	cat >"$T/airlock.yaml" <<YAML
listen:
  proxy: "127.0.0.1:$AIRLOCK_PORT"
  transparent: "$CT_NET.0.1:$TPORT"
  dns: "$CT_NET.0.1:$DPORT"
state_dir: $T/state
workers: 2
audit: {file: $T/audit.jsonl}
upstream:
  ca_file: $T/pki/ca.crt
  allow_networks: ["127.0.0.1/32"]
  hosts: {"api.test": "127.0.0.1"}
secrets:
  - name: k
    source: file:$CT_ETC/key
    hosts: ["api.test"]
    inject: {header: X-Api-Key, value: "\${secret}"}
    placeholder: "airlock:k"
launcher:
  backend: netns
  network: $CT_NET.0.0/16
  interface_prefix: "$CT_PREFIX"
  pool: $CT_POOL
${CT_LAUNCHER_EXTRA:-}
policies:
  - name: default
    rules:
      - {host: "api.test", ports: [$TLS_PORT], secrets: [k]}
${CT_RULES_EXTRA:-}
YAML
	"$AIRLOCKD" -c "$T/airlock.yaml" >>"$T/airlockd.out" \
	    2>>"$T/airlockd.log" &
	AIRLOCK_PID=$!
	track_pid "$AIRLOCK_PID"
	wait_port "$AIRLOCK_PORT" 20 "$AIRLOCK_PID" ||
	    hard_error "airlockd did not start"
}

ctl() { "$AIRLOCKCTL" -c "$T/airlock.yaml" "$@"; }

# ct_stop: SIGTERM, a clean exit within 30 s, no sanitizer report.
ct_stop()
{
	kill -TERM "$AIRLOCK_PID"
	wait_exit "$AIRLOCK_PID" 30
	AIRLOCK_PID=
	[ "$WAIT_STATUS" -eq 0 ] || fail "airlockd exited with status $WAIT_STATUS"
	check_sanitizers
}

# How many sandboxes are claimed (state "launched") right now.
ct_launched()
{
	ctl --json sandbox list | "$PYTHON" -c '
import json, sys
print(sum(1 for s in json.load(sys.stdin)["sandboxes"]
          if s["state"] == "launched"))'
}
