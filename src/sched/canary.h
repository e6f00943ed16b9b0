/*
 * The escape canary, gateway side (issue 24, point 7): ask the launcher to
 * run its containment checks inside a sandbox (launcher_probe), then
 * report them: a JSON object, airlock_canary_failures_total in /metrics,
 * one audit record (proto "canary"), and an error-level log line per
 * failing check.
 */
#ifndef AIRLOCK_CANARY_H
#define AIRLOCK_CANARY_H

#include <json-c/json.h>

struct sbx;

/*
 * Probe <s>: 0 with *out a new JSON object {"id", "passed", "failures",
 * "checks": [{"name", "pass"}...], "detail"}, or -1 with <why> (not a
 * netns sandbox, no launcher, the launcher failed).
 */
int	canary_probe(struct sbx *s, json_object **out, char *why, size_t);

#endif
