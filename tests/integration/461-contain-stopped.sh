#!/bin/sh
# Issue 24, point 4: a workload that stopped itself (SIGSTOP) cannot hold
# its sandbox. airlockctl run passes the first SIGTERM on; a second one
# (or the first after its 10 s grace period) kills every process of the
# sandbox with SIGKILL: airlockctl exits 137 (128 + SIGKILL), the claim is
# released, and no process of the workload (its children included) is
# left. Own range 10.241.0.0/16, prefix t461-, table airlock_t461.
. "$top_srcdir/tests/integration/lib.sh"
CT_NUM=461
. "$top_srcdir/tests/integration/contain-lib.sh"
ct_start

# the workload's processes on the host, by a marker in their arguments
marked() { pgrep -xf "sleep 4${CT_NUM}$1" | wc -l; }

# run_stopped MARK: a workload with two children that ignore SIGTERM and
# that stops itself;
# sets RUN_PID once it is stopped
run_stopped()
{
	"$AIRLOCKCTL" -c "$T/airlock.yaml" run -- sh -c "trap '' TERM; sleep 4${CT_NUM}$1 & sleep 4${CT_NUM}$1 & kill -STOP \$\$; echo RESUMED" \
	    >"$T/run$1.out" 2>"$T/run$1.err" &
	RUN_PID=$!
	track_pid "$RUN_PID"
	i=0
	until [ "$(marked "$1")" = 2 ] && [ "$(ct_launched)" = 1 ]; do
		i=$((i + 1))
		[ $i -le 200 ] || fail "the workload did not start: $(cat "$T/run$1.err")"
		sleep 0.1
	done
	sleep 1		# past "kill -STOP"
}

# ST: exit status of RUN_PID within <secs>, or "running" (no subshell:
# only this shell can wait for it)
status_within()
{
	i=0
	while kill -0 "$RUN_PID" 2>/dev/null; do
		i=$((i + 1))
		[ $i -le $(($1 * 10)) ] && { sleep 0.1; continue; }
		ST=running
		return
	done
	wait "$RUN_PID"
	ST=$?
	untrack_pid "$RUN_PID"
}

# after the first TERM, the stopped workload holds on; the second kills all
run_stopped 1
kill -TERM "$RUN_PID"
status_within 3; st=$ST
[ "$st" = running ] || fail "airlockctl exited ($st) on the first SIGTERM, before the grace period"
[ "$(marked 1)" = 2 ] || fail "the workload's children died on the first SIGTERM"
kill -TERM "$RUN_PID"
status_within 20; st=$ST
[ "$st" = 137 ] || fail "after a second SIGTERM: status $st, want 137 ($(cat "$T/run1.err"))"
grep -q RESUMED "$T/run1.out" && fail "the workload ran on"
i=0
until [ "$(marked 1)" = 0 ] && [ "$(ct_launched)" = 0 ]; do
	i=$((i + 1))
	[ $i -le 100 ] || fail "left: $(marked 1) processes, $(ct_launched) claimed sandboxes"
	sleep 0.1
done
ok "stopped workload: first SIGTERM passed on, the second killed its whole tree; 137, claim released"

# one SIGTERM only: the grace period ends it
run_stopped 2
t0=$(date +%s)
kill -TERM "$RUN_PID"
status_within 40; st=$ST
t1=$(date +%s)
[ "$st" = 137 ] || fail "one SIGTERM: status $st after $((t1 - t0)) s, want 137"
[ $((t1 - t0)) -ge 8 ] || fail "killed after $((t1 - t0)) s, before the 10 s grace period"
i=0
until [ "$(marked 2)" = 0 ] && [ "$(ct_launched)" = 0 ]; do
	i=$((i + 1))
	[ $i -le 100 ] || fail "left: $(marked 2) processes, $(ct_launched) claimed sandboxes"
	sleep 0.1
done
ok "one SIGTERM: the whole tree killed after the grace period ($((t1 - t0)) s), 137, claim released"

# a workload that does exit on SIGTERM still reports it as before
"$AIRLOCKCTL" -c "$T/airlock.yaml" run -- sh -c "trap 'exit 7' TERM; sleep 4${CT_NUM}3 & wait" >"$T/run3.out" 2>&1 &
RUN_PID=$!
track_pid "$RUN_PID"
i=0
until [ "$(marked 3)" = 1 ]; do
	i=$((i + 1)); [ $i -le 200 ] || fail "workload 3 did not start"; sleep 0.1
done
sleep 0.5
kill -TERM "$RUN_PID"
status_within 20; st=$ST
[ "$st" = 7 ] || fail "a workload that handles SIGTERM: status $st, want 7"
pkill -xf "sleep 4${CT_NUM}3" 2>/dev/null
ok "a workload that handles SIGTERM exits with its own status"
ct_stop
finish
