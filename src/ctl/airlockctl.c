/*
 * airlockctl: command line, finding the gateway and its token, dispatch.
 *
 * The gateway: -a ADDR, else $AIRLOCK_ADMIN, else listen.admin of -c
 * CONFIG, else of conf/airlock.yaml. The token: -k FILE, else
 * $AIRLOCK_ADMIN_TOKEN_FILE, else admin.token of that config. Only those
 * keys (and state_dir, for their defaults) are read from the config, with
 * libyaml: cfg_load() would resolve every secret source, which the CLI's
 * user need not be able to read. Defaults are computed as the daemon does.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <yaml.h>

#include "cfg/cfg_internal.h"
#include "ctl/ctl.h"
#include "ctl/ctl_policy.h"
#include "util/util.h"

#define CTL_DEFAULT_CONFIG	"conf/airlock.yaml"

/* Options a command accepts besides the global ones. */
#define CTL_O_POLICY	0x01
#define CTL_O_ID	0x02
#define CTL_O_PREV	0x04
#define CTL_O_TAIL	0x08	/* "-- CMD [ARGS...]" */
#define CTL_O_SANDBOX	0x10	/* --sandbox ID (into a_id) */
#define CTL_O_BY	0x20	/* --by model|day */
#define CTL_O_NAME	0x40	/* --name NAME */
#define CTL_O_FROM	0x80	/* --from SNAPSHOT */
#define CTL_O_SCOPE	0x100	/* --scope once|sandbox|policy, --ttl DUR */

struct ctl_command {
	const char	*cm_word1;
	const char	*cm_word2;	/* NULL: one word */
	int		(*cm_fn)(struct ctl *, struct ctl_args *);
	int		 cm_opts;
	int		 cm_min;	/* positional words */
	int		 cm_max;	/* -1: any number */
	int		 cm_local;	/* needs no gateway */
	const char	*cm_synopsis;
};

static const struct ctl_command ctl_commands[] = {
	{ "status", NULL, ctl_cmd_status, 0, 0, 0, 0, "status" },
	{ "sandbox", "create", ctl_cmd_sandbox_create,
	    CTL_O_POLICY | CTL_O_ID, 0, 0, 0,
	    "sandbox create [--policy P] [--id ID]" },
	{ "sandbox", "list", ctl_cmd_sandbox_list, 0, 0, 0, 0,
	    "sandbox list" },
	{ "sandbox", "show", ctl_cmd_sandbox_show, 0, 1, 1, 0,
	    "sandbox show ID" },
	{ "sandbox", "delete", ctl_cmd_sandbox_delete, 0, 1, 1, 0,
	    "sandbox delete ID" },
	{ "sandbox", "ca", ctl_cmd_sandbox_ca, 0, 1, 1, 0, "sandbox ca ID" },
	{ "sandbox", "probe", ctl_cmd_sandbox_probe, 0, 1, 1, 0,
	    "sandbox probe ID" },
	{ "usage", "reset", ctl_cmd_usage_reset, 0, 1, 1, 0,
	    "usage reset ID" },
	{ "usage", NULL, ctl_cmd_usage, CTL_O_BY, 1, 1, 0,
	    "usage ID [--by model|day]" },
	{ "run", NULL, ctl_cmd_run, CTL_O_POLICY | CTL_O_SANDBOX | CTL_O_TAIL |
	    CTL_O_FROM, 0, 0, 0,
	    "run [--policy P | --sandbox ID] [--from SNAPSHOT] -- CMD [ARGS...]" },
	{ "snapshot", "create", ctl_cmd_snap_create, CTL_O_NAME, 1, 1, 0,
	    "snapshot create SANDBOX --name NAME" },
	{ "snapshot", "list", ctl_cmd_snap_list, 0, 0, 0, 0, "snapshot list" },
	{ "snapshot", "show", ctl_cmd_snap_show, 0, 1, 1, 0,
	    "snapshot show NAME" },
	{ "snapshot", "delete", ctl_cmd_snap_delete, 0, 1, 1, 0,
	    "snapshot delete NAME" },
	{ "snapshot", "rollback", ctl_cmd_snap_rollback, 0, 2, 2, 0,
	    "snapshot rollback SANDBOX NAME" },
	{ "reload", NULL, ctl_cmd_reload, 0, 0, 0, 0, "reload" },
	{ "pending", NULL, ctl_cmd_pending, 0, 0, 0, 0, "pending" },
	{ "approve", NULL, ctl_cmd_approve, CTL_O_SCOPE, 1, 1, 0,
	    "approve ID [--scope once|sandbox|policy] [--ttl DURATION] "
	    "[--match host|request]" },
	{ "deny", NULL, ctl_cmd_deny, 0, 1, 1, 0, "deny ID" },
	{ "rules", "revoke", ctl_cmd_rules_revoke, 0, 1, 1, 0,
	    "rules revoke RULE" },
	{ "rules", NULL, ctl_cmd_rules, 0, 0, 0, 0, "rules" },
	{ "audit", "verify", ctl_cmd_audit_verify, CTL_O_PREV, 1, -1, 1,
	    "audit verify [--prev HEX] FILE..." },
	{ "policy", "replay", ctl_cmd_policy_replay, 0, 1, -1, 1,
	    "policy replay --config NEW.yaml AUDIT.jsonl..." },
	{ "policy", "suggest", ctl_cmd_policy_suggest,
	    CTL_O_POLICY | CTL_O_SANDBOX, 1, -1, 1,
	    "policy suggest [--sandbox ID] [--policy NAME] AUDIT.jsonl..." },
	{ NULL, NULL, NULL, 0, 0, 0, 0, NULL },
};

/* Global options, wherever they appear. */
static const char	*opt_addr;
static const char	*opt_config;
static const char	*opt_token_file;
static int		 opt_json;

static void
usage(FILE *f)
{
	fprintf(f,
"usage: airlockctl [-a ADDR] [-k TOKEN_FILE] [-c CONFIG] [--json] COMMAND\n"
"\n"
"commands:\n"
"  status                                 gateway health and counters\n"
"  sandbox create [--policy P] [--id ID]  create a sandbox; prints JSON:\n"
"                                         id, token, proxy_url, ca_cert\n"
"  sandbox list                           all sandboxes, static and dynamic\n"
"  sandbox show ID                        one sandbox, with its token\n"
"  sandbox delete ID                      delete it (token and CA stop"
" working)\n"
"  sandbox ca ID                          its CA certificate (PEM)\n"
"  sandbox probe ID                       containment checks inside it\n"
"                                         (escape canary; exit 1 on a failure)\n"
"  snapshot create SANDBOX --name NAME    freeze it, keep its writable\n"
"                                         layer (netns with rootfs: DIR)\n"
"  snapshot list | show NAME | delete NAME\n"
"  snapshot rollback SANDBOX NAME         restart it on that snapshot\n"
"  usage ID                               counters and spend of a sandbox\n"
"  usage ID --by model|day                its spend and tokens by model or\n"
"                                         UTC day\n"
"  usage reset ID                         zero them\n"
"  run [--policy P] -- CMD [ARGS...]      run CMD with a sandbox from the"
" launcher\n"
"  run --sandbox ID -- CMD [ARGS...]      run CMD in a sandbox claimed"
" before\n"
"                                         (kept; a paused VM is resumed)\n"
"  run --from SNAPSHOT -- CMD [ARGS...]   a sandbox started from a snapshot\n"
"  reload                                 reload the config (as SIGHUP)\n"
"  audit verify [--prev HEX] FILE...      check the audit hash chain"
" (local)\n"
"  pending                                requests held for approval\n"
"  approve ID [--scope once|sandbox|policy] [--ttl DURATION]\n"
"      [--match host|request]\n"
"                                         let a held request go on; a scope\n"
"                                         leaves a runtime rule for HOST:PORT\n"
"                                         (request: and its METHOD and PATH)\n"
"  deny ID                                refuse a held request (403)\n"
"  rules | rules revoke RULE              runtime rules approvals left\n"
"  policy replay --config NEW.yaml AUDIT.jsonl...\n"
"                                         what NEW would have decided on"
" the\n"
"                                         recorded requests (local; exit 1"
" on\n"
"                                         any allow -> deny)\n"
"  policy suggest [--sandbox ID] [--policy NAME] AUDIT.jsonl...\n"
"                                         a policy (YAML) allowing what was"
"\n"
"                                         allowed (local)\n"
"\n"
"options:\n"
"  -a, --admin ADDR        admin API, unix:PATH or HOST:PORT\n"
"                          (default $AIRLOCK_ADMIN, else listen.admin of"
" the config)\n"
"  -k, --token-file FILE   admin token (default $AIRLOCK_ADMIN_TOKEN_FILE,"
"\n"
"                          else admin.token of the config)\n"
"  -c, --config CONFIG     airlockd config to read them from\n"
"                          (default " CTL_DEFAULT_CONFIG ")\n"
"  --json                  print the gateway's JSON answers (for scripts)\n"
"  -h, --help              this help\n"
"  --version               print the version\n"
"\n"
"exit status: 0 done, 1 the gateway refused or failed, 2 usage error,\n"
"3 gateway unreachable\n");
}

static int usage_error(const char *, ...)
    __attribute__((format(printf, 1, 2)));

static int
usage_error(const char *fmt, ...)
{
	va_list	ap;

	fputs("airlockctl: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs("\n", stderr);
	fputs("run \"airlockctl --help\" for the commands and options\n",
	    stderr);
	return CTL_USAGE;
}

/* What airlockctl takes from a config file. */
struct ctl_conf {
	char	*cc_admin;	/* listen.admin, resolved, or default */
	char	*cc_token;	/* admin.token source, resolved or default */
};

static void
conf_err(const char *file, const yaml_mark_t *m, const char *msg,
    const char *key)
{
	fprintf(stderr, "%s:%zu:%zu: %s%s\n", file, m->line + 1,
	    m->column + 1, key != NULL ? key : "", msg);
}

/* The value node of <key> in mapping <map>, or NULL. */
static yaml_node_t *
map_get(yaml_document_t *doc, yaml_node_t *map, const char *key)
{
	yaml_node_pair_t	*pp;
	yaml_node_t		*k;

	if (map == NULL || map->type != YAML_MAPPING_NODE)
		return NULL;
	for (pp = map->data.mapping.pairs.start;
	    pp < map->data.mapping.pairs.top; pp++) {
		k = yaml_document_get_node(doc, pp->key);
		if (k != NULL && k->type == YAML_SCALAR_NODE &&
		    strcmp((const char *)k->data.scalar.value, key) == 0)
			return yaml_document_get_node(doc, pp->value);
	}
	return NULL;
}

/*
 * The text of <key> in <map>: NULL when absent or null (default), "" after
 * printing an error (not a string).
 */
static const char *
map_str(const char *file, yaml_document_t *doc, yaml_node_t *map,
    const char *key, const char *what)
{
	yaml_node_t	*v;
	const char	*s;

	if ((v = map_get(doc, map, key)) == NULL)
		return NULL;
	if (v->type != YAML_SCALAR_NODE) {
		conf_err(file, &v->start_mark, " must be a string", what);
		return "";
	}
	s = (const char *)v->data.scalar.value;
	if (v->data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
	    (*s == '\0' || strcmp(s, "~") == 0 || strcmp(s, "null") == 0 ||
	    strcmp(s, "Null") == 0 || strcmp(s, "NULL") == 0))
		return NULL;
	if (*s == '\0') {
		conf_err(file, &v->start_mark, " is empty", what);
		return "";
	}
	return s;
}

/*
 * Read listen.admin and admin.token of <file>. Returns 0, 1 when the file
 * does not exist, or -1 after printing why.
 */
static int
conf_read(const char *file, struct ctl_conf *cc)
{
	yaml_parser_t	 yp;
	yaml_document_t	 doc;
	yaml_node_t	*root;
	const char	*admin, *token, *state;
	char		*dir, *sdir, *p;
	FILE		*f;
	int		 rc = -1;

	memset(cc, 0, sizeof(*cc));
	if ((f = fopen(file, "r")) == NULL) {
		if (errno == ENOENT)
			return 1;
		ctl_err("cannot read %s: %s", file, strerror(errno));
		return -1;
	}
	if (!yaml_parser_initialize(&yp)) {
		fclose(f);
		ctl_err("cannot initialise the YAML parser");
		return -1;
	}
	yaml_parser_set_input_file(&yp, f);
	if (!yaml_parser_load(&yp, &doc)) {
		fprintf(stderr, "%s:%zu:%zu: YAML syntax error: %s\n", file,
		    yp.problem_mark.line + 1, yp.problem_mark.column + 1,
		    yp.problem != NULL ? yp.problem : "syntax error");
		yaml_parser_delete(&yp);
		fclose(f);
		return -1;
	}
	root = yaml_document_get_root_node(&doc);
	if (root != NULL && root->type != YAML_MAPPING_NODE) {
		conf_err(file, &root->start_mark, "the configuration must be "
		    "a mapping", NULL);
		goto out;
	}
	admin = map_str(file, &doc, map_get(&doc, root, "listen"), "admin",
	    "listen.admin");
	token = map_str(file, &doc, map_get(&doc, root, "admin"), "token",
	    "admin.token");
	state = map_str(file, &doc, root, "state_dir", "state_dir");
	if ((admin != NULL && *admin == '\0') ||
	    (token != NULL && *token == '\0') ||
	    (state != NULL && *state == '\0'))
		goto out;

	dir = cfg_dir_of(file);
	sdir = cfg_path_join(dir, state != NULL ? state : "state");
	if (admin == NULL) {
		p = cfg_path_join(sdir, "admin.sock");
		if (asprintf(&cc->cc_admin, "unix:%s", p) == -1)
			cc->cc_admin = NULL;
		free(p);
	} else if (strncmp(admin, "unix:", 5) == 0 && admin[5] != '\0') {
		p = cfg_path_join(dir, admin + 5);
		if (asprintf(&cc->cc_admin, "unix:%s", p) == -1)
			cc->cc_admin = NULL;
		free(p);
	} else
		cc->cc_admin = xstrdup(admin);
	if (token == NULL) {
		p = cfg_path_join(sdir, "admin.token");
		if (asprintf(&cc->cc_token, "file:%s", p) == -1)
			cc->cc_token = NULL;
		free(p);
	} else if (strncmp(token, "file:", 5) == 0 && token[5] != '\0') {
		p = cfg_path_join(dir, token + 5);
		if (asprintf(&cc->cc_token, "file:%s", p) == -1)
			cc->cc_token = NULL;
		free(p);
	} else
		cc->cc_token = xstrdup(token);
	free(sdir);
	free(dir);
	if (cc->cc_admin == NULL || cc->cc_token == NULL) {
		ctl_err("out of memory");
		goto out;
	}
	rc = 0;
out:
	yaml_document_delete(&doc);
	yaml_parser_delete(&yp);
	fclose(f);
	if (rc == -1) {
		free(cc->cc_admin);
		free(cc->cc_token);
		memset(cc, 0, sizeof(*cc));
	}
	return rc;
}

/* "unix:PATH" or "HOST:PORT" / "[V6]:PORT" with a numeric port. */
static int
addr_ok(const char *a)
{
	const char	*colon, *p;

	if (strncmp(a, "unix:", 5) == 0)
		return a[5] != '\0';
	if (a[0] == '[') {
		if ((colon = strchr(a, ']')) == NULL || colon[1] != ':' ||
		    colon == a + 1)
			return 0;
		colon++;
	} else if ((colon = strrchr(a, ':')) == NULL || colon == a)
		return 0;
	if (colon[1] == '\0')
		return 0;
	for (p = colon + 1; *p != '\0'; p++)
		if (*p < '0' || *p > '9')
			return 0;
	return 1;
}

/*
 * Fill <c> with the gateway's address and token source. Returns CTL_OK or
 * CTL_USAGE after printing why (a missing token source is reported only
 * when a request needs it).
 */
static int
ctl_locate(struct ctl *c)
{
	struct ctl_conf	 cc;
	const char	*env, *file;
	int		 rc, need_conf;
	static char	 from_addr[PATH_MAX + 64], from_token[PATH_MAX + 64];

	memset(&cc, 0, sizeof(cc));
	if (opt_addr != NULL) {
		c->c_addr = xstrdup(opt_addr);
		c->c_addr_from = "-a";
	} else if ((env = getenv("AIRLOCK_ADMIN")) != NULL && *env != '\0') {
		c->c_addr = xstrdup(env);
		c->c_addr_from = "AIRLOCK_ADMIN";
	}
	if (opt_token_file != NULL) {
		if (asprintf(&c->c_token_src, "file:%s", opt_token_file) == -1)
			c->c_token_src = NULL;
		c->c_token_from = "-k";
	} else if ((env = getenv("AIRLOCK_ADMIN_TOKEN_FILE")) != NULL &&
	    *env != '\0') {
		if (asprintf(&c->c_token_src, "file:%s", env) == -1)
			c->c_token_src = NULL;
		c->c_token_from = "AIRLOCK_ADMIN_TOKEN_FILE";
	}

	need_conf = c->c_addr == NULL || c->c_token_src == NULL;
	file = opt_config != NULL ? opt_config : CTL_DEFAULT_CONFIG;
	rc = need_conf ? conf_read(file, &cc) : 1;
	if (rc == -1)
		return CTL_USAGE;
	if (rc == 1 && need_conf && (opt_config != NULL || c->c_addr == NULL)) {
		if (opt_config != NULL)
			ctl_err("cannot read %s: %s", file, strerror(ENOENT));
		else
			ctl_err("cannot find the gateway: no -a ADDR, no "
			    "AIRLOCK_ADMIN, no -c CONFIG and no %s",
			    CTL_DEFAULT_CONFIG);
		return CTL_USAGE;
	}
	if (c->c_addr == NULL) {
		c->c_addr = cc.cc_admin;
		cc.cc_admin = NULL;
		snprintf(from_addr, sizeof(from_addr), "listen.admin of %s",
		    file);
		c->c_addr_from = from_addr;
	}
	if (c->c_token_src == NULL && rc == 0) {
		c->c_token_src = cc.cc_token;
		cc.cc_token = NULL;
		snprintf(from_token, sizeof(from_token), "admin.token of %s",
		    file);
		c->c_token_from = from_token;
	}
	if (c->c_token_src == NULL)
		c->c_token_err = xstrdup("no admin token: give -k TOKEN_FILE, "
		    "set AIRLOCK_ADMIN_TOKEN_FILE, or -c CONFIG");
	free(cc.cc_admin);
	free(cc.cc_token);
	if (!addr_ok(c->c_addr)) {
		ctl_err("bad gateway address \"%s\" (from %s): use unix:PATH "
		    "or HOST:PORT", c->c_addr, c->c_addr_from);
		return CTL_USAGE;
	}
	return CTL_OK;
}

/* The value of an option: "--opt=V", "--opt V" or "-o V". NULL: missing. */
static const char *
opt_value(int argc, char **argv, int *i)
{
	const char	*eq;

	if (argv[*i][1] == '-' && (eq = strchr(argv[*i], '=')) != NULL)
		return eq + 1;
	if (*i + 1 >= argc)
		return NULL;
	return argv[++*i];
}

/* Is argv[i] the option <name> (exactly, or "<name>=...")? */
static int
is_opt(const char *arg, const char *name)
{
	size_t	nl = strlen(name);

	return strncmp(arg, name, nl) == 0 &&
	    (arg[nl] == '\0' || arg[nl] == '=');
}

/*
 * Options and words after the command words; global options are allowed
 * here too. Returns CTL_OK, or CTL_USAGE after printing why.
 */
static int
parse_args(const struct ctl_command *cm, int argc, char **argv,
    struct ctl_args *a)
{
	const char	 *v, *arg;
	const char	**slot;
	int		  i;

	memset(a, 0, sizeof(*a));
	a->a_pos = xcalloc((size_t)argc + 1, sizeof(char *));
	for (i = 0; i < argc; i++) {
		arg = argv[i];
		if (a->a_dashdash || arg[0] != '-' || arg[1] == '\0') {
			a->a_pos[a->a_npos++] = argv[i];
			continue;
		}
		if (strcmp(arg, "--") == 0) {
			if (cm->cm_opts & CTL_O_TAIL) {
				a->a_dashdash = 1;
				a->a_tail = argv + i + 1;
				a->a_ntail = argc - i - 1;
				break;
			}
			a->a_dashdash = 1;
			continue;
		}
		if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
			usage(stdout);
			exit(CTL_OK);
		}
		if (strcmp(arg, "--json") == 0) {
			opt_json = 1;
			continue;
		}
		slot = NULL;
		if ((cm->cm_opts & CTL_O_POLICY) && is_opt(arg, "--policy"))
			slot = &a->a_policy;
		else if ((cm->cm_opts & CTL_O_ID) && is_opt(arg, "--id"))
			slot = &a->a_id;
		else if ((cm->cm_opts & CTL_O_SANDBOX) &&
		    is_opt(arg, "--sandbox"))
			slot = &a->a_id;
		else if ((cm->cm_opts & CTL_O_PREV) && is_opt(arg, "--prev"))
			slot = &a->a_prev;
		else if ((cm->cm_opts & CTL_O_BY) && is_opt(arg, "--by"))
			slot = &a->a_by;
		else if ((cm->cm_opts & CTL_O_NAME) && is_opt(arg, "--name"))
			slot = &a->a_name;
		else if ((cm->cm_opts & CTL_O_FROM) && is_opt(arg, "--from"))
			slot = &a->a_from;
		else if ((cm->cm_opts & CTL_O_SCOPE) && is_opt(arg, "--scope"))
			slot = &a->a_scope;
		else if ((cm->cm_opts & CTL_O_SCOPE) && is_opt(arg, "--ttl"))
			slot = &a->a_ttl;
		else if ((cm->cm_opts & CTL_O_SCOPE) && is_opt(arg, "--match"))
			slot = &a->a_match;
		else if (strcmp(arg, "-a") == 0 || is_opt(arg, "--admin"))
			slot = &opt_addr;
		else if (strcmp(arg, "-k") == 0 || is_opt(arg, "--token-file"))
			slot = &opt_token_file;
		else if (strcmp(arg, "-c") == 0 || is_opt(arg, "--config"))
			slot = &opt_config;
		if (slot == NULL)
			return usage_error("unknown option \"%s\"", arg);
		if ((v = opt_value(argc, argv, &i)) == NULL)
			return usage_error("option \"%s\" needs a value", arg);
		*slot = v;
	}
	if (a->a_scope != NULL && strcmp(a->a_scope, "once") != 0 &&
	    strcmp(a->a_scope, "sandbox") != 0 &&
	    strcmp(a->a_scope, "policy") != 0)
		return usage_error("--scope must be once, sandbox or policy, "
		    "not \"%s\"", a->a_scope);
	if (a->a_match != NULL && strcmp(a->a_match, "host") != 0 &&
	    strcmp(a->a_match, "request") != 0)
		return usage_error("--match must be host or request, not "
		    "\"%s\"", a->a_match);
	if (a->a_by != NULL && strcmp(a->a_by, "model") != 0 &&
	    strcmp(a->a_by, "day") != 0)
		return usage_error("--by must be model or day, not \"%s\"",
		    a->a_by);
	if ((cm->cm_opts & CTL_O_TAIL) && !a->a_dashdash)
		return usage_error("%s: put \"--\" before the command to run",
		    cm->cm_word1);
	if ((cm->cm_opts & CTL_O_TAIL) && a->a_ntail == 0)
		return usage_error("%s: no command to run after \"--\"",
		    cm->cm_word1);
	if (a->a_npos < cm->cm_min || (cm->cm_max >= 0 &&
	    a->a_npos > cm->cm_max)) {
		fprintf(stderr, "usage: airlockctl %s\n", cm->cm_synopsis);
		return CTL_USAGE;
	}
	return CTL_OK;
}

int
main(int argc, char *argv[])
{
	static const struct option longopts[] = {
		{ "admin", required_argument, NULL, 'a' },
		{ "config", required_argument, NULL, 'c' },
		{ "token-file", required_argument, NULL, 'k' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	const struct ctl_command	*cm;
	struct ctl			 c;
	struct ctl_args			 a;
	int				 ch, rc, words;

	opterr = 0;
	while ((ch = getopt_long(argc, argv, "+a:c:k:h", longopts, NULL)) !=
	    -1) {
		switch (ch) {
		case 'a':
			opt_addr = optarg;
			break;
		case 'c':
			opt_config = optarg;
			break;
		case 'k':
			opt_token_file = optarg;
			break;
		case 'j':
			opt_json = 1;
			break;
		case 'h':
			usage(stdout);
			return CTL_OK;
		case 'V':
			printf("airlockctl %s\n", PACKAGE_VERSION);
			return CTL_OK;
		default:
			if (optopt == 'a' || optopt == 'c' || optopt == 'k')
				return usage_error("option \"%s\" needs a "
				    "value", argv[optind - 1]);
			if (optopt != 0) {
				char o[3] = { '-', (char)optopt, '\0' };

				return usage_error("unknown option \"%s\"",
				    o);
			}
			return usage_error("unknown option \"%s\"",
			    argv[optind - 1]);
		}
	}
	argc -= optind;
	argv += optind;
	if (argc == 0) {
		usage(stderr);
		return CTL_USAGE;
	}
	if (strcmp(argv[0], "help") == 0) {
		usage(stdout);
		return CTL_OK;
	}

	for (cm = ctl_commands; cm->cm_word1 != NULL; cm++) {
		if (strcmp(argv[0], cm->cm_word1) != 0)
			continue;
		if (cm->cm_word2 == NULL)
			break;
		if (argc > 1 && strcmp(argv[1], cm->cm_word2) == 0)
			break;
	}
	if (cm->cm_word1 == NULL) {
		for (cm = ctl_commands; cm->cm_word1 != NULL; cm++)
			if (strcmp(argv[0], cm->cm_word1) == 0)
				break;
		if (cm->cm_word1 == NULL)
			return usage_error("unknown command \"%s\"", argv[0]);
		/* "sandbox" or "audit" with a missing or unknown verb */
		fprintf(stderr, "airlockctl: %s%s%s: unknown or missing "
		    "subcommand\nusage:\n", argv[0], argc > 1 ? " " : "",
		    argc > 1 ? argv[1] : "");
		for (; cm->cm_word1 != NULL; cm++)
			if (strcmp(argv[0], cm->cm_word1) == 0)
				fprintf(stderr, "  airlockctl %s\n",
				    cm->cm_synopsis);
		return CTL_USAGE;
	}
	words = cm->cm_word2 != NULL ? 2 : 1;
	if ((rc = parse_args(cm, argc - words, argv + words, &a)) != CTL_OK) {
		free(a.a_pos);
		return rc;
	}

	memset(&c, 0, sizeof(c));
	c.c_json = opt_json;
	if (!cm->cm_local && (rc = ctl_locate(&c)) != CTL_OK)
		goto out;
	a.a_config = opt_config;
	rc = cm->cm_fn(&c, &a);
out:
	free(a.a_pos);
	free(c.c_addr);
	free(c.c_token_src);
	free(c.c_token_err);
	if (fflush(stdout) == EOF || ferror(stdout)) {
		if (errno != EPIPE)
			ctl_err("cannot write the output: %s", strerror(errno));
		if (rc == CTL_OK)
			rc = CTL_FAIL;
	}
	return rc;
}
