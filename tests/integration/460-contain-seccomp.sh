#!/bin/sh
# Issue 24, points 1 and 3, in gateway mode (airlockd as root, backend
# netns): the workload runs under the seccomp filter (Seccomp: 2; unshare,
# new namespaces, mount, keyctl, bpf, perf_event_open, userfaultfd,
# io_uring, ptrace attach, setns refused with EPERM) while real workloads
# keep working: python3 (threads too), curl through the gateway, git clone
# of a local repository and a C compile with gcc. And nothing under /proc
# inside names a host path: /proc/1/cmdline is the init's own, and no
# cmdline, environ or mountinfo names the config, state_dir, the secret's
# file (under /etc, hidden by the /etc overlay, not a mount) or the
# gateway's binary. Own range 10.240.0.0/16, prefix t460-, table
# airlock_t460.
. "$top_srcdir/tests/integration/lib.sh"
CT_NUM=460
. "$top_srcdir/tests/integration/contain-lib.sh"
ct_start

# --- point 1: the filter is there and refuses what it lists
ctl run -- python3 - >"$T/sc.out" 2>"$T/sc.err" <<'PY' || fail "probe: $(cat "$T/sc.err")"
import ctypes, errno, os, socket
libc = ctypes.CDLL(None, use_errno=True)
def sc(name, nr, *args):
    r = libc.syscall(nr, *[ctypes.c_long(a) for a in args])
    e = ctypes.get_errno()
    print(name, "ok" if r >= 0 else errno.errorcode.get(e, str(e)))
for l in open("/proc/self/status"):
    if l.startswith(("Seccomp:", "NoNewPrivs:")):
        print(l.split()[0], l.split()[1])
CLONE_NEWUSER, CLONE_NEWNET, CLONE_NEWNS = 0x10000000, 0x40000000, 0x20000
sc("unshare-user", 272, CLONE_NEWUSER)
sc("unshare-net", 272, CLONE_NEWNET)
sc("unshare-user-mnt", 272, CLONE_NEWUSER | CLONE_NEWNS)
sc("clone-newuser", 56, CLONE_NEWUSER | 17, 0, 0, 0, 0)
sc("clone3", 435, 0, 0)
sc("setns", 308, 0, 0)
sc("mount", 165, 0, 0, 0, 0, 0)
sc("pivot_root", 155, 0, 0)
sc("keyctl", 250, 0, 0, 0, 0, 0)          # KEYCTL_GET_KEYRING_ID
sc("add_key", 248, 0, 0, 0, 0, 0)
sc("bpf", 321, 0, 0, 0)
sc("perf_event_open", 298, 0, 0, -1, -1, 0)
sc("userfaultfd", 323, 0)
sc("io_uring_setup", 425, 1, 0)
sc("kexec_load", 246, 0, 0, 0, 0)
sc("init_module", 175, 0, 0, 0)
sc("ptrace-attach", 101, 16, os.getppid(), 0, 0)
try:
    socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
    print("af_packet ok")
except OSError as e:
    print("af_packet", errno.errorcode[e.errno])
PY
cat "$T/sc.out"
grep -q '^Seccomp: 2$' "$T/sc.out" || fail "no seccomp filter on the workload"
for s in unshare-user unshare-net unshare-user-mnt clone-newuser setns mount \
    pivot_root keyctl add_key bpf perf_event_open userfaultfd io_uring_setup \
    kexec_load init_module ptrace-attach af_packet; do
	grep -q "^$s EPERM$" "$T/sc.out" || fail "$s not refused with EPERM: $(grep "^$s " "$T/sc.out")"
done
grep -q '^clone3 ENOSYS$' "$T/sc.out" || fail "clone3 not ENOSYS"
ctl run -- unshare -r id >"$T/unshare.out" 2>&1 && fail "unshare -r worked: $(cat "$T/unshare.out")"
grep -q "Operation not permitted" "$T/unshare.out" || fail "unshare -r: $(cat "$T/unshare.out")"
ok "seccomp: new namespaces, mount, keyrings, bpf, perf, userfaultfd, io_uring, kexec, modules, ptrace attach refused"

# --- point 1: real workloads keep working under it
ctl run -- python3 -c '
import threading, subprocess, hashlib
out = []
ts = [threading.Thread(target=lambda i=i: out.append(hashlib.sha256(str(i).encode()).hexdigest())) for i in range(8)]
[t.start() for t in ts]; [t.join() for t in ts]
print("py-threads", len(out))
print("py-sub", subprocess.run(["echo", "child"], capture_output=True, text=True).stdout.strip())
' >"$T/py.out" 2>"$T/py.err" || fail "python3: $(cat "$T/py.err")"
grep -q '^py-threads 8$' "$T/py.out" && grep -q '^py-sub child$' "$T/py.out" ||
    fail "python3 threads/subprocess: $(cat "$T/py.out")"
ctl run -- curl -sS -m 10 -o /dev/null -w '%{http_code}\n' "https://api.test:$TLS_PORT/size/100" >"$T/curl.out" 2>"$T/curl.err" ||
    fail "curl: $(cat "$T/curl.err")"
[ "$(cat "$T/curl.out")" = 200 ] || fail "curl through the gateway: $(cat "$T/curl.out")"
ctl run -- sh -ec '
cd "$HOME"
git init -q -b main src
cd src
echo hello >README
git -c user.name=t -c user.email=t@t add README
git -c user.name=t -c user.email=t@t commit -q -m one
cd ..
git clone -q "file://$HOME/src" copy
cat copy/README' >"$T/git.out" 2>"$T/git.err" || fail "git: $(cat "$T/git.err")"
[ "$(cat "$T/git.out")" = hello ] || fail "git clone: $(cat "$T/git.out")"
ctl run -- sh -ec '
cd /tmp
printf "#include <stdio.h>\n#include <pthread.h>\nstatic void *f(void *a) { return a; }\nint main(void) { pthread_t t; pthread_create(&t, 0, f, 0); pthread_join(t, 0); puts(\"compiled\"); return 0; }\n" >hello.c
gcc -O2 -pthread -o hello hello.c
./hello' >"$T/gcc.out" 2>"$T/gcc.err" || fail "gcc: $(cat "$T/gcc.err")"
[ "$(cat "$T/gcc.out")" = compiled ] || fail "gcc: $(cat "$T/gcc.out")"
ok "under the filter: python3 (threads, subprocess), curl via the gateway, git clone, gcc compile and run"

# --- point 3: nothing under /proc names a host path
ctl run -- sh -c 'cat /proc/1/cmdline | tr "\0" " "; echo; cat /proc/1/comm' >"$T/init.out" 2>&1
[ "$(head -1 "$T/init.out")" = "airlock-init " ] || fail "/proc/1/cmdline: $(cat "$T/init.out")"
ctl run -- sh -c 'for f in /proc/[0-9]*/cmdline /proc/[0-9]*/environ /proc/[0-9]*/mountinfo /proc/self/mounts; do echo "== $f"; tr "\0" "\n" <"$f" 2>&1; done' >"$T/proc.out" 2>&1
grep -c '^== ' "$T/proc.out" >/dev/null || fail "nothing read under /proc"
grep -q 'mountinfo' "$T/proc.out" || fail "no mountinfo read"
bindir=$(cd "$top_builddir/src" && pwd)
for p in "$T" "$CT_ETC" "$bindir" "airlockd" "airlock.yaml" "$SECRET"; do
	if grep -qF -- "$p" "$T/proc.out"; then
		fail "/proc inside names $p: $(grep -F -- "$p" "$T/proc.out" | head -3)"
	fi
done
# the masked file is gone, not merely empty (its directory is
# traversable: 0711)
ctl run -- sh -c "cat '$CT_ETC/key' 2>&1; test -e '$CT_ETC/key' && echo PRESENT" >"$T/mask.out" 2>&1
grep -q "No such file" "$T/mask.out" || fail "the secret's file is visible: $(cat "$T/mask.out")"
grep -q PRESENT "$T/mask.out" && fail "the secret's file exists inside"
grep -qF -- "$SECRET" "$T/mask.out" && fail "the secret is readable"
ok "/proc inside: init's cmdline is its own; no cmdline, environ or mountinfo names the config, state, secret file or binary"
ct_stop
finish
