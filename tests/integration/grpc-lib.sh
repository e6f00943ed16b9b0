# The gateway of the gRPC tests (553, 557), after lib.sh: a real grpcio
# server (grpc_origin.py) on loopback TLS with the test PKI, and airlockd
# in front of it for sandbox a, whose rule (api.test:GRPC_PORT,
# /pkg.Svc/*) injects secret k as x-api-key.
#
# grpc_gateway VALUE: VALUE is the secret's; sets SYS_PYTHON, GRPC_PORT,
# AIRLOCK_PORT (and AIRLOCK_PID through start_airlockd).
grpc_gateway()
{
	SYS_PYTHON=${SYS_PYTHON:-/usr/bin/python3}
	"$SYS_PYTHON" -c "import grpc" 2>/dev/null ||
	    hard_error "python3-grpcio missing (scripts/install-deps.sh --test)"
	sh "$top_srcdir/tests/harness/mkpki.sh" "$T/pki" >"$T/mkpki.log" 2>&1 ||
	    hard_error "mkpki.sh: $(cat "$T/mkpki.log")"
	PYTHON=$SYS_PYTHON start_py_upstream grpc grpc_origin.py \
	    --cert "$T/pki/good.crt" --key "$T/pki/good.key" -l "$T/grpc.log"
	GRPC_PORT=$PY_PORT
	AIRLOCK_PORT=$(free_port)
	printf '%s' "$1" >"$T/key"
	chmod 600 "$T/key"
	{
		config_common "$AIRLOCK_PORT" a
		cat <<YAML
upstream:
  ca_file: $T/pki/ca.crt
  allow_networks: ["127.0.0.1/32"]
  hosts: {"api.test": "127.0.0.1"}
secrets:
  - {name: k, source: "file:$T/key", hosts: ["api.test"], inject: {header: "x-api-key", value: "\${secret}"}}
policies:
  - name: p
    rules:
      - {host: "api.test", ports: [$GRPC_PORT], paths: ["/pkg.Svc/*"], secrets: [k]}
sandboxes:
  - {id: a, policy: p}
YAML
	} >"$T/airlock.yaml"
	start_airlockd "$T/airlock.yaml"
}
