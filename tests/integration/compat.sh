# compat.sh: shared part of the client compatibility scripts
# (45x-compat-*.sh), sourced after lib.sh.
#
# The clients under test are unmodified: Debian's python modules (only the
# system interpreter /usr/bin/python3 sees them), node with the npm
# packages of tests/compat (installed by `npm ci` there, which
# scripts/install-deps.sh --test runs), git, curl and npm. A script skips
# (77) only when one of them is absent, never when it misbehaves.

SYS_PYTHON=${SYS_PYTHON:-/usr/bin/python3}
COMPAT_DIR=$top_srcdir/tests/compat
NODE_PATH=$COMPAT_DIR/node_modules
export NODE_PATH SYS_PYTHON

# compat_need_pymods MOD...: skip unless the system python has them.
compat_need_pymods()
{
	[ -x "$SYS_PYTHON" ] || skip "$SYS_PYTHON not found"
	for _m in "$@"; do
		"$SYS_PYTHON" -c "import $_m" 2>/dev/null ||
		    skip "$SYS_PYTHON has no module $_m (Debian python3-*; scripts/install-deps.sh --test)"
	done
}

# compat_need_node: skip unless node and the packages of tests/compat are
# there.
compat_need_node()
{
	command -v node >/dev/null 2>&1 || skip "node not found"
	for _m in ws https-proxy-agent http-proxy-agent; do
		[ -f "$NODE_PATH/$_m/package.json" ] ||
		    skip "no $NODE_PATH/$_m: run npm ci in tests/compat (scripts/install-deps.sh --test)"
	done
}

# compat_pki: the test PKI in $T/pki (tests/harness/mkpki.sh) plus
# compat.crt/compat.key, a leaf of the same CA for the suite's names.
compat_pki()
{
	command -v openssl >/dev/null 2>&1 || skip "openssl CLI not found"
	sh "$top_srcdir/tests/harness/mkpki.sh" "$T/pki" >"$T/mkpki.log" 2>&1 ||
	    hard_error "mkpki.sh: $(cat "$T/mkpki.log")"
	_p=$T/pki
	printf '%s\n' "basicConstraints = critical, CA:FALSE" \
	    "keyUsage = critical, digitalSignature" \
	    "extendedKeyUsage = serverAuth" \
	    "subjectAltName = DNS:ws.test, DNS:registry.test, DNS:git.test, DNS:api.test" \
	    >"$_p/compat.ext"
	{
		openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 \
		    -out "$_p/compat.key" &&
		openssl req -new -key "$_p/compat.key" -subj /CN=compat.test \
		    -out "$_p/compat.csr" &&
		openssl x509 -req -in "$_p/compat.csr" -CA "$_p/ca.crt" \
		    -CAkey "$_p/ca.key" -CAcreateserial -days 2 \
		    -extfile "$_p/compat.ext" -out "$_p/compat.crt"
	} >"$T/compat-pki.log" 2>&1 ||
	    hard_error "compat leaf: $(cat "$T/compat-pki.log")"
	chmod 600 "$_p/compat.key"
}

# start_compat_up NAME [-C CERT -K KEY]: compat_upstream.py as NAME; its
# event log is $T/NAME.jsonl. Sets PY_PORT.
start_compat_up()
{
	_cn=$1
	shift
	start_py_upstream "$_cn" compat_upstream.py -l "$T/$_cn.jsonl" "$@"
}

# daemon_check WHAT: a failed check when airlockd has died (a crash a
# client triggered: WHAT says which), with how it ended; then it is
# started again on $COMPAT_CONFIG, so that the following cases still say
# something.
daemon_check()
{
	sleep 0.5	# a crash on the close comes just after the client is done
	if kill -0 "$AIRLOCK_PID" 2>/dev/null &&
	    ! grep -q '^State:.*Z' "/proc/$AIRLOCK_PID/status" 2>/dev/null; then
		ok "airlockd alive after $1"
		return 0
	fi
	wait "$AIRLOCK_PID"
	_st=$?
	untrack_pid "$AIRLOCK_PID"
	_sig=""
	[ "$_st" -gt 128 ] && _sig=", signal $((_st - 128))"
	check_fail "airlockd died (exit status $_st$_sig) after $1"
	echo "=== restarted after: $1" >>"$T/airlockd.log"
	start_airlockd "$COMPAT_CONFIG"
	return 1
}

# check_audit REC K=V...: every field of the record has its value.
check_audit()
{
	_rec=$1
	_what=$2
	shift 2
	for _kv in "$@"; do
		_k=${_kv%%=*}
		_v=${_kv#*=}
		_got=$(audit_field "$_rec" "$_k")
		[ "$_got" = "$_v" ] && ok "$_what: audit $_k=$_v" ||
		    check_fail "$_what: audit $_k='$_got', want '$_v' ($_rec)"
	done
}
