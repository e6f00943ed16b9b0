/* Logging to stderr: log_warn() appends strerror(errno), log_warnx() does
 * not, log_tls() drains the OpenSSL error queue, fatal() exits. */
#ifndef AIRLOCK_LOG_H
#define AIRLOCK_LOG_H

#include <stdarg.h>

#define LOG_PRINTF(a, b) __attribute__((format(printf, a, b)))

void	log_init(int verbose);
void	log_info(const char *, ...) LOG_PRINTF(1, 2);
void	log_debug(const char *, ...) LOG_PRINTF(1, 2);
void	log_warn(const char *, ...) LOG_PRINTF(1, 2);
void	log_warnx(const char *, ...) LOG_PRINTF(1, 2);
void	log_tls(const char *, ...) LOG_PRINTF(1, 2);
void	fatal(const char *, ...) LOG_PRINTF(1, 2) __attribute__((noreturn));
void	fatalx(const char *, ...) LOG_PRINTF(1, 2) __attribute__((noreturn));

#endif
