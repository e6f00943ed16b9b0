#!/bin/sh
# Sandbox tokens and Proxy-Authorization credentials (right or wrong) never
# show up in the daemon's log (verbose), its stdout, the audit file, the
# upstream, or configuration error messages.
. "$top_srcdir/tests/integration/lib.sh"

start_origin
AIRLOCK_PORT=$(free_port)
export AIRLOCK_PORT ORIGIN_PORT T
printf 'FileTokenValue-7b1e\n' >"$T/tok"
chmod 600 "$T/tok"
{
	config_common "$AIRLOCK_PORT"
	cat <<YAML
upstream:
  allow_networks: ["127.0.0.1/32"]
  hosts: {"api.test": "127.0.0.1"}
policies:
  - name: p
    rules:
      - {host: "api.test", ports: [$ORIGIN_PORT], paths: ["/echo", "/size/*"]}
sandboxes:
  - {id: lit, policy: p, token: "literal:LiteralTokenValue-91c3"}
  - {id: fil, policy: p, token: "file:$T/tok"}
  - {id: gen, policy: p}
YAML
} >"$T/airlock.yaml"
AIRLOCKD_FLAGS=-v start_airlockd "$T/airlock.yaml"
GEN=$(cat "$T/state/tokens/gen") || fail "no generated token"
PROXY=http://127.0.0.1:$AIRLOCK_PORT
U=http://api.test:$ORIGIN_PORT

for cred in lit:LiteralTokenValue-91c3 fil:FileTokenValue-7b1e "gen:$GEN"; do
	code=$(curl -sS -x "$PROXY" -U "$cred" -o /dev/null -w '%{http_code}' "$U/echo?a=1")
	[ "$code" = 200 ] || fail "${cred%%:*}: status $code"
	code=$(curl -sS -x "$PROXY" -U "$cred" -o /dev/null -w '%{http_code}' "$U/denied")
	[ "$code" = 403 ] || fail "${cred%%:*} denied path: status $code"
	# CONNECT and a keep-alive pair
	curl -sS -x "$PROXY" -U "$cred" -o /dev/null -o /dev/null "$U/size/1" "$U/size/2" ||
	    fail "${cred%%:*}: keep-alive pair"
done
# wrong credentials: wrong token for a real sandbox, unknown sandbox
for cred in lit:WrongTokenValue-5d2a nosuch:UnknownSandboxToken-e4f0; do
	curl -sS -x "$PROXY" -U "$cred" -o "$T/407.body" "$U/echo" ||
	    fail "curl with wrong credentials"
	grep -q "${cred#*:}" "$T/407.body" && check_fail "407 body echoes the token"
done
"$PYTHON" - <<'PY' || fail "raw CONNECT"
import base64, itlib
ap, op = itlib.env_int("AIRLOCK_PORT"), itlib.env_int("ORIGIN_PORT")
for cred in (b"lit:LiteralTokenValue-91c3", b"lit:WrongTokenValue-5d2a"):
    s = itlib.connect(ap)
    s.sendall(b"CONNECT api.test:%d HTTP/1.1\r\nHost: api.test:%d\r\n"
              b"Proxy-Authorization: Basic %s\r\n\r\n"
              % (op, op, base64.b64encode(cred)))
    r = itlib.read_response(itlib.Reader(s), "CONNECT")
    s.close()
    assert r.status in (200, 407), r
PY
sleep 0.3
stop_airlockd

for v in LiteralTokenValue-91c3 FileTokenValue-7b1e "$GEN" WrongTokenValue-5d2a \
    UnknownSandboxToken-e4f0; do
	for cred in "lit:$v" "fil:$v" "gen:$v" "nosuch:$v"; do
		b64=$(printf '%s' "$cred" | base64 | tr -d '\n')
		for f in "$T/airlockd.log" "$T/airlockd.out" "$T/audit.jsonl" "$T/origin.log"; do
			[ -f "$f" ] || continue
			if grep -qF -e "$v" -e "$b64" "$f"; then
				check_fail "$(basename "$f") contains the credentials $cred"
			fi
		done
	done
done
grep -qi 'proxy-authorization' "$T/origin.log" && check_fail "Proxy-Authorization reached the origin"
[ -s "$T/audit.jsonl" ] || check_fail "empty audit file: nothing was checked"
ok "no token or credentials in log, stdout, audit, upstream"

# configuration errors do not print token values
cat >"$T/bad.yaml" <<'YAML'
policies:
  - name: p
    rules:
      - {host: "*"}
sandboxes:
  - {id: a, policy: p, token: "literal:ConfigTokenValue-0a9f", tokn: 1}
  - {id: a, policy: p, token: "literal:ConfigTokenValue-0a9f"}
  - {id: b, policy: nosuch, token: "literal:ConfigTokenValue-0a9f"}
YAML
"$AIRLOCKD" -c "$T/bad.yaml" -t >"$T/bad.out" 2>&1
[ $? -eq 1 ] || check_fail "bad.yaml passed -t"
grep -q ConfigTokenValue "$T/bad.out" && check_fail "-t printed a token value: $(cat "$T/bad.out")"
ok "config errors do not print tokens"
finish
