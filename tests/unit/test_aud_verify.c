/* PLACEHOLDER: filled by the aud_verify work in progress. */
#include "config.h"
#include "unit.h"

Suite *
suite_aud_verify(void)
{
	return suite_create("aud_verify");
}
