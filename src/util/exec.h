/* Running a configured command for its output (exec: sources). */
#ifndef AIRLOCK_EXEC_H
#define AIRLOCK_EXEC_H

#include <stddef.h>
#include <stdint.h>

/*
 * Run "/bin/sh -c <cmd>" in its own process group, signals at their
 * defaults, stdin and stderr on /dev/null (stderr could echo a secret),
 * and read its stdout into <buf>: filling all <bufsz> bytes means it
 * printed too much. It must exit with status 0 within <timeout_ms>;
 * <stopfd> (or -1) becoming readable aborts it and sets *stopped (may be
 * NULL). Returns 0 with *len set, or -1 with the reason in <why> ("exited
 * with status 3", "timed out after 10s", ...), never the output.
 */
int	util_exec(const char *cmd, char *buf, size_t bufsz, size_t *len,
	    uint64_t timeout_ms, int stopfd, int *stopped, char *why,
	    size_t whysz);

#endif
