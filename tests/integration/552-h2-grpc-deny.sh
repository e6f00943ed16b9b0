#!/bin/sh
# gRPC through interception (issue 19 point 3, the part that needs no h2
# upstream): python grpcio through CONNECT (grpc.http_proxy) speaks h2 to
# airlockd; a method the policy does not allow gets a gRPC-shaped answer
# (HTTP 200, grpc-status 7 PERMISSION_DENIED, the JSON reason in
# grpc-message), a call past the requests cap grpc-status 8
# RESOURCE_EXHAUSTED,
# both audited (http "2"), neither forwarded; an allowed call carries the
# rule's secret as a metadata header to the upstream (an HTTP/1.1 origin
# here, so the call itself fails; 553 has a real gRPC server over h2).
. "$top_srcdir/tests/integration/lib.sh"

SYS_PYTHON=${SYS_PYTHON:-/usr/bin/python3}
"$SYS_PYTHON" -c "import grpc" 2>/dev/null ||
    hard_error "python3-grpcio missing (scripts/install-deps.sh --test)"
sh "$top_srcdir/tests/harness/mkpki.sh" "$T/pki" >"$T/mkpki.log" 2>&1 ||
    hard_error "mkpki.sh: $(cat "$T/mkpki.log")"
start_origin origin -C "$T/pki/good.crt" -K "$T/pki/good.key"
AIRLOCK_PORT=$(free_port)
export AIRLOCK_PORT ORIGIN_PORT T
printf 'grpc-secret-552-value' >"$T/key"
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
      - {host: "api.test", ports: [$ORIGIN_PORT], paths: ["/echo"], secrets: [k]}
    caps: {requests: 2}
sandboxes:
  - {id: a, policy: p}
YAML
} >"$T/airlock.yaml"
start_airlockd "$T/airlock.yaml"

"$SYS_PYTHON" - <<'PY' || fail "gRPC"
import os, grpc, itlib
ap, op = itlib.env_int("AIRLOCK_PORT"), itlib.env_int("ORIGIN_PORT")
T = os.environ["T"]
audit, olog = T + "/audit.jsonl", T + "/origin.log"
ca = open(T + "/state/ca/a/ca.crt", "rb").read()
t = itlib.Checks()


def call(host, method, data=b"hello", md=None):
    ch = grpc.secure_channel("%s:%d" % (host, op),
                             grpc.ssl_channel_credentials(root_certificates=ca),
                             options=[("grpc.http_proxy",
                                       "http://127.0.0.1:%d" % ap)])
    f = ch.unary_unary(method, request_serializer=None,
                       response_deserializer=None)
    try:
        f(data, timeout=10, metadata=md)
        return None, None
    except grpc.RpcError as e:
        return e.code(), e.details()
    finally:
        ch.close()


code, msg = call("api.test", "/pkg.Svc/Denied")
t.ok(code == grpc.StatusCode.PERMISSION_DENIED and '"error":"denied"' in
     (msg or "") and "/pkg.Svc/Denied" in msg, "a method the policy denies: "
     "PERMISSION_DENIED with the JSON reason", (code, msg))
rec = itlib.audit_wait(audit, lambda a: a.get("path") == "/pkg.Svc/Denied")
t.ok(rec is not None and rec.get("decision") == "deny" and
     rec.get("http") == "2" and rec.get("method") == "POST",
     "... audited deny, http 2", rec)
t.ok(not [x for x in itlib.origin_records(olog) if b"pkg.Svc/Denied" in x],
     "... never forwarded")

# an allowed call: the rule's secret goes upstream as a metadata header
code, msg = call("api.test", "/echo", md=(("x-trace", "552"),))
seen = [x for x in itlib.origin_records(olog) if b"POST /echo" in x]
t.ok(seen and b"x-api-key: grpc-secret-552-value" in seen[-1].lower() and
     b"content-type: application/grpc" in seen[-1].lower() and
     b"x-trace: 552" in seen[-1].lower(), "an allowed call: the secret "
     "injected as metadata, the call's own metadata kept", seen[-1:])
t.ok(code is not None, "... and the HTTP/1.1 upstream's answer is no "
     "gRPC answer (an HTTP/1.1 origin; 553 has the h2 one)", code)
call("api.test", "/echo")       # the second of the cap's 2 requests
code, msg = call("api.test", "/echo")
t.ok(code == grpc.StatusCode.RESOURCE_EXHAUSTED and msg and
     '"error"' in msg, "a call past the requests cap: RESOURCE_EXHAUSTED "
     "with the JSON reason", (code, msg))
t.done()
PY
stop_airlockd
finish
