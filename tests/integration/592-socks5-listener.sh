#!/bin/sh
# listen.socks5 (issue 23 point 2): RFC 1928 + RFC 1929 (sandbox id and
# token), or no authentication from a sandbox's source address (gateway
# mode). CONNECT only: BIND and UDP ASSOCIATE get reply 7. Names are
# resolved by the gateway (curl --socks5-hostname); an address in a denied
# network and a destination no rule allows get reply 2. TLS and HTTP go
# through interception and the HTTP pipeline as on the explicit listener
# (a path rule still holds); anything else is a raw tunnel for a rule
# without methods or paths: ssh through `nc -X 5` to an sshd started here,
# and git clone over that ssh. Audited mode socks5.
. "$top_srcdir/tests/integration/lib.sh"

SSHD=/usr/sbin/sshd
[ -x "$SSHD" ] || hard_error "openssh-server not installed (scripts/install-deps.sh --test)"
command -v nc >/dev/null 2>&1 && nc -h 2>&1 | grep -q -- "-X proto" ||
    hard_error "netcat-openbsd not installed (scripts/install-deps.sh --test)"
command -v git >/dev/null 2>&1 || hard_error "git not installed"
sh "$top_srcdir/tests/harness/mkpki.sh" "$T/pki" >"$T/mkpki.log" 2>&1 ||
    hard_error "mkpki.sh: $(cat "$T/mkpki.log")"
P=$T/pki
start_origin origin -C "$P/good.crt" -K "$P/good.key"
TLS_PORT=$ORIGIN_PORT
start_origin plain
PLAIN_PORT=$ORIGIN_PORT

# an sshd of our own: key login for the current user, this scratch dir
SSHP=$(free_port)
ssh-keygen -q -t ed25519 -N "" -f "$T/hostkey" >/dev/null
ssh-keygen -q -t ed25519 -N "" -f "$T/id" >/dev/null
cp "$T/id.pub" "$T/authorized_keys"
[ "$(id -u)" = 0 ] && mkdir -p /run/sshd
cat >"$T/sshd_config" <<CONF
Port $SSHP
ListenAddress 127.0.0.1
HostKey $T/hostkey
PidFile $T/sshd.pid
AuthorizedKeysFile $T/authorized_keys
StrictModes no
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
CONF
"$SSHD" -D -e -f "$T/sshd_config" 2>"$T/sshd.log" &
track_pid $!
wait_port "$SSHP" 10 || hard_error "sshd did not start: $(cat "$T/sshd.log")"

S5=$(free_port)
AIRLOCK_PORT=$(free_port)
{
	echo "listen: {proxy: \"127.0.0.1:$AIRLOCK_PORT\", socks5: \"127.0.0.1:$S5\"}"
	echo "state_dir: $T/state"
	echo "workers: 2"
	echo "audit: {file: $T/audit.jsonl}"
	cat <<YAML
upstream:
  ca_file: $P/ca.crt
  allow_networks: ["127.0.0.1/32"]
  hosts: {"api.test": "127.0.0.1", "ssh.test": "127.0.0.1", "pathy.test": "127.0.0.1"}
policies:
  - name: p
    rules:
      - {host: "api.test", ports: [$TLS_PORT, $PLAIN_PORT], paths: ["/json/*", "/echo"]}
      - {host: "ssh.test", ports: [$SSHP]}
      - {host: "pathy.test", ports: [$SSHP], paths: ["/x"]}
sandboxes:
  - {id: a, policy: p, token: "literal:tok-a"}
  - {id: g, policy: p, token: "literal:tok-g", addresses: ["127.0.0.1"]}
YAML
} >"$T/airlock.yaml"
start_airlockd "$T/airlock.yaml"
S5URL="a:tok-a@127.0.0.1:$S5"
CA=$T/state/ca/a/ca.crt

# --- curl: names resolved by the gateway, TLS intercepted, HTTP rules hold
code=$(curl -sS --socks5-hostname "$S5URL" --cacert "$CA" -o "$T/c1" \
    -w '%{http_code}' "https://api.test:$TLS_PORT/json/12" 2>"$T/c1.err")
code2=$(curl -sS --socks5-hostname "$S5URL" -o "$T/c2" -w '%{http_code}' \
    "http://api.test:$PLAIN_PORT/echo" 2>"$T/c2.err")
code3=$(curl -sS --socks5-hostname "$S5URL" -o "$T/c3" -w '%{http_code}' \
    "http://api.test:$PLAIN_PORT/size/9" 2>"$T/c3.err")
code4=$(curl -sS --socks5-hostname "$S5URL" --cacert "$CA" -o "$T/c4" \
    -w '%{http_code}' "https://api.test:$TLS_PORT/size/9" 2>"$T/c4.err")
sleep 0.3
if [ "$code" = 200 ] && [ "$code2" = 200 ] && [ "$code3" = 403 ] && [ "$code4" = 403 ] &&
    grep -q '"path is\|path /size/9 is not allowed' "$T/c3" &&
    grep -q '"mode":"socks5","proto":"https","method":"GET","host":"api.test".*"path":"/json/12","status":200' "$T/audit.jsonl"; then
	ok "curl --socks5-hostname: HTTPS intercepted and HTTP served (200), a path rule still denies (403), audited mode socks5"
else
	check_fail "curl via SOCKS5: '$code' '$code2' '$code3' '$code4' $(cat "$T/c1.err" "$T/c3")"
fi

curl -sS --socks5-hostname "a:wrong@127.0.0.1:$S5" -o /dev/null "http://api.test:$PLAIN_PORT/echo" 2>"$T/c5.err"
rc=$?
curl -sS --socks5-hostname "$S5URL" -o /dev/null "http://nope.test:$PLAIN_PORT/echo" 2>"$T/c6.err"
rc2=$?
if [ "$rc" = 97 ] && grep -q "rejected" "$T/c5.err" && [ "$rc2" = 97 ] &&
    grep -q "(2)" "$T/c6.err"; then
	ok "a wrong token: RFC 1929 failure; a host no rule allows: reply 2 (not allowed by ruleset)"
else
	check_fail "refusals: $rc $(cat "$T/c5.err") / $rc2 $(cat "$T/c6.err")"
fi

# --- the protocol itself: BIND, UDP ASSOCIATE, a denied network, no auth
S5=$S5 T=$T "$PYTHON" - <<'PY' || check_fail "SOCKS5 protocol checks"
import os, socket, struct, itlib
t = itlib.Checks()
port = int(os.environ["S5"])

def session(methods=b"\x02", src=None, user=b"a", pw=b"tok-a"):
    s = socket.socket()
    if src:
        s.bind((src, 0))
    s.settimeout(10)
    s.connect(("127.0.0.1", port))
    s.sendall(b"\x05" + bytes([len(methods)]) + methods)
    m = s.recv(2)
    if m == b"\x05\x02":
        s.sendall(b"\x01" + bytes([len(user)]) + user + bytes([len(pw)]) + pw)
        if s.recv(2) != b"\x01\x00":
            return s, None
    return s, m

def request(cmd, atyp_addr, port_=80):
    s, m = session()
    s.sendall(b"\x05" + bytes([cmd]) + b"\x00" + atyp_addr + struct.pack(">H", port_))
    r = s.recv(10)
    s.close()
    return r

r = request(2, b"\x03\x08api.test")
t.ok(r[:2] == b"\x05\x07", "BIND: reply 7 (command not supported)", r)
r = request(3, b"\x01\x00\x00\x00\x00", 0)
t.ok(r[:2] == b"\x05\x07", "UDP ASSOCIATE: reply 7", r)
r = request(1, b"\x01" + socket.inet_aton("10.1.2.3"))
t.ok(r[:2] == b"\x05\x02", "CONNECT to 10.1.2.3 (denied network): reply 2", r)
r = request(1, b"\x04" + socket.inet_pton(socket.AF_INET6, "fe80::1"))
t.ok(r[:2] == b"\x05\x02", "CONNECT to fe80::1 (denied network): reply 2", r)
s, m = session(methods=b"\x00", src="127.0.0.3")
t.ok(m == b"\x05\xff", "no authentication from an address of no sandbox: 0xFF", m)
s.close()
s, m = session(methods=b"\x00")
t.ok(m == b"\x05\x00", "no authentication from a sandbox's address (gateway mode): accepted", m)
s.close()
s = socket.create_connection(("127.0.0.1", port), timeout=10)
s.sendall(b"\x04\x01\x00\x50\x7f\x00\x00\x01\x00")
t.ok(s.recv(10) == b"", "SOCKS4: closed")
s.close()
rec = itlib.audit_wait(os.environ["T"] + "/audit.jsonl",
                       lambda a: "BIND" in a.get("reason", ""))
t.ok(rec is not None and rec.get("mode") == "socks5" and rec.get("decision") == "deny",
     "BIND audited: mode socks5, deny", rec)
t.done()
PY

# --- ssh through nc -X 5 (gateway mode: the source address is the sandbox)
PROXYCMD="nc -X 5 -x 127.0.0.1:$S5 %h %p"
SSHOPTS="-F /dev/null -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o BatchMode=yes -o ConnectTimeout=10 -i $T/id"
# shellcheck disable=SC2086
out=$(ssh $SSHOPTS -o ProxyCommand="$PROXYCMD" -p "$SSHP" "$(id -un)@ssh.test" \
    echo hello-through-socks5 2>"$T/ssh.err")
sleep 0.3
if [ "$out" = hello-through-socks5 ] &&
    grep -q '"sandbox":"g".*"mode":"socks5","proto":"tunnel".*"host":"ssh.test","port":'"$SSHP"'.*"decision":"allow"' "$T/audit.jsonl"; then
	ok "ssh -o ProxyCommand='nc -X 5 ...': a command ran; audited proto tunnel, mode socks5, sandbox g"
else
	check_fail "ssh through SOCKS5: '$out' $(tail -3 "$T/ssh.err")"
fi
# shellcheck disable=SC2086
ssh $SSHOPTS -o ProxyCommand="$PROXYCMD" -p "$SSHP" "$(id -un)@pathy.test" true 2>"$T/ssh2.err"
rc=$?
sleep 0.3
if [ "$rc" != 0 ] && grep -q "not TLS or HTTP, and the rule limits methods or paths" "$T/audit.jsonl"; then
	ok "ssh to a host whose rule limits paths: refused (raw bytes cannot be held to paths)"
else
	check_fail "ssh to a path rule: rc $rc"
fi

# --- git clone over that ssh
git init -q --bare "$T/repo.git"
git -C "$T" init -q work
git -C "$T/work" -c user.name=t -c user.email=t@t commit -q --allow-empty -m first
git -C "$T/work" push -q "$T/repo.git" HEAD:refs/heads/main 2>/dev/null
GIT_SSH_COMMAND="ssh $SSHOPTS -o ProxyCommand='$PROXYCMD'" \
    git clone -q -b main "ssh://$(id -un)@ssh.test:$SSHP$T/repo.git" "$T/clone" 2>"$T/git.err"
if [ "$(git -C "$T/clone" log --format=%s 2>/dev/null)" = first ]; then
	ok "git clone over ssh through the SOCKS5 listener"
else
	check_fail "git over ssh: $(tail -3 "$T/git.err")"
fi
finish
