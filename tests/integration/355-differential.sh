#!/bin/sh
# Differential framing check (issue #8 point 3): for every request of the
# corpus (a generated set of tricky framings, the http_request fuzz seeds,
# and the TE obfuscation gadgets of ../shared/testdata when present),
# airlock's own parser (tests/harness/httpparse over src/http/) says what
# each message is; a real airlockd relays the bytes to a raw upstream that
# records every byte and parses it with an independent strict RFC 9112
# parser. Refused messages never arrive; accepted ones arrive exactly once,
# alone on their connection, with the body airlock parsed; a request
# pipelined after each case arrives intact or not at all. See
# differential.py.
. "$top_srcdir/tests/integration/lib.sh"

HTTPPARSE=$top_builddir/tests/harness/httpparse
[ -x "$HTTPPARSE" ] || hard_error "$HTTPPARSE not built"
AIRLOCK_PORT=$(free_port)
UP_PORT=$(free_port)
FUZZ_CORPUS=$top_srcdir/tests/fuzz/corpus/http_request
export AIRLOCK_PORT UP_PORT FUZZ_CORPUS
{
	config_common "$AIRLOCK_PORT" local
	cat <<YAML
limits: {header_bytes: 64KiB, header_timeout: 5s, max_connections_per_sandbox: 4096}
upstream:
  allow_networks: ["127.0.0.1/32"]
  hosts: {"api.test": "127.0.0.1"}
policies:
  - name: p
    rules:
      - {host: "api.test", ports: [$UP_PORT]}
sandboxes:
  - {id: local, policy: p}
YAML
} >"$T/airlock.yaml"
start_airlockd "$T/airlock.yaml"

gadgets=$TESTDATA/http1/te-obfuscation-gadgets.jsonl
if [ -f "$gadgets" ]; then
	set -- "$gadgets"
else
	note "no $gadgets: generated cases and fuzz seeds only"
	set --
fi
"$PYTHON" "$IT_DIR/differential.py" "$HTTPPARSE" "$T/cases" "$@" ||
    check_fail "differential framing"
stop_airlockd
finish
