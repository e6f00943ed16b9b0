/*
 * airlockctl: the admin CLI. airlockctl.c parses the command line and
 * finds the gateway, ctl_http.c talks HTTP/1.1 to the admin API (one
 * request per connection), ctl_cmds.c, ctl_sandbox.c, ctl_run.c and the
 * other ctl_*.c run the commands and print.
 */
#ifndef AIRLOCK_CTL_H
#define AIRLOCK_CTL_H

#include <stddef.h>

struct json_object;

/* Exit codes scripts rely on (SPEC "Details tests rely on"). */
enum ctl_exit {
	CTL_OK = 0,		/* done */
	CTL_FAIL = 1,		/* the gateway refused or failed */
	CTL_USAGE = 2,		/* bad command line; gateway not found */
	CTL_UNREACHABLE = 3,	/* no connection, or no answer in time */
};

#define CTL_TIMEOUT_MS		10000	/* connect; silence of the gateway */
#define CTL_LONG_TIMEOUT_MS	60000	/* reload may run exec: sources */
/* a cold claim of a VM waits for its boot: launcher.qemu.boot_timeout is
   at most 10 minutes */
#define CTL_CLAIM_TIMEOUT_MS	620000
#define CTL_MAX_BODY		(16 * 1024 * 1024)
#define CTL_MAX_TOKEN		4096

/* Where the gateway is and how to authenticate (airlockctl.c). */
struct ctl {
	char		*c_addr;	/* "unix:PATH" or "HOST:PORT" */
	const char	*c_addr_from;	/* "-a", "AIRLOCK_ADMIN", config */
	char		*c_token_src;	/* file:/abs, env:N, literal:V or
					   exec:CMD; NULL: none found */
	const char	*c_token_from;	/* where c_token_src came from */
	char		*c_token_err;	/* why there is none (usage) */
	int		 c_json;	/* --json: JSON on stdout */
};

/* One answer of the admin API. */
struct ctl_resp {
	int			 r_status;	/* HTTP status */
	char			*r_body;	/* NUL-terminated */
	size_t			 r_len;
	struct json_object	*r_json;	/* parsed body or NULL */
};

/* Positional words and options after the command words. */
struct ctl_args {
	const char	*a_policy;	/* --policy */
	const char	*a_id;		/* --id */
	const char	*a_prev;	/* --prev */
	const char	*a_by;		/* --by (usage) */
	const char	*a_config;	/* -c/--config (policy replay) */
	const char	*a_name;	/* --name (snapshot create) */
	const char	*a_from;	/* --from SNAPSHOT (run) */
	const char	*a_scope;	/* --scope (approve) */
	const char	*a_ttl;		/* --ttl (approve) */
	const char	*a_match;	/* --match (approve) */
	char		**a_pos;	/* positional words (argv's) */
	int		  a_npos;
	char		**a_tail;	/* after "--" (run) */
	int		  a_ntail;
	int		  a_dashdash;	/* "--" was seen */
};

/*
 * ctl_http.c. Send <method> <path> with <body> (borrowed, may be NULL: no
 * body) to the gateway, authenticated with ctl's token, and wait at most
 * <timeout_ms> of silence. On CTL_OK <r> holds the answer whatever its
 * status (caller calls ctl_resp_fini()). Otherwise the problem is printed
 * and the exit code returned: CTL_UNREACHABLE (connect, timeout, closed
 * unanswered), CTL_FAIL (token unreadable, not HTTP, cut short),
 * CTL_USAGE (no token source at all).
 */
int	ctl_request(const struct ctl *, const char *method, const char *path,
	    struct json_object *body, int timeout_ms, struct ctl_resp *r);
void	ctl_resp_fini(struct ctl_resp *);

/*
 * Read the admin token named by <src> (a source, see struct ctl) into <buf>
 * (<bufsz> bytes, NUL-terminated). Returns its length, or -1 with the
 * reason in <why>, never the value. The caller cleanses <buf> either way.
 */
int	ctl_token_read(const char *src, char *buf, size_t bufsz, char *why,
	    size_t whysz);

/*
 * ctl_vm.c: run argv with exactly envp in a VM through its guest agent's
 * socket, stdio relayed, terminal signals forwarded. The workload's exit
 * status (128+N for signal N), or CTL_FAIL when the agent is unreachable.
 */
int	ctl_vm_exec(const char *sock, char *const argv[], char *const envp[]);

/* "%XX"-escape <s> for one path segment. Caller frees. */
char	*ctl_path_escape(const char *s);

/* Each command returns an enum ctl_exit (run: its command's status). */
/* ctl_cmds.c */
int	ctl_cmd_status(struct ctl *, struct ctl_args *);
int	ctl_cmd_reload(struct ctl *, struct ctl_args *);
int	ctl_cmd_audit_verify(struct ctl *, struct ctl_args *);
/* ctl_sandbox.c */
int	ctl_cmd_sandbox_create(struct ctl *, struct ctl_args *);
int	ctl_cmd_sandbox_list(struct ctl *, struct ctl_args *);
int	ctl_cmd_sandbox_show(struct ctl *, struct ctl_args *);
int	ctl_cmd_sandbox_delete(struct ctl *, struct ctl_args *);
int	ctl_cmd_sandbox_ca(struct ctl *, struct ctl_args *);
int	ctl_cmd_sandbox_probe(struct ctl *, struct ctl_args *);
int	ctl_cmd_usage(struct ctl *, struct ctl_args *);
int	ctl_cmd_usage_reset(struct ctl *, struct ctl_args *);
/* ctl_run.c */
int	ctl_cmd_run(struct ctl *, struct ctl_args *);
/* ctl_usage.c: usage ID --by model|day, a table (or the JSON). */
int	ctl_usage_by(struct ctl *, const char *id, const char *by);

/* ctl_cmds.c, for the command files. */
/* ctl_request() that reports a non-2xx answer (CTL_FAIL). */
int	ctl_call(const struct ctl *, const char *method, const char *path,
	    struct json_object *body, int timeout_ms, struct ctl_resp *r);
/* --json: the body as JSON when it is, else as it came. */
void	ctl_print_body(const struct ctl_resp *);
void	ctl_print_json(struct json_object *);
/* A string member of <o> (may be NULL), or NULL. */
const char *ctl_jstr(struct json_object *o, const char *key);
/* Printable copy (no control bytes); caller frees. */
char	*ctl_clean(const char *s);
/* The text of a value for a table cell; caller frees. */
char	*ctl_val_text(struct json_object *v);
/* A 2xx answer that should be a JSON object: 0, else -1 reported. */
int	ctl_need_object(const struct ctl *, struct ctl_resp *r);
/* Key/value lines of an object answer, but <skip> (NULL-terminated). */
void	ctl_print_kv(struct json_object *o, const char *const *skip);
/* GET <path>, then key/value lines (or the JSON). */
int	ctl_get_and_print(struct ctl *, const char *path);
/* "/v1/sandboxes/<escaped id><rest>"; caller frees. */
char	*ctl_sandbox_path(const char *id, const char *rest);
/* ctl_call() on ctl_sandbox_path(id, rest), no body. */
int	ctl_sandbox_call(const struct ctl *, const char *method, const char *id,
	    const char *rest, int timeout_ms, struct ctl_resp *r);
/* ctl_snap.c: snapshot create | list | show | delete */
int	ctl_cmd_snap_create(struct ctl *, struct ctl_args *);
int	ctl_cmd_snap_list(struct ctl *, struct ctl_args *);
/* ctl_ask.c: approval holds and runtime rules */
int	ctl_cmd_pending(struct ctl *, struct ctl_args *);
int	ctl_cmd_approve(struct ctl *, struct ctl_args *);
int	ctl_cmd_deny(struct ctl *, struct ctl_args *);
int	ctl_cmd_rules(struct ctl *, struct ctl_args *);
int	ctl_cmd_rules_revoke(struct ctl *, struct ctl_args *);
int	ctl_cmd_snap_show(struct ctl *, struct ctl_args *);
int	ctl_cmd_snap_delete(struct ctl *, struct ctl_args *);
int	ctl_cmd_snap_rollback(struct ctl *, struct ctl_args *);

/* Print "airlockctl: MESSAGE\n" to stderr. */
void	ctl_err(const char *, ...) __attribute__((format(printf, 1, 2)));

#endif
