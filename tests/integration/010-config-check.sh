#!/bin/sh
# airlockd -c FILE -t: every problem as FILE:LINE:COL: message, exit 1;
# a good file prints "configuration OK" and exits 0.
. "$top_srcdir/tests/integration/lib.sh"

# expect_lines OUTPUT LINE:COL:REGEX...: each problem is reported at
# exactly this position with a message matching REGEX.
expect_lines()
{
	_out=$1
	shift
	for _want in "$@"; do
		_lc=${_want%%|*}
		_re=${_want#*|}
		grep -E "^[^ ]*bad[0-9]*\.yaml:$_lc: .*$_re" "$_out" >/dev/null ||
		    fail "no problem reported at $_lc matching /$_re/; got:
$(cat "$_out")"
	done
}

# 1. Many problems in one file: all of them, not just the first.
cat >"$T/bad.yaml" <<'YAML'
listen:
  proxy: "127.0.0.1:3128"
workers: many
limits:
  idle_timeout: 5 minutes
  header_bytes: 64KiB
policies:
  - name: default
    rules:
      - host: "api.example.com"
        metods: [GET]
        ports: [443, 70000]
sandboxes:
  - id: demo
    policy: nosuch
    token: literal:abc
audit: {file: "-", hash_chain: maybe}
frobnicate: 1
YAML
# run from another directory: names in messages are the file as given
cd "$T" || hard_error "cd"
"$AIRLOCKD" -c bad.yaml -t >"$T/out1" 2>&1
rc=$?
[ "$rc" -eq 1 ] || fail "bad.yaml -t exited $rc, want 1"
expect_lines "$T/out1" \
    '3:10|workers.*many' \
    '5:17|duration.*5 minutes' \
    '11:9|unknown key "metods" in rule \(did you mean "methods"\?\)' \
    '12:22|port.*70000' \
    '15:13|nosuch' \
    '17:32|hash_chain.*maybe' \
    '18:1|unknown key "frobnicate"'
n=$(grep -cE '^bad\.yaml:[0-9]+:[0-9]+: ' "$T/out1")
[ "$n" -eq 7 ] || fail "want 7 FILE:LINE:COL lines, got $n:
$(cat "$T/out1")"
grep -q 'configuration OK' "$T/out1" && fail "bad file reported OK"
ok "7 problems, each at its line:col"

# 2. Duplicates, sources, bad networks and sizes; relative file: paths are
#    relative to the config's directory, secret files must be 0600.
mkdir "$T/conf"
printf 'sekrit-token\n' >"$T/conf/tok.txt"
chmod 644 "$T/conf/tok.txt"
cat >"$T/conf/bad2.yaml" <<'YAML'
policies:
  - name: p
    rules:
      - host: "*"
  - name: p
sandboxes:
  - id: a
    policy: p
    token: file:tok.txt
  - id: b
    policy: p
    token: abc
  - id: a
    policy: p
upstream:
  allow_networks: ["127.0.0.1/33"]
limits: {header_bytes: 10XB}
YAML
"$AIRLOCKD" -c "$T/conf/bad2.yaml" -t >"$T/out2" 2>&1
rc=$?
[ "$rc" -eq 1 ] || fail "bad2.yaml -t exited $rc, want 1"
expect_lines "$T/out2" \
    '5:11|duplicate policy' \
    '9:12|(group|others|mode|0644)' \
    '12:12|token' \
    '13:9|duplicate sandbox' \
    '16:20|127\.0\.0\.1/33' \
    '17:24|10XB'
grep -q 'sekrit-token' "$T/out2" && fail "the token file's content was printed"
chmod 600 "$T/conf/tok.txt"
"$AIRLOCKD" -c "$T/conf/bad2.yaml" -t >"$T/out3" 2>&1
[ $? -eq 1 ] || fail "bad2.yaml (0600 token) should still fail"
grep -q ':9:12:' "$T/out3" && fail "0600 token file still refused: $(cat "$T/out3")"
ok "duplicates, sources, networks, sizes"

# 3. YAML syntax errors carry a position too.
printf 'policies:\n  - name: p\n    rules: [\n' >"$T/bad3.yaml"
"$AIRLOCKD" -c "$T/bad3.yaml" -t >"$T/out4" 2>&1
rc=$?
[ "$rc" -eq 1 ] || fail "bad3.yaml -t exited $rc, want 1"
grep -qE 'bad3\.yaml:[0-9]+:[0-9]+: ' "$T/out4" ||
    fail "YAML syntax error without FILE:LINE:COL: $(cat "$T/out4")"
ok "YAML syntax error"

# 4. A good minimal file (only policies and sandboxes).
cat >"$T/conf/good.yaml" <<'YAML'
policies:
  - name: p
    rules:
      - host: "*"
sandboxes:
  - id: a
    policy: p
    token: file:tok.txt
YAML
out=$("$AIRLOCKD" -c "$T/conf/good.yaml" -t 2>&1)
rc=$?
[ "$rc" -eq 0 ] || fail "good.yaml -t exited $rc: $out"
echo "$out" | grep -q 'configuration OK' || fail "no 'configuration OK': $out"
[ -e "$T/conf/state" ] && fail "-t created the state directory"
ok "minimal good file"

# 5. The shipped example.
[ -f "$top_srcdir/conf/airlock.yaml" ] || fail "conf/airlock.yaml is missing"
out=$("$AIRLOCKD" -c "$top_srcdir/conf/airlock.yaml" -t 2>&1)
rc=$?
[ "$rc" -eq 0 ] || fail "conf/airlock.yaml -t exited $rc: $out"
echo "$out" | grep -q 'configuration OK' || fail "no 'configuration OK': $out"
ok "conf/airlock.yaml"
exit 0
