/* PLACEHOLDER until airlockctl lands. */
#include <stdio.h>
int main(void) { fprintf(stderr, "airlockctl: not built yet\n"); return 2; }
