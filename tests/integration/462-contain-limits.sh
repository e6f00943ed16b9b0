#!/bin/sh
# Issue 24, point 2: limits on every host. launcher.limits.pids and
# .memory hold whether the host has cgroup v2, only cgroup v1 (the v1
# pids and memory controllers) or neither (RLIMIT_NPROC, RLIMIT_AS,
# RLIMIT_FSIZE); the log names the mechanism. A bounded fork loop fails
# at the limit, and /tmp, /dev/shm and home share one budget of
# launcher.limits.memory. Own range 10.242.0.0/16, prefix t462-, table
# airlock_t462.
. "$top_srcdir/tests/integration/lib.sh"
CT_NUM=462
PIDS=24
MEM_MIB=128
CT_LAUNCHER_EXTRA="  limits: {pids: $PIDS, memory: ${MEM_MIB}MiB}"
. "$top_srcdir/tests/integration/contain-lib.sh"
ct_start

# the log says which mechanism each limit uses
i=0
until grep -q 'launcher: limits: ' "$T/airlockd.log"; do
	i=$((i + 1)); [ $i -le 50 ] || fail "no 'launcher: limits:' line in the log"; sleep 0.1
done
how=$(grep -o 'launcher: limits: .*' "$T/airlockd.log" | head -1)
note "$how"
if [ -d /sys/fs/cgroup/pids ] && [ ! -f /sys/fs/cgroup/cgroup.controllers ]; then
	echo "$how" | grep -q 'pids by the cgroup v1 pids controller' ||
	    fail "cgroup v1 pids is mounted but not used: $how"
	echo "$how" | grep -q 'memory by the cgroup v1 memory controller' ||
	    fail "cgroup v1 memory is mounted but not used: $how"
fi

# a bounded fork loop: the children that fit, then EAGAIN
ctl run -- python3 - "$PIDS" >"$T/fork.out" 2>"$T/fork.err" <<'PY' || fail "fork loop: $(cat "$T/fork.err")"
import os, signal, sys, time
limit = int(sys.argv[1])
kids, err = [], None
for i in range(limit * 4):
    try:
        pid = os.fork()
    except OSError as e:
        err = e.errno
        break
    if pid == 0:
        time.sleep(60)
        os._exit(0)
    kids.append(pid)
for k in kids:
    os.kill(k, signal.SIGKILL)
    os.waitpid(k, 0)
print("forked", len(kids), "then", err)
PY
cat "$T/fork.out"
n=$(awk '/^forked/ {print $2}' "$T/fork.out")
e=$(awk '/^forked/ {print $4}' "$T/fork.out")
[ "$e" = 11 ] || fail "the fork loop did not end in EAGAIN: $(cat "$T/fork.out")"
# the init and python itself count too (and with RLIMIT_NPROC, other
# processes of the same user)
[ "$n" -le "$PIDS" ] && [ "$n" -ge $((PIDS - 4)) ] ||
    fail "forked $n children under pids $PIDS"
ok "fork loop: $n children, then EAGAIN (launcher.limits.pids $PIDS)"

# one budget for the three writable tmpfs: 50 MiB in each does not fit.
# Under a memory cgroup the tmpfs pages count too, so the writer may be
# OOM-killed before ENOSPC: each writer volunteers (oom_score_adj 1000) so
# the probe survives to count.
ctl run -- python3 - >"$T/fill.out" 2>&1 <<'PY'
import os, subprocess
dirs = ["/tmp", "/dev/shm", os.environ["HOME"]]
for d in dirs:
    r = subprocess.run(["sh", "-c", "echo 1000 >/proc/self/oom_score_adj; "
                        "exec dd if=/dev/zero of=%s/fill bs=1M count=50" % d],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    print("rc", d, r.returncode)
total = 0
for d in dirs:
    try:
        total += os.stat(d + "/fill").st_blocks * 512
    except OSError:
        pass
print("total_kib", total // 1024)
v = [os.statvfs(d) for d in dirs]
print("sizes_kib", " ".join(str(x.f_blocks * x.f_frsize // 1024) for x in v))
print("fsids", len(set(x.f_fsid for x in v)))
PY
cat "$T/fill.out"
total=$(awk '/^total_kib/ {print $2}' "$T/fill.out")
[ -n "$total" ] || fail "no total: $(cat "$T/fill.out")"
[ "$total" -le $((MEM_MIB * 1024)) ] || fail "$total KiB written to the tmpfs, over the ${MEM_MIB} MiB budget"
grep -q '^rc .* [1-9-]' "$T/fill.out" || fail "no write failed: $(cat "$T/fill.out")"
grep -q '^fsids 1$' "$T/fill.out" || fail "/tmp, /dev/shm and home are not one filesystem"
set -- $(awk '/^sizes_kib/ {print $2, $3, $4}' "$T/fill.out")
[ "$1" = $((MEM_MIB * 1024)) ] && [ "$2" = "$1" ] && [ "$3" = "$1" ] ||
    fail "tmpfs sizes $*, want $((MEM_MIB * 1024)) KiB, one for all"
ok "tmpfs: /tmp, /dev/shm and home are one ${MEM_MIB} MiB budget ($total KiB written in all, then a write failed)"

# memory: a process cannot allocate past the limit
ctl run -- python3 -c '
try:
    b = bytearray(256 << 20)
    b[::4096] = b"x" * len(b[::4096])
    print("allocated")
except MemoryError:
    print("MemoryError")
' >"$T/mem.out" 2>&1
st=$?
cat "$T/mem.out"
grep -q '^allocated$' "$T/mem.out" && fail "256 MiB allocated under a ${MEM_MIB} MiB limit"
[ $st -ne 0 ] || grep -q MemoryError "$T/mem.out" || fail "allocation: $(cat "$T/mem.out")"
ok "memory: 256 MiB not allocatable under ${MEM_MIB} MiB (status $st)"
ct_stop
finish
