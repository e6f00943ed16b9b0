/* PLACEHOLDER: filled by the geo work in progress. */
#include "config.h"
#include "unit.h"

Suite *
suite_geo(void)
{
	return suite_create("geo");
}
