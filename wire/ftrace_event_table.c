/*
 * ftrace_event_table.c - lookups in the ftrace event table (the data is
 * ftrace_event_table_data.c, generated from ftrace_event_table.def and
 * protos/).
 */
#include <string.h>

#include "ftrace_event_table.h"

const struct ft_event_desc *ft_event_by_id(uint32_t id)
{
	size_t lo = 0, hi = ft_event_descs_count;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (ft_event_descs[mid].id == id)
			return &ft_event_descs[mid];
		if (ft_event_descs[mid].id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

const struct ft_event_desc *ft_event_by_name(const char *group,
					     const char *event)
{
	for (size_t i = 0; i < ft_event_descs_count; i++) {
		const struct ft_event_desc *d = &ft_event_descs[i];
		if (d->group && !strcmp(d->group, group) &&
		    !strcmp(d->event, event))
			return d;
	}
	return NULL;
}

const struct ft_event_field *ft_event_field(const struct ft_event_desc *d,
					    uint32_t num)
{
	for (unsigned i = 0; i < d->nfields; i++)
		if (d->fields[i].num == num)
			return &d->fields[i];
	return NULL;
}
