/*
 * The workload's seccomp-bpf filter (issue 24, point 1), applied by
 * launcher_enter_exec() after every privilege is dropped and just before
 * execve, so it covers the workload and everything it starts.
 *
 * A deny list modelled on the default profiles of Docker and Podman: the
 * system calls below fail with EPERM (clone3 with ENOSYS, see there), the
 * rest is allowed, so ordinary programs (shells, python, node, git, gcc,
 * curl) run unchanged. Calls of another architecture (i386 int 0x80, x32)
 * kill the process: the filter names only the native one, and those ABIs
 * are the classic way around a filter. docs/threat-model.md lists each
 * entry with the reason it is there.
 */
#include "config.h"

#include <errno.h>
#include <sched.h>
#include <stddef.h>
#include <string.h>

#include <seccomp.h>
#include <sys/ptrace.h>

#include "launcher/lnc_internal.h"

#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME	0x00000080
#endif

/* Namespace flags of clone(2) and unshare(2). */
static const unsigned long ns_flags[] = {
	CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC,
	CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET, CLONE_NEWTIME,
};

/*
 * Refused outright. Most need a capability the workload lacks; they are
 * listed anyway because a capability gained some other way (a kernel bug,
 * a user namespace) must still not reach them.
 */
static const char *const denied[] = {
	/* namespaces and mounts: the first step of a container escape */
	"setns", "mount", "umount", "umount2", "pivot_root", "chroot",
	"move_mount", "open_tree", "fsopen", "fsconfig", "fsmount", "fspick",
	"mount_setattr",
	/* the kernel keyring is not namespaced */
	"keyctl", "add_key", "request_key",
	/* large kernel attack surface, rarely needed by a workload */
	"bpf", "perf_event_open", "userfaultfd", "fanotify_init",
	"lookup_dcookie", "open_by_handle_at", "name_to_handle_at",
	/* the running kernel and its modules */
	"kexec_load", "kexec_file_load", "init_module", "finit_module",
	"delete_module", "create_module", "query_module", "get_kernel_syms",
	/* host-wide state: clocks, swap, reboot, accounting, quotas */
	"reboot", "swapon", "swapoff", "acct", "settimeofday",
	"clock_settime", "clock_adjtime", "adjtimex", "stime",
	"sethostname", "setdomainname", "quotactl", "quotactl_fd",
	"nfsservctl", "syslog", "uselib", "_sysctl", "vhangup",
	/* direct hardware access */
	"iopl", "ioperm", "vm86", "vm86old",
	/* reading and writing another process's memory */
	"process_vm_readv", "process_vm_writev", "kcmp",
	NULL,
};

/* io_uring: its own path around this filter and a frequent source of
   kernel bugs (Docker denies it since 2023); launcher.io_uring allows it */
static const char *const io_uring[] = {
	"io_uring_setup", "io_uring_enter", "io_uring_register", NULL,
};

static int
deny(scmp_filter_ctx ctx, const char *name, int err, unsigned argc,
    const struct scmp_arg_cmp *args)
{
	int	nr;

	/* a name this kernel's architecture does not have: nothing to do */
	if ((nr = seccomp_syscall_resolve_name(name)) == __NR_SCMP_ERROR)
		return 0;
	return seccomp_rule_add_array(ctx, SCMP_ACT_ERRNO(err), nr, argc,
	    args);
}

static int
rules_add(scmp_filter_ctx ctx, int allow_io_uring)
{
	struct scmp_arg_cmp	a;
	size_t			i;
	int			r;

	for (i = 0; denied[i] != NULL; i++)
		if ((r = deny(ctx, denied[i], EPERM, 0, NULL)) < 0)
			return r;
	for (i = 0; !allow_io_uring && io_uring[i] != NULL; i++)
		if ((r = deny(ctx, io_uring[i], EPERM, 0, NULL)) < 0)
			return r;
	/* clone and unshare with any namespace flag (one rule per bit: a
	   rule's comparisons are ANDed, rules are ORed) */
	for (i = 0; i < sizeof(ns_flags) / sizeof(ns_flags[0]); i++) {
		a = (struct scmp_arg_cmp)SCMP_A0(SCMP_CMP_MASKED_EQ,
		    ns_flags[i], ns_flags[i]);
		if ((r = deny(ctx, "clone", EPERM, 1, &a)) < 0 ||
		    (r = deny(ctx, "unshare", EPERM, 1, &a)) < 0)
			return r;
	}
	/*
	 * clone3 passes its flags in memory, where a filter cannot look:
	 * ENOSYS makes the C library fall back to clone(2), which the
	 * rules above check (as runc and Docker do).
	 */
	if ((r = deny(ctx, "clone3", ENOSYS, 0, NULL)) < 0)
		return r;
	/* ptrace: a child may ask its parent to trace it (gdb, strace
	   running a command); attaching to any other process is refused */
	a = (struct scmp_arg_cmp)SCMP_A0(SCMP_CMP_EQ, PTRACE_ATTACH);
	if ((r = deny(ctx, "ptrace", EPERM, 1, &a)) < 0)
		return r;
	a = (struct scmp_arg_cmp)SCMP_A0(SCMP_CMP_EQ, PTRACE_SEIZE);
	if ((r = deny(ctx, "ptrace", EPERM, 1, &a)) < 0)
		return r;
	return 0;
}

int
lnc_seccomp_apply(int allow_io_uring)
{
	scmp_filter_ctx	ctx;
	int		r;

	if ((ctx = seccomp_init(SCMP_ACT_ALLOW)) == NULL) {
		errno = ENOMEM;
		return -1;
	}
	/* calls of another ABI end the process (see the top) */
	if ((r = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH,
	    SCMP_ACT_KILL_PROCESS)) < 0 ||
	    (r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 1)) < 0 ||
	    (r = rules_add(ctx, allow_io_uring)) < 0 || (r = seccomp_load(ctx)) < 0) {
		seccomp_release(ctx);
		errno = -r;
		return -1;
	}
	seccomp_release(ctx);
	return 0;
}
