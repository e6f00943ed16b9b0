/* PLACEHOLDER: filled by the metrics work in progress. */
#include "config.h"
#include "unit.h"

Suite *
suite_metrics(void)
{
	return suite_create("metrics");
}
