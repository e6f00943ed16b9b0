/*
 * airlockd: load the config, prepare state, start the audit writer and the
 * workers, then wait for signals in the main thread.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <grp.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <event2/event.h>
#include <event2/thread.h>
#include <openssl/crypto.h>

#include "admin/admin.h"
#include "audit/aud.h"
#include "budget/bud.h"
#include "ca/ca.h"
#include "cfg/cfg.h"
#include "conn/conn.h"
#include "conn/worker.h"
#include "dns/dns_stub.h"
#include "dns/dns_synth.h"
#include "launcher/launcher.h"
#include "metrics/metrics.h"
#include "policy/pol.h"
#include "policy/pol_ask.h"
#include "sbx/sbx.h"
#include "sbx/sbx_fleet.h"
#include "sched/pool.h"
#include "secrets/sec.h"
#include "tls/tls.h"
#include "util/log.h"
#include "util/util.h"

static struct cfg	*current_cfg;
static const char	*cfg_path;
static struct launcher	*launcher;	/* launcher.backend netns, qemu */

/* A sandbox with namespaces was deleted: they go too. */
static void
destroy_namespaces(const char *id)
{
	/* ENOENT: gone already (a VM that never got ready) */
	if (launcher != NULL && launcher_destroy(launcher, id) == -1 &&
	    errno != ENOENT)
		log_warnx("sandbox %s: the launcher could not destroy it", id);
}

static uid_t	drop_uid;
static gid_t	drop_gid;
static char	drop_keep[4200];	/* <state_dir>/snapshots: root's */

static int
chown_one(const char *path, const struct stat *st, int type, struct FTW *f)
{
	/* the launcher's snapshot store (VM templates among them) stays
	   root's: the gateway must not read or alter what VMs start from */
	if (type == FTW_D && strcmp(path, drop_keep) == 0)
		return FTW_SKIP_SUBTREE;
	if (lchown(path, drop_uid, drop_gid) == -1)
		log_warn("chown %s", path);
	return FTW_CONTINUE;
}

/*
 * After setup, a gateway with a launcher gives up root: only the launcher
 * creates namespaces, links and rules. Its state (CAs, ledger, tokens,
 * sandboxes, the admin socket) becomes the gateway user's first.
 */
static void
drop_root(const struct cfg *cfg)
{
	drop_uid = cfg->c_gateway_uid;
	drop_gid = cfg->c_gateway_gid;
	snprintf(drop_keep, sizeof(drop_keep), "%s/snapshots",
	    cfg->c_state_dir);
	if (nftw(cfg->c_state_dir, chown_one, 32, FTW_PHYS |
	    FTW_ACTIONRETVAL) == -1)
		fatal("chown %s", cfg->c_state_dir);
	if (strcmp(cfg->c_audit_file, "-") != 0 &&
	    chown(cfg->c_audit_file, drop_uid, drop_gid) == -1 &&
	    errno != ENOENT)
		log_warn("chown %s", cfg->c_audit_file);
	if (setgroups(0, NULL) == -1 || setgid(drop_gid) == -1 ||
	    setuid(drop_uid) == -1)
		fatal("dropping root to %u:%u", (unsigned)drop_uid,
		    (unsigned)drop_gid);
	if (setuid(0) != -1)
		fatalx("root could be regained after dropping it");
	if (access(cfg->c_state_dir, R_OK | W_OK | X_OK) == -1)
		fatal("state_dir %s is out of reach of launcher.gateway_user "
		    "%u:%u (are its parent directories searchable?)",
		    cfg->c_state_dir, (unsigned)drop_uid, (unsigned)drop_gid);
	prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
	/* secrets stay unreadable: no core, no ptrace, also as this user */
	sec_harden_process();
	log_info("gateway runs as %u:%u from now on (the launcher keeps "
	    "root)", (unsigned)drop_uid, (unsigned)drop_gid);
}

/*
 * launcher.backend netns or qemu: fork the privileged launcher now, before any
 * secret value is loaded, and have it set up the host (nftables, the
 * gateway address, the blackhole route). <cfg> is borrowed: the config is
 * read once, so that "-c /dev/stdin" and "-c <(...)" work.
 */
static int
start_launcher(const struct cfg *cfg)
{
	struct launcher_opts	 lo;
	char			 why[256];

	if (!CFG_BACKEND_LAUNCHED(cfg))
		return 0;
	if (geteuid() != 0) {
		log_warnx("launcher.backend %s needs root (namespaces, "
		    "links, taps, nftables)", cfg->c_launcher_backend ==
		    CFG_BACKEND_QEMU ? "qemu" : "netns");
		return -1;
	}
	if (launcher_opts_from_cfg(&lo, cfg) == -1 ||
	    (launcher = launcher_spawn(&lo)) == NULL) {
		log_warnx("cannot start the launcher");
		return -1;
	}
	if (launcher_setup_host(launcher, why, sizeof(why)) == -1) {
		log_warnx("launcher: host setup failed: %s", why);
		return -1;
	}
	log_info("launcher %d: host set up for %s sandboxes",
	    (int)launcher_pid(launcher), lo.lo_vm ? "qemu microVM" : "netns");
	return 0;
}

static void
usage(FILE *f)
{
	fprintf(f, "usage: airlockd -c FILE [-t] [-v]\n"
	    "       airlockd --version | --help\n"
	    "  -c FILE   configuration file (YAML)\n"
	    "  -t        check the configuration, print problems, exit\n"
	    "  -v        verbose logging\n");
}

static int
mkdir_p(const char *path, mode_t mode)
{
	char	 tmp[4096], *p;

	if (snprintf(tmp, sizeof(tmp), "%s", path) >= (int)sizeof(tmp))
		return -1;
	for (p = tmp + 1; *p != '\0'; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(tmp, 0755) == -1 && errno != EEXIST)
			return -1;
		*p = '/';
	}
	if (mkdir(tmp, mode) == -1 && errno != EEXIST)
		return -1;
	return 0;
}

/*
 * A sandbox without a token source gets one generated once and kept in
 * state_dir/tokens/<id> (0600), so it survives restarts and an operator
 * can hand it out. Never logged.
 */
static int
prepare_tokens(struct cfg *cfg)
{
	char	 dir[4096], path[4200], tok[65], buf[256];
	size_t	 i;
	ssize_t	 n;
	int	 fd;

	snprintf(dir, sizeof(dir), "%s/tokens", cfg->c_state_dir);
	for (i = 0; i < cfg->c_nsandboxes; i++) {
		struct cfg_sandbox *s = &cfg->c_sandboxes[i];

		if (s->s_token != NULL)
			continue;
		if (mkdir_p(dir, 0700) == -1) {
			log_warn("state: %s", dir);
			return -1;
		}
		snprintf(path, sizeof(path), "%s/%s", dir, s->s_id);
		if ((fd = open(path, O_RDONLY | O_CLOEXEC)) != -1) {
			n = read(fd, buf, sizeof(buf) - 1);
			close(fd);
			while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
				n--;
			if (n > 0) {
				s->s_token = xstrndup(buf, (size_t)n);
				s->s_token_len = (size_t)n;
				OPENSSL_cleanse(buf, sizeof(buf));
				continue;
			}
		}
		util_random_hex(tok, 24);
		fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		if (fd == -1 || write(fd, tok, strlen(tok)) !=
		    (ssize_t)strlen(tok)) {
			log_warn("state: %s", path);
			if (fd != -1)
				close(fd);
			return -1;
		}
		close(fd);
		s->s_token = xstrdup(tok);
		s->s_token_len = strlen(tok);
		s->s_token_generated = 1;
		OPENSSL_cleanse(tok, sizeof(tok));
		log_info("sandbox %s: generated a proxy token in %s", s->s_id,
		    path);
	}
	return 0;
}

/*
 * Prepare what a loaded <cfg> needs (state_dir, tokens, secrets, CAs).
 * Problems go to <errs>, one "FILE: ..." line each. Returns 0 or -1; <cfg>
 * stays the caller's either way.
 */
static int
prepare_config(struct cfg *cfg, FILE *errs)
{
	const char	*path = cfg->c_file;
	size_t		 i;

	if (mkdir_p(cfg->c_state_dir, 0700) == -1) {
		fprintf(errs, "%s: state_dir %s: %s\n", path,
		    cfg->c_state_dir, strerror(errno));
		return -1;
	}
	if (prepare_tokens(cfg) == -1) {
		fprintf(errs, "%s: sandbox tokens could not be prepared under "
		    "%s/tokens (see the log)\n", path, cfg->c_state_dir);
		return -1;
	}
	/* secret values: loaded now, held in locked memory */
	if (cfg->c_nsecrets > 0 &&
	    (cfg->c_store = sec_store_new(cfg, errs)) == NULL)
		return -1;
	/* static sandboxes get their CA now: fetchable before any request */
	for (i = 0; i < cfg->c_nsandboxes; i++)
		if (ca_get(cfg->c_state_dir, cfg->c_sandboxes[i].s_id) ==
		    NULL) {
			fprintf(errs, "%s: sandbox %s: its CA could not be "
			    "created (see the log)\n", path,
			    cfg->c_sandboxes[i].s_id);
			return -1;
		}
	pol_report_warn(cfg);	/* at start and on every reload */
	return 0;
}

/*
 * Load <path> (a reload reads the file anew) and prepare it. Problems go to
 * <errs>, one FILE:LINE:COL (or FILE: ...) line each.
 */
static struct cfg *
load_config(const char *path, FILE *errs)
{
	struct cfg	*cfg;
	int		 nerr = 0;

	if ((cfg = cfg_load(path, errs, &nerr)) == NULL)
		return NULL;
	if (prepare_config(cfg, errs) == -1) {
		cfg_unref(cfg);
		return NULL;
	}
	return cfg;
}

static void
on_stop(evutil_socket_t sig, short what, void *arg)
{
	struct event_base	*base = arg;

	log_info("signal %d: draining and stopping", (int)sig);
	workers_stop();
	event_base_loopexit(base, NULL);
}

static void
on_usr1(evutil_socket_t sig, short what, void *arg)
{
	aud_reopen();
}

/* Same string, or both NULL. */
static int
same_str(const char *a, const char *b)
{
	return (a == NULL && b == NULL) ||
	    (a != NULL && b != NULL && strcmp(a, b) == 0);
}

/*
 * Keys that only a restart applies: a reload that changes one is refused
 * as a whole (one line each in <errs>), rather than half applied.
 */
static int
reload_restart_keys(const struct cfg *cur, const struct cfg *next, FILE *errs)
{
	size_t	i;
	int	n = 0, listen_same;

	listen_same = cur->c_nlisten_proxy == next->c_nlisten_proxy;
	for (i = 0; listen_same && i < cur->c_nlisten_proxy; i++)
		listen_same = same_str(cur->c_listen_proxy[i],
		    next->c_listen_proxy[i]);
#define CHANGED(cond, key) do {						\
	if (cond) {							\
		fprintf(errs, "%s: %s changed: restart airlockd to apply "	\
		    "it (the running configuration stays)\n", next->c_file,	\
		    key);						\
		n++;							\
	}								\
} while (0)
	CHANGED(!listen_same, "listen.proxy");
	CHANGED(!same_str(cur->c_listen_admin, next->c_listen_admin),
	    "listen.admin");
	CHANGED(cur->c_workers != next->c_workers, "workers");
	CHANGED(!same_str(cur->c_state_dir, next->c_state_dir), "state_dir");
	CHANGED(!same_str(cur->c_audit_file, next->c_audit_file),
	    "audit.file");
	CHANGED(cur->c_audit_hash_chain != next->c_audit_hash_chain,
	    "audit.hash_chain");
	CHANGED(!same_str(cur->c_budget_store, next->c_budget_store),
	    "budget_store");
	CHANGED(!same_str(cur->c_listen_transparent,
	    next->c_listen_transparent), "listen.transparent");
	CHANGED(!same_str(cur->c_listen_socks5, next->c_listen_socks5),
	    "listen.socks5");
	CHANGED(!same_str(cur->c_listen_dns, next->c_listen_dns),
	    "listen.dns");
	CHANGED(memcmp(&cur->c_dns_pool, &next->c_dns_pool,
	    sizeof(cur->c_dns_pool)) != 0, "launcher.dns_pool");
	CHANGED(cur->c_launcher_backend != next->c_launcher_backend,
	    "launcher.backend");
	CHANGED(memcmp(&cur->c_launcher_network, &next->c_launcher_network,
	    sizeof(cur->c_launcher_network)) != 0, "launcher.network");
	CHANGED(!same_str(cur->c_launcher_rootfs, next->c_launcher_rootfs) ||
	    !same_str(cur->c_launcher_ifprefix, next->c_launcher_ifprefix) ||
	    cur->c_launcher_uid != next->c_launcher_uid ||
	    cur->c_launcher_gid != next->c_launcher_gid ||
	    cur->c_gateway_uid != next->c_gateway_uid ||
	    cur->c_launcher_memory != next->c_launcher_memory ||
	    cur->c_launcher_pids != next->c_launcher_pids,
	    "launcher (rootfs, user, gateway_user, limits, "
	    "interface_prefix)");
	CHANGED(!same_str(cur->c_qemu_kernel, next->c_qemu_kernel) ||
	    !same_str(cur->c_qemu_initrd, next->c_qemu_initrd) ||
	    !same_str(cur->c_qemu_binary, next->c_qemu_binary) ||
	    cur->c_qemu_memory != next->c_qemu_memory ||
	    cur->c_qemu_vcpus != next->c_qemu_vcpus ||
	    cur->c_qemu_accel != next->c_qemu_accel ||
	    cur->c_qemu_boot_ms != next->c_qemu_boot_ms,
	    "launcher.qemu (kernel, initrd, binary, memory, vcpus, accel, "
	    "boot_timeout)");
#undef CHANGED
	return n;
}

/*
 * Build the new config and swap it in; connections in flight keep theirs.
 * On failure the running config stays and *errs (caller frees) holds the
 * problems, one per line; they are logged too.
 */
static int
reload(char **errs)
{
	struct cfg	*next;
	FILE		*f;
	char		*buf = NULL, *line, *save = NULL;
	size_t		 len = 0;

	if ((f = open_memstream(&buf, &len)) == NULL)
		fatal("open_memstream");
	next = load_config(cfg_path, f);
	if (next != NULL && reload_restart_keys(current_cfg, next, f) > 0) {
		cfg_unref(next);
		next = NULL;
	}
	fclose(f);
	if (next == NULL) {
		if (len == 0) {
			free(buf);
			buf = xstrdup("reload failed (see the log)\n");
		}
		*errs = xstrdup(buf);
		for (line = strtok_r(buf, "\n", &save); line != NULL;
		    line = strtok_r(NULL, "\n", &save))
			log_warnx("%s", line);
		free(buf);
		log_warnx("reload failed; the running configuration stays");
		met_reload(0);
		admin_count_reload(0);
		return -1;
	}
	free(buf);
	*errs = NULL;
	if (launcher != NULL &&
	    next->c_launcher_snap_max != current_cfg->c_launcher_snap_max) {
		char	msg[512];

		/* applied now: a lower bound prunes (the launcher logs
		   what stays over) */
		if (launcher_snap_limit(launcher, next->c_launcher_snap_max,
		    msg, sizeof(msg)) == -1)
			log_warnx("launcher.snapshots.max_bytes: %s", msg);
		else
			log_info("launcher.snapshots.max_bytes: %s", msg);
	}
	sbx_sync_config(next);
	workers_reload(next);
	admin_reload(next);
	cfg_unref(current_cfg);
	current_cfg = next;
	met_reload(1);
	admin_count_reload(1);
	log_info("reload done");
	return 0;
}

static const struct cfg *
running_cfg(void)
{
	return current_cfg;
}

static void
on_hup(evutil_socket_t sig, short what, void *arg)
{
	char	*errs = NULL;

	log_info("SIGHUP: reloading %s", cfg_path);
	reload(&errs);
	free(errs);
}

int
main(int argc, char *argv[])
{
	static const struct option longopts[] = {
		{ "version", no_argument, NULL, 'V' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct event_base	*base;
	struct event		*ev_term, *ev_int, *ev_usr1, *ev_hup;
	struct admin_hooks	 hooks;
	struct dns_stub_hooks	 dns_hooks;
	struct dns_stub		*dns_stub = NULL;
	int			 ch, check = 0, verbose = 0, nerr = 0;

	while ((ch = getopt_long(argc, argv, "c:tvh", longopts, NULL)) != -1) {
		switch (ch) {
		case 'c':
			cfg_path = optarg;
			break;
		case 't':
			check = 1;
			break;
		case 'v':
			verbose = 1;
			break;
		case 'V':
			printf("airlockd %s\n", PACKAGE_VERSION);
			return 0;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (cfg_path == NULL || optind != argc) {
		usage(stderr);
		return 2;
	}
	log_init(verbose);

	if (check) {
		struct cfg *cfg = cfg_load(cfg_path, stderr, &nerr);

		if (cfg == NULL) {
			fprintf(stderr, "%s: %d problem%s\n", cfg_path, nerr,
			    nerr == 1 ? "" : "s");
			return 1;
		}
		/* secret sources must resolve too (values never printed);
		 * no token is minted by a check */
		sec_store_no_mint();
		if (cfg->c_nsecrets > 0 &&
		    (cfg->c_store = sec_store_new(cfg, stderr)) == NULL) {
			cfg_unref(cfg);
			return 1;
		}
		cfg_unref(cfg);
		printf("%s: configuration OK\n", cfg_path);
		return 0;
	}

	signal(SIGPIPE, SIG_IGN);
	/* secrets live in this process: no core dumps, no ptrace peers */
	sec_harden_process();
	if (evthread_use_pthreads() != 0)
		fatalx("evthread_use_pthreads failed");
	tls_global_init();
	/* read once: a pipe or /dev/stdin has nothing left for a second
	   read (which ran with all defaults) */
	if ((current_cfg = cfg_load(cfg_path, stderr, &nerr)) == NULL)
		return 1;
	/* before any sandbox CA is made (prepare_config) */
	if (current_cfg->c_tls_fleet_ca_key != NULL &&
	    ca_fleet_set_key(current_cfg->c_tls_fleet_ca_key) == -1)
		fatalx("tls.fleet_ca_key: cannot read");
	if (start_launcher(current_cfg) == -1 ||
	    prepare_config(current_cfg, stderr) == -1) {
		launcher_close(launcher);
		cfg_unref(current_cfg);
		return 1;
	}
	/* names behind the DNS stub's addresses, for the transparent path */
	if ((current_cfg->c_listen_transparent != NULL ||
	    current_cfg->c_listen_dns != NULL) &&
	    (worker_dns_synth = dns_synth_new(&current_cfg->c_dns_pool,
	    DNS_SYNTH_MAX_NAMES, DNS_SYNTH_MIN_IDLE_MS)) == NULL)
		fatalx("dns_synth_new");
	pool_set_launcher(launcher);
	sbx_set_destroy_hook(destroy_namespaces);
	if (sbx_init(current_cfg->c_state_dir) == -1)
		fatalx("sandbox state: cannot read");
	sbx_sync_config(current_cfg);
	conn_ident_warn(current_cfg);
	if (aud_start(current_cfg) == -1)
		fatalx("audit: cannot start");
	if (current_cfg->c_bs_redis) {
		if (bud_redis_open(current_cfg) == -1)
			fatalx("budget store: cannot start");
	} else if (bud_open(current_cfg->c_state_dir) == -1)
		fatalx("budget ledger: cannot open");
	sbx_fleet_set_revoke_hook(workers_revoke);
	if (sbx_fleet_start(current_cfg) == -1)
		fatalx("fleet registry: cannot start");
	if (ask_open(current_cfg->c_state_dir) == -1)
		fatalx("approvals: cannot read the runtime rules");

	if ((base = event_base_new()) == NULL)
		fatalx("event_base_new failed");
	ev_term = evsignal_new(base, SIGTERM, on_stop, base);
	ev_int = evsignal_new(base, SIGINT, on_stop, base);
	ev_usr1 = evsignal_new(base, SIGUSR1, on_usr1, NULL);
	ev_hup = evsignal_new(base, SIGHUP, on_hup, NULL);
	evsignal_add(ev_term, NULL);
	evsignal_add(ev_int, NULL);
	evsignal_add(ev_usr1, NULL);
	evsignal_add(ev_hup, NULL);
	hooks.ah_reload = reload;
	hooks.ah_cfg = running_cfg;
	if (current_cfg->c_listen_dns != NULL) {
		dns_hooks.dh_cfg = running_cfg;
		dns_hooks.dh_cfg_done = NULL;
		dns_hooks.dh_synth = worker_dns_synth;
		if ((dns_stub = dns_stub_new(base, current_cfg->c_listen_dns,
		    &dns_hooks)) == NULL)
			fatalx("DNS stub: cannot listen on %s",
			    current_cfg->c_listen_dns);
		log_info("DNS stub listening on %s",
		    current_cfg->c_listen_dns);
	}
	/* the admin socket exists before the proxy accepts anything */
	if (admin_start(base, current_cfg, &hooks) == -1)
		fatalx("admin API: cannot listen on %s",
		    current_cfg->c_listen_admin);
	workers_start(current_cfg);
	if (launcher != NULL)
		drop_root(current_cfg);
	if (pool_start(base, running_cfg) == -1)
		fatalx("scheduler: cannot start");
	log_info("airlockd %s ready (config %s)", PACKAGE_VERSION, cfg_path);

	event_base_dispatch(base);

	admin_stop();
	dns_stub_free(dns_stub);
	pool_stop();
	workers_join();
	/* every sandbox's namespaces and the host setup go with it */
	launcher_close(launcher);
	launcher = NULL;
	dns_synth_free(worker_dns_synth);
	worker_dns_synth = NULL;
	bud_close();
	sbx_fleet_stop();
	bud_redis_close();
	ca_fleet_clear();
	ask_close();
	aud_stop();
	event_free(ev_term);
	event_free(ev_int);
	event_free(ev_usr1);
	event_free(ev_hup);
	event_base_free(base);
	cfg_unref(current_cfg);
	sbx_shutdown();
	ca_registry_free();
	log_info("stopped");
	return 0;
}
