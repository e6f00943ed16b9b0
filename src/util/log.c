#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/err.h>

#include "util/log.h"

static int	log_verbose;

void
log_init(int verbose)
{
	log_verbose = verbose;
}

static void
log_vwrite(const char *level, const char *extra, const char *fmt, va_list ap)
{
	char		 line[1024], stamp[32];
	struct timespec	 ts;
	struct tm	 tm;
	int		 n;

	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%S", &tm);
	n = vsnprintf(line, sizeof(line), fmt, ap);
	if (n < 0)
		line[0] = '\0';
	/* one fprintf per line so threads do not interleave */
	fprintf(stderr, "%s.%03ldZ airlockd %s: %s%s%s\n", stamp,
	    ts.tv_nsec / 1000000, level, line, extra ? ": " : "",
	    extra ? extra : "");
}

void
log_info(const char *fmt, ...)
{
	va_list	ap;

	va_start(ap, fmt);
	log_vwrite("info", NULL, fmt, ap);
	va_end(ap);
}

void
log_debug(const char *fmt, ...)
{
	va_list	ap;

	if (!log_verbose)
		return;
	va_start(ap, fmt);
	log_vwrite("debug", NULL, fmt, ap);
	va_end(ap);
}

void
log_warn(const char *fmt, ...)
{
	va_list	ap;
	char	buf[128];
	int	saved = errno;

	va_start(ap, fmt);
	log_vwrite("warning", strerror_r(saved, buf, sizeof(buf)), fmt, ap);
	va_end(ap);
	errno = saved;
}

void
log_warnx(const char *fmt, ...)
{
	va_list	ap;

	va_start(ap, fmt);
	log_vwrite("warning", NULL, fmt, ap);
	va_end(ap);
}

void
log_tls(const char *fmt, ...)
{
	va_list		 ap;
	char		 buf[256];
	unsigned long	 e;

	e = ERR_get_error();
	if (e != 0)
		ERR_error_string_n(e, buf, sizeof(buf));
	else
		strcpy(buf, "no TLS error queued");
	ERR_clear_error();
	va_start(ap, fmt);
	log_vwrite("warning", buf, fmt, ap);
	va_end(ap);
}

void
fatal(const char *fmt, ...)
{
	va_list	ap;
	char	buf[128];
	int	saved = errno;

	va_start(ap, fmt);
	log_vwrite("fatal", strerror_r(saved, buf, sizeof(buf)), fmt, ap);
	va_end(ap);
	exit(1);
}

void
fatalx(const char *fmt, ...)
{
	va_list	ap;

	va_start(ap, fmt);
	log_vwrite("fatal", NULL, fmt, ap);
	va_end(ap);
	exit(1);
}
