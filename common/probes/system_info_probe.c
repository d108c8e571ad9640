/*
 * system_info_probe.c - placeholder while the module is written; registers
 * nothing.
 */
#include "probes.h"

int system_info_probe_register(const struct probes_options *opt)
{
	(void)opt;
	return 0;
}
