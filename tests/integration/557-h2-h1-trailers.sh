#!/bin/sh
# An HTTP/1.1 client of an h2 gRPC origin (issue 19 point 2, "h1 client to
# h2 origin"): curl --http1.1 through CONNECT posts gRPC frames to a real
# grpcio server. With "TE: trailers" the origin's trailers (grpc-status,
# grpc-message, trailing metadata) come back as chunked trailer fields
# (RFC 9112 7.1.2; curl --raw shows the chunked body as sent), through the
# same response-head filter as a head: a credential the origin echoes into
# them is redacted. Without TE: trailers none are sent.
. "$top_srcdir/tests/integration/lib.sh"

. "$top_srcdir/tests/integration/grpc-lib.sh"
grpc_gateway grpc-secret-557-value
PROXY=http://127.0.0.1:$AIRLOCK_PORT
CA=$T/state/ca/a/ca.crt
U=https://api.test:$GRPC_PORT
printf '\000\000\000\000\002hi' >"$T/unary.bin"
printf '\000\000\000\000\000' >"$T/empty.bin"

# <out> <path> <body> [curl args]: a raw HTTP/1.1 gRPC call
call()
{
	o=$1 p=$2 b=$3
	shift 3
	curl -sS --http1.1 --raw -x "$PROXY" --cacert "$CA" -o "$T/$o" \
	    -D "$T/$o.h" -H 'Content-Type: application/grpc' \
	    --data-binary "@$T/$b" "$@" "$U$p" ||
	    fail "curl $p: $(cat "$T/$o.h" 2>/dev/null)"
}

call u1 /pkg.Svc/Unary unary.bin -H 'TE: trailers'
grep -qi '^transfer-encoding: chunked' "$T/u1.h" ||
    fail "unary: not chunked: $(cat "$T/u1.h")"
grep -q 'u:hi' "$T/u1" && tr -d '\r' <"$T/u1" | grep -q '^grpc-status: 0$' ||
    fail "unary with TE: trailers: $(od -c "$T/u1" | head -20)"
ok "HTTP/1.1 client with TE: trailers: the reply and grpc-status 0 as a chunked trailer"

call u2 /pkg.Svc/Unary unary.bin
grep -q 'u:hi' "$T/u2" && ! grep -q 'grpc-status' "$T/u2" ||
    fail "unary without TE: trailers: $(od -c "$T/u2" | head -20)"
ok "... without TE: trailers, the body and no trailer fields"

call e1 /pkg.Svc/EchoLate empty.bin -H 'TE: trailers'
tr -d '\r' <"$T/e1" >"$T/e1.txt"
grep -q '^grpc-status: 15$' "$T/e1.txt" && grep -q '^grpc-message: key ' "$T/e1.txt" &&
    grep -q '^x-echo: ' "$T/e1.txt" ||
    fail "EchoLate trailers: $(cat "$T/e1.txt")"
! grep -q 'grpc-secret-557-value' "$T/e1" ||
    fail "the secret the origin echoed reached the client in trailers"
grep -q '"x-api-key": "grpc-secret-557-value"' "$T/grpc.log" ||
    fail "the origin did not have the secret to echo"
ok "trailers after DATA (DATA_LOSS) relayed, the echoed secret redacted in them"

rec=$(audit_last)
echo "$rec" | grep -q '"path":"/pkg.Svc/EchoLate"' || fail "audit: $rec"
stop_airlockd
finish
