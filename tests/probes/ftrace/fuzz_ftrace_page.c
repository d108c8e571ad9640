/*
 * fuzz_ftrace_page.c - libFuzzer target for linux.ftrace's parsers of raw
 * kernel bytes: the ring-buffer page walker (ftrace_page.c) and the record
 * encoder (ftrace_encode.c) behind it, with translations built from real
 * event formats (typed, generic, __data_loc, tail strings, compact_sched).
 *
 * The first input byte picks the mode: bit 0 the commit size (8 or 4),
 * bit 1 compact_sched, bit 2 feed the rest as one record instead of a
 * page.  Every packet produced must decode as protobuf.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <traceevent/event-parse.h>

#include "ftrace_encode.h"
#include "ftrace_events.h"
#include "ftrace_formats.h"
#include "ftrace_page.h"
#include "pb_wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct ft_table g_tables[2]; /* [compact] */
static struct ft_bundle *g_bundle;
static struct pb_buf g_out;

static void init_once(void)
{
	static char *patterns[] = { "sched/*", "ftrace/print", "kvm/*",
				    "my_event" };
	struct tep_handle *tep = tep_alloc();
	if (!tep)
		abort();
	for (size_t i = 0; i < sizeof test_formats / sizeof test_formats[0];
	     i++) {
		struct tep_event *e = NULL;
		if (tep_parse_format(tep, &e, test_formats[i].text,
				     strlen(test_formats[i].text),
				     test_formats[i].sys) != 0)
			abort();
	}
	for (int c = 0; c < 2; c++)
		if (ft_table_build(&g_tables[c], tep, patterns, 4, false,
				   c == 1) == 0)
			abort();
	tep_free(tep);
	g_bundle = malloc(sizeof *g_bundle);
	if (!g_bundle)
		abort();
	ft_bundle_init(g_bundle, false);
	pb_buf_init(&g_out);
}

/* Every field of the packet must parse, nested messages included. */
static void check_decodes(const uint8_t *p, size_t len, int depth)
{
	struct pb_reader r;
	struct pb_field f;
	pb_reader_init(&r, p, len);
	while (pb_next(&r, &f))
		if (f.wt == PB_WT_LEN && depth < 4 &&
		    (f.num == 1 || f.num == 2 || f.num == 4 ||
		     f.num == FE_GENERIC))
			check_decodes(f.data, f.len, depth + 1);
	if (depth == 0 && r.err != PB_OK)
		abort();
}

static void emit(void)
{
	ft_bundle_packet(g_bundle, 0, 0, &g_out);
	check_decodes(g_out.data, g_out.len, 0);
	ft_bundle_reset(g_bundle);
}

struct ctx {
	const struct ft_table *t;
};

static int on_record(void *vctx, uint64_t ts, const uint8_t *d, size_t len)
{
	struct ctx *c = vctx;
	if (ft_encode_record(c->t, g_bundle, ts, d, len) == FT_ENC_INVALID)
		ft_bundle_add_error(g_bundle, ts, FTRACE_STATUS_INVALID_EVENT);
	if (ft_bundle_size(g_bundle) > 16384 ||
	    g_bundle->n_intern > FT_INTERN_MAX - 64)
		emit();
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int inited;
	if (!inited) {
		init_once();
		inited = 1;
	}
	if (size < 1)
		return 0;
	uint8_t mode = data[0];
	struct ftrace_page_layout l = { (mode & 1) ? 4 : 8 };
	struct ctx c = { &g_tables[(mode >> 1) & 1] };
	g_bundle->compact_enabled = (mode >> 1) & 1;
	data++;
	size--;

	/* Copies so that reads past the end are caught by ASan. */
	uint8_t *buf = malloc(size ? size : 1);
	if (!buf)
		return 0;
	memcpy(buf, data, size);
	if (mode & 4) {
		on_record(&c, 1, buf, size);
	} else {
		struct ftrace_page_info info;
		enum ftrace_parse_status st =
			ftrace_page_parse(&l, buf, size, on_record, &c, &info);
		if (st != FTRACE_STATUS_OK)
			ft_bundle_add_error(g_bundle, info.last_ts, st);
		g_bundle->lost_events = info.missed_events;
	}
	emit();
	free(buf);
	return 0;
}
