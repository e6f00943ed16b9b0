/*
 * The DNS stub alone, for tests/integration/290-dns-stub.sh: loads an
 * airlock config, fills the sandbox registry from its static sandboxes
 * (their "addresses" identify queries), starts the audit writer and the
 * stub on listen.dns (or -l), and serves until SIGTERM or SIGINT. The
 * bound port goes to -P FILE; at exit the stub's counters go to stdout as
 * one JSON object. -l and -p stand in for listen.dns and
 * launcher.dns_pool (which the config refuses until gateway mode is on).
 *
 * usage: dnsstubtest -c CONFIG [-l IP:PORT] [-p CIDR] [-P PORTFILE]
 *            [-n MAXNAMES] [-i MIN_IDLE_MS] [-v]
 */
#include "config.h"

#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>
#include <event2/thread.h>

#include "audit/aud.h"
#include "cfg/cfg.h"
#include "dns/dns_stub.h"
#include "dns/dns_synth.h"
#include "dns/net_guard.h"
#include "sbx/sbx.h"
#include "util/log.h"

static struct cfg	*cfg;

static const struct cfg *
running_cfg(void)
{
	return cfg;
}

static void
on_stop(evutil_socket_t sig, short what, void *arg)
{
	event_base_loopexit(arg, NULL);
}

static void
usage(void)
{
	fprintf(stderr, "usage: dnsstubtest -c CONFIG [-l IP:PORT] [-p CIDR] "
	    "[-P PORTFILE] [-n MAXNAMES] [-i MIN_IDLE_MS] [-v]\n");
	exit(2);
}

int
main(int argc, char *argv[])
{
	struct event_base	*base;
	struct event		*ev_term, *ev_int;
	struct dns_synth	*synth;
	struct dns_stub		*stub;
	struct dns_stub_hooks	 hooks;
	struct dns_stub_stats	 ss;
	const char		*path = NULL, *listen = NULL, *portfile = NULL;
	const char		*pool = NULL;
	struct net_cidr		 nc;
	char			 tmp[4096];
	unsigned long long	 maxnames = 0, idle = DNS_SYNTH_MIN_IDLE_MS;
	FILE			*f;
	int			 ch, verbose = 0, nerr = 0;

	while ((ch = getopt(argc, argv, "c:l:p:P:n:i:v")) != -1) {
		switch (ch) {
		case 'c':
			path = optarg;
			break;
		case 'l':
			listen = optarg;
			break;
		case 'p':
			pool = optarg;
			break;
		case 'P':
			portfile = optarg;
			break;
		case 'n':
			maxnames = strtoull(optarg, NULL, 10);
			break;
		case 'i':
			idle = strtoull(optarg, NULL, 10);
			break;
		case 'v':
			verbose++;
			break;
		default:
			usage();
		}
	}
	if (path == NULL || optind != argc)
		usage();
	log_init(verbose);
	signal(SIGPIPE, SIG_IGN);
	if (evthread_use_pthreads() != 0)
		fatalx("evthread_use_pthreads failed");
	if ((cfg = cfg_load(path, stderr, &nerr)) == NULL) {
		fprintf(stderr, "%s: %d problems\n", path, nerr);
		return 1;
	}
	if (listen == NULL && (listen = cfg->c_listen_dns) == NULL)
		fatalx("no listen.dns in %s and no -l", path);
	sbx_sync_config(cfg);
	if (aud_start(cfg) == -1)
		fatalx("audit: cannot start");
	nc = cfg->c_dns_pool;
	if (pool != NULL && net_cidr_parse(pool, &nc) == -1)
		fatalx("bad pool %s", pool);
	if ((synth = dns_synth_new(&nc, (size_t)maxnames, idle)) == NULL)
		fatalx("dns_pool is not IPv4");

	if ((base = event_base_new()) == NULL)
		fatalx("event_base_new");
	ev_term = evsignal_new(base, SIGTERM, on_stop, base);
	ev_int = evsignal_new(base, SIGINT, on_stop, base);
	evsignal_add(ev_term, NULL);
	evsignal_add(ev_int, NULL);

	memset(&hooks, 0, sizeof(hooks));
	hooks.dh_cfg = running_cfg;
	hooks.dh_synth = synth;
	if ((stub = dns_stub_new(base, listen, &hooks)) == NULL)
		fatalx("dns stub: cannot start on %s", listen);
	if (portfile != NULL) {
		snprintf(tmp, sizeof(tmp), "%s.tmp", portfile);
		if ((f = fopen(tmp, "w")) == NULL)
			fatal("%s", tmp);
		fprintf(f, "%d\n", dns_stub_port(stub));
		if (fclose(f) != 0 || rename(tmp, portfile) == -1)
			fatal("%s", portfile);
	}

	event_base_dispatch(base);

	/* the last summaries first, so that "records" counts them */
	dns_stub_flush(stub);
	dns_stub_stats(stub, &ss);
	dns_stub_free(stub);
	printf("{\"queries\": %" PRIu64 ", \"answered\": %" PRIu64
	    ", \"rate_refused\": %" PRIu64 ", \"unknown_dropped\": %" PRIu64
	    ", \"records\": %" PRIu64 ", \"names\": %zu, \"evictions\": %"
	    PRIu64 "}\n", ss.ss_queries, ss.ss_answered, ss.ss_rate_refused,
	    ss.ss_unknown_dropped, ss.ss_records, dns_synth_count(synth),
	    dns_synth_evictions(synth));
	fflush(stdout);
	dns_synth_free(synth);
	aud_stop();
	event_free(ev_term);
	event_free(ev_int);
	event_base_free(base);
	sbx_shutdown();
	cfg_unref(cfg);
	return 0;
}
