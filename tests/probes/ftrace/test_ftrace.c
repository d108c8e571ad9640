/*
 * test_ftrace.c - unit tests of linux.ftrace's pure parts: the raw page
 * parser, the translation table built from event formats, the record
 * encoder (typed, generic, compact_sched), bundle packets, the stats file
 * parser and the event patterns.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <traceevent/event-parse.h>

#include "ftrace_encode.h"
#include "ftrace_events.h"
#include "ftrace_formats.h"
#include "ftrace_page.h"
#include "pb_wire.h"

/* ---- helpers --------------------------------------------------------- */

/* The nth (0-based) occurrence of field num in msg; false if absent. */
static bool get(const uint8_t *msg, size_t len, uint32_t num, int nth,
		struct pb_field *out)
{
	struct pb_reader r;
	struct pb_field f;
	pb_reader_init(&r, msg, len);
	while (pb_next(&r, &f))
		if (f.num == num && nth-- == 0) {
			*out = f;
			return true;
		}
	return false;
}

static uint64_t get_u(const uint8_t *msg, size_t len, uint32_t num)
{
	struct pb_field f;
	assert_true(get(msg, len, num, 0, &f));
	assert_int_equal(f.wt, PB_WT_VARINT);
	return f.val;
}

static void get_sub(const uint8_t *msg, size_t len, uint32_t num, int nth,
		    const uint8_t **sub, size_t *sublen)
{
	struct pb_field f;
	assert_true(get(msg, len, num, nth, &f));
	assert_int_equal(f.wt, PB_WT_LEN);
	*sub = f.data;
	*sublen = f.len;
}

static void assert_str(const uint8_t *msg, size_t len, uint32_t num,
		       const char *want)
{
	struct pb_field f;
	assert_true(get(msg, len, num, 0, &f));
	assert_int_equal(f.wt, PB_WT_LEN);
	assert_int_equal(f.len, strlen(want));
	assert_memory_equal(f.data, want, f.len);
}

static void put16(uint8_t *p, uint16_t v) { memcpy(p, &v, 2); }
static void put32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }
static void put64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }

static struct tep_handle *load_test_tep(void)
{
	struct tep_handle *tep = tep_alloc();
	assert_non_null(tep);
	for (size_t i = 0; i < sizeof test_formats / sizeof test_formats[0];
	     i++) {
		struct tep_event *e = NULL;
		assert_int_equal(tep_parse_format(tep, &e, test_formats[i].text,
						  strlen(test_formats[i].text),
						  test_formats[i].sys),
				 0);
	}
	return tep;
}

static char *patterns[] = { "sched/*", "ftrace/print", "kvm/kvm_exit",
			    "my_event" };

static void build_table(struct ft_table *t, bool compact)
{
	struct tep_handle *tep = load_test_tep();
	memset(t, 0, sizeof *t);
	assert_int_equal(ft_table_build(t, tep, patterns, 4, false, compact),
			 6);
	tep_free(tep);
}

static void common_hdr(uint8_t *rec, uint16_t id, uint8_t flags, int32_t pid)
{
	put16(rec, id);
	rec[2] = flags;
	rec[3] = 0;
	put32(rec + 4, (uint32_t)pid);
}

static size_t switch_record(uint8_t *rec, const char *prev, int32_t prev_pid,
			    int64_t prev_state, const char *next,
			    int32_t next_pid, int32_t next_prio)
{
	memset(rec, 0, 64);
	common_hdr(rec, 372, 0, prev_pid);
	strncpy((char *)rec + 8, prev, 16);
	put32(rec + 24, (uint32_t)prev_pid);
	put32(rec + 28, 120);
	put64(rec + 32, (uint64_t)prev_state);
	strncpy((char *)rec + 40, next, 16);
	put32(rec + 56, (uint32_t)next_pid);
	put32(rec + 60, (uint32_t)next_prio);
	return 64;
}

/* ---- page parser ------------------------------------------------------ */

struct seen {
	int n;
	uint64_t ts[16];
	size_t len[16];
	uint8_t first[16];
};

static int collect(void *ctx, uint64_t ts, const uint8_t *data, size_t len)
{
	struct seen *s = ctx;
	if (s->n < 16) {
		s->ts[s->n] = ts;
		s->len[s->n] = len;
		s->first[s->n] = data[0];
		s->n++;
	}
	return 0;
}

static const struct ftrace_page_layout layout8 = { 8 };

/* Appends an event header word. */
static size_t hdr(uint8_t *p, uint32_t type_len, uint32_t delta)
{
	put32(p, (delta << 5) | type_len);
	return 4;
}

static void test_page_events(void **state)
{
	(void)state;
	uint8_t page[4096] = { 0 };
	size_t o = 16;

	put64(page, 1000);
	/* A small event: type_len 2 = 8 bytes of data, delta 5. */
	o += hdr(page + o, 2, 5);
	memset(page + o, 0xa1, 8);
	o += 8;
	/* A time extend of (1 << 27) + 3. */
	o += hdr(page + o, 30, 3);
	put32(page + o, 1);
	o += 4;
	/* A long event (type_len 0): length word 4 + 120 data bytes. */
	o += hdr(page + o, 0, 7);
	put32(page + o, 124);
	o += 4;
	memset(page + o, 0xb2, 120);
	o += 120;
	/* A discarded event: padding with a non-zero delta, 12 bytes. */
	o += hdr(page + o, 29, 1);
	put32(page + o, 12);
	o += 12;
	/* An absolute time stamp, then an event at delta 0 from it. */
	o += hdr(page + o, 31, 0x10);
	put32(page + o, 2);
	o += 4;
	o += hdr(page + o, 1, 0);
	memset(page + o, 0xc3, 4);
	o += 4;
	put64(page + 8, (uint64_t)(o - 16) | (1ull << 31));

	struct seen s = { 0 };
	struct ftrace_page_info info;
	assert_int_equal(ftrace_page_parse(&layout8, page, sizeof page,
					   collect, &s, &info),
			 FTRACE_STATUS_OK);
	assert_int_equal(s.n, 3);
	assert_int_equal(info.n_events, 3);
	assert_true(info.missed_events);
	assert_int_equal(s.ts[0], 1005);
	assert_int_equal(s.len[0], 8);
	assert_int_equal(s.first[0], 0xa1);
	assert_int_equal(s.ts[1], 1005 + (1ull << 27) + 3 + 7);
	assert_int_equal(s.len[1], 120);
	assert_int_equal(s.first[1], 0xb2);
	assert_int_equal(s.ts[2], (2ull << 27) | 0x10);
	assert_int_equal(s.first[2], 0xc3);
	assert_int_equal(info.last_ts, s.ts[2]);
}

static void test_page_end_padding(void **state)
{
	(void)state;
	uint8_t page[64] = { 0 };
	size_t o = 16;
	put64(page, 50);
	o += hdr(page + o, 1, 2);
	o += 4;
	o += hdr(page + o, 29, 0); /* the rest is unused */
	o += 8;
	put64(page + 8, o - 16);
	struct seen s = { 0 };
	struct ftrace_page_info info;
	assert_int_equal(ftrace_page_parse(&layout8, page, sizeof page,
					   collect, &s, &info),
			 FTRACE_STATUS_OK);
	assert_int_equal(s.n, 1);
	assert_false(info.missed_events);
}

static enum ftrace_parse_status parse_bytes(const uint8_t *page, size_t len)
{
	struct seen s = { 0 };
	struct ftrace_page_info info;
	return ftrace_page_parse(&layout8, page, len, collect, &s, &info);
}

static void test_page_malformed(void **state)
{
	(void)state;
	uint8_t page[64] = { 0 };

	assert_int_equal(parse_bytes(page, 10),
			 FTRACE_STATUS_PARTIAL_PAGE_READ);
	put64(page + 8, 100); /* more data than the page holds */
	assert_int_equal(parse_bytes(page, sizeof page),
			 FTRACE_STATUS_ABI_INVALID_PAGE_HEADER);
	put64(page + 8, 2);
	assert_int_equal(parse_bytes(page, sizeof page),
			 FTRACE_STATUS_ABI_SHORT_EVENT_HEADER);
	put64(page + 8, 4); /* a long event without its length */
	hdr(page + 16, 0, 0);
	assert_int_equal(parse_bytes(page, sizeof page),
			 FTRACE_STATUS_ABI_SHORT_DATA_LENGTH);
	put64(page + 8, 8); /* a length word of 0 */
	put32(page + 20, 0);
	assert_int_equal(parse_bytes(page, sizeof page),
			 FTRACE_STATUS_ABI_ZERO_DATA_LENGTH);
	put32(page + 20, 400); /* beyond the data */
	assert_int_equal(parse_bytes(page, sizeof page),
			 FTRACE_STATUS_ABI_INVALID_DATA_LENGTH);
	hdr(page + 16, 28, 0); /* 112 bytes of data in 4 */
	assert_int_equal(parse_bytes(page, sizeof page),
			 FTRACE_STATUS_ABI_INVALID_DATA_LENGTH);
	hdr(page + 16, 30, 0); /* time extend cut short */
	put64(page + 8, 4);
	assert_int_equal(parse_bytes(page, sizeof page),
			 FTRACE_STATUS_ABI_SHORT_TIME_EXTEND);
	hdr(page + 16, 31, 0);
	assert_int_equal(parse_bytes(page, sizeof page),
			 FTRACE_STATUS_ABI_SHORT_TIME_STAMP);
	hdr(page + 16, 29, 1);
	assert_int_equal(parse_bytes(page, sizeof page),
			 FTRACE_STATUS_ABI_SHORT_PADDING_LENGTH);
	put64(page + 8, 8);
	put32(page + 20, 2); /* shorter than its own length word */
	assert_int_equal(parse_bytes(page, sizeof page),
			 FTRACE_STATUS_ABI_INVALID_PADDING_LENGTH);
	assert_string_equal(ftrace_status_name(FTRACE_STATUS_ABI_END_OVERFLOW),
			    "ABI_END_OVERFLOW");
}

static void test_page_commit4(void **state)
{
	(void)state;
	static const struct ftrace_page_layout l4 = { 4 };
	uint8_t page[32] = { 0 };
	put64(page, 7);
	put32(page + 8, 8);
	hdr(page + 12, 1, 1);
	struct seen s = { 0 };
	struct ftrace_page_info info;
	assert_int_equal(ftrace_page_parse(&l4, page, sizeof page, collect, &s,
					   &info),
			 FTRACE_STATUS_OK);
	assert_int_equal(s.n, 1);
	assert_int_equal(s.ts[0], 8);
}

/* ---- translation table and encoder ----------------------------------- */

static void test_table_from_formats(void **state)
{
	(void)state;
	struct ft_table t;
	build_table(&t, false);
	assert_true(t.max_id >= 900);
	const struct ft_event *sw = t.by_id[372];
	assert_non_null(sw);
	assert_int_equal(sw->proto_id, FE_SCHED_SWITCH);
	assert_int_equal(sw->nfields, 7);
	assert_int_equal(t.by_id[5]->proto_id, FE_PRINT);
	assert_int_equal(t.by_id[5]->fields[1].loc, FT_LOC_TAIL);
	assert_int_equal(t.by_id[370]->fields[0].loc, FT_LOC_DYNAMIC);
	/* kvm_exit: x86 names mapped onto Perfetto's fields. */
	const struct ft_event *ke = t.by_id[103];
	assert_int_equal(ke->proto_id, FE_KVM_EXIT);
	assert_int_equal(ke->nfields, 2);
	/* The u64 array cannot be represented: four generic fields. */
	assert_int_equal(t.by_id[900]->proto_id, FE_GENERIC);
	assert_int_equal(t.by_id[900]->nfields, 4);
	ft_table_free(&t);

	/* disable_generic_events drops my_event. */
	struct tep_handle *tep = load_test_tep();
	memset(&t, 0, sizeof t);
	assert_int_equal(ft_table_build(&t, tep, patterns, 4, true, false), 5);
	assert_true(t.max_id < 900 || !t.by_id[900]);
	ft_table_free(&t);
	tep_free(tep);
}

static void test_encode_typed_switch(void **state)
{
	(void)state;
	struct ft_table t;
	struct ft_bundle *b = malloc(sizeof *b);
	uint8_t rec[64];
	struct pb_buf out;
	const uint8_t *bundle, *ev, *sw;
	size_t blen, elen, swlen;

	build_table(&t, false);
	ft_bundle_init(b, false);
	pb_buf_init(&out);
	switch_record(rec, "bash", 42, 1, "swapper/1", 0, 120);
	assert_int_equal(ft_encode_record(&t, b, 5000, rec, sizeof rec),
			 FT_ENC_OK);
	ft_bundle_packet(b, 3, 4000, &out);

	assert_int_equal(get_u(out.data, out.len, 8), 5000);
	get_sub(out.data, out.len, 1, 0, &bundle, &blen);
	assert_int_equal(get_u(bundle, blen, 1), 3);
	assert_int_equal(get_u(bundle, blen, 10), 4000);
	get_sub(bundle, blen, 2, 0, &ev, &elen);
	assert_int_equal(get_u(ev, elen, 1), 5000);
	assert_int_equal(get_u(ev, elen, 2), 42);
	get_sub(ev, elen, FE_SCHED_SWITCH, 0, &sw, &swlen);
	assert_str(sw, swlen, 1, "bash");
	assert_int_equal(get_u(sw, swlen, 2), 42);
	assert_int_equal(get_u(sw, swlen, 3), 120);
	assert_int_equal(get_u(sw, swlen, 4), 1);
	assert_str(sw, swlen, 5, "swapper/1");
	assert_int_equal(get_u(sw, swlen, 6), 0);
	assert_int_equal(get_u(sw, swlen, 7), 120);

	/* Too short for the common fields; an id nobody enabled. */
	assert_int_equal(ft_encode_record(&t, b, 1, rec, 6), FT_ENC_INVALID);
	put16(rec, 777);
	assert_int_equal(ft_encode_record(&t, b, 1, rec, sizeof rec),
			 FT_ENC_UNKNOWN);
	pb_buf_free(&out);
	ft_bundle_free(b);
	free(b);
	ft_table_free(&t);
}

static void test_encode_truncated_fields(void **state)
{
	(void)state;
	struct ft_table t;
	struct ft_bundle *b = malloc(sizeof *b);
	uint8_t rec[64];
	const uint8_t *ev, *sw;
	size_t elen, swlen;

	build_table(&t, false);
	ft_bundle_init(b, false);
	switch_record(rec, "a", 1, 0, "b", 2, 3);
	/* Only the fields before byte 30 fit. */
	assert_int_equal(ft_encode_record(&t, b, 9, rec, 30), FT_ENC_OK);
	get_sub(b->events.data, b->events.len, 2, 0, &ev, &elen);
	get_sub(ev, elen, FE_SCHED_SWITCH, 0, &sw, &swlen);
	struct pb_field f;
	assert_true(get(sw, swlen, 2, 0, &f));
	assert_false(get(sw, swlen, 3, 0, &f));
	assert_false(get(sw, swlen, 5, 0, &f));
	ft_bundle_free(b);
	free(b);
	ft_table_free(&t);
}

static void test_encode_print_and_exec(void **state)
{
	(void)state;
	struct ft_table t;
	struct ft_bundle *b = malloc(sizeof *b);
	uint8_t rec[64] = { 0 };
	const uint8_t *ev, *p;
	size_t elen, plen;

	build_table(&t, false);
	ft_bundle_init(b, false);
	common_hdr(rec, 5, 0, 77);
	put64(rec + 8, 0xffffffff81000000ull);
	memcpy(rec + 16, "hello marker\n\0junk", 19);
	assert_int_equal(ft_encode_record(&t, b, 10, rec, 40), FT_ENC_OK);
	get_sub(b->events.data, b->events.len, 2, 0, &ev, &elen);
	get_sub(ev, elen, FE_PRINT, 0, &p, &plen);
	assert_int_equal(get_u(p, plen, 1), 0xffffffff81000000ull);
	assert_str(p, plen, 2, "hello marker\n");

	/* sched_process_exec: filename behind a __data_loc word. */
	memset(rec, 0, sizeof rec);
	common_hdr(rec, 370, 0, 78);
	put32(rec + 8, (9u << 16) | 20u);
	put32(rec + 12, 78);
	put32(rec + 16, 78);
	memcpy(rec + 20, "/bin/true", 9);
	assert_int_equal(ft_encode_record(&t, b, 11, rec, 32), FT_ENC_OK);
	get_sub(b->events.data, b->events.len, 2, 1, &ev, &elen);
	get_sub(ev, elen, FE_SCHED_PROCESS_EXEC, 0, &p, &plen);
	assert_str(p, plen, 1, "/bin/true");
	assert_int_equal(get_u(p, plen, 2), 78);

	/* A __data_loc pointing outside the record: the field is left out. */
	put32(rec + 8, (200u << 16) | 20u);
	assert_int_equal(ft_encode_record(&t, b, 12, rec, 32), FT_ENC_OK);
	get_sub(b->events.data, b->events.len, 2, 2, &ev, &elen);
	get_sub(ev, elen, FE_SCHED_PROCESS_EXEC, 0, &p, &plen);
	struct pb_field f;
	assert_false(get(p, plen, 1, 0, &f));
	assert_int_equal(get_u(p, plen, 3), 78);
	ft_bundle_free(b);
	free(b);
	ft_table_free(&t);
}

static void test_encode_generic(void **state)
{
	(void)state;
	struct ft_table t;
	struct ft_bundle *b = malloc(sizeof *b);
	uint8_t rec[64] = { 0 };
	const uint8_t *ev, *g, *fld;
	size_t elen, glen, flen;

	build_table(&t, false);
	ft_bundle_init(b, false);
	common_hdr(rec, 900, 0, 5);
	put32(rec + 8, (uint32_t)-7);
	put32(rec + 12, 3000000000u);
	put32(rec + 16, (4u << 16) | 44u);
	memcpy(rec + 20, "tagtagtag", 8);
	memcpy(rec + 44, "lbl", 4);
	assert_int_equal(ft_encode_record(&t, b, 10, rec, 48), FT_ENC_OK);
	get_sub(b->events.data, b->events.len, 2, 0, &ev, &elen);
	get_sub(ev, elen, FE_GENERIC, 0, &g, &glen);
	assert_str(g, glen, 1, "my_event");
	get_sub(g, glen, 2, 0, &fld, &flen);
	assert_str(fld, flen, 1, "delta");
	assert_int_equal((int64_t)get_u(fld, flen, 4), -7);
	get_sub(g, glen, 2, 1, &fld, &flen);
	assert_str(fld, flen, 1, "count");
	assert_int_equal(get_u(fld, flen, 5), 3000000000u);
	get_sub(g, glen, 2, 2, &fld, &flen);
	assert_str(fld, flen, 1, "label");
	assert_str(fld, flen, 3, "lbl");
	get_sub(g, glen, 2, 3, &fld, &flen);
	assert_str(fld, flen, 1, "tag");
	assert_str(fld, flen, 3, "tagtagta");
	ft_bundle_free(b);
	free(b);
	ft_table_free(&t);
}

static void test_encode_compact(void **state)
{
	(void)state;
	struct ft_table t;
	struct ft_bundle *b = malloc(sizeof *b);
	uint8_t rec[64];
	struct pb_buf out;
	const uint8_t *bundle, *cs;
	size_t blen, cslen;

	build_table(&t, true);
	ft_bundle_init(b, true);
	pb_buf_init(&out);
	switch_record(rec, "a", 1, 1, "bash", 10, 120);
	ft_encode_record(&t, b, 1000, rec, sizeof rec);
	switch_record(rec, "bash", 10, 0, "zsh", 11, 100);
	ft_encode_record(&t, b, 1500, rec, sizeof rec);
	switch_record(rec, "zsh", 11, 2, "bash", 10, 120);
	ft_encode_record(&t, b, 1700, rec, sizeof rec);
	memset(rec, 0, sizeof rec);
	common_hdr(rec, 375, 0x0d, 10);
	memcpy(rec + 8, "zsh", 3);
	put32(rec + 24, 11);
	put32(rec + 28, 100);
	put32(rec + 32, 1);
	ft_encode_record(&t, b, 1600, rec, 36);
	assert_int_equal(b->events.len, 0); /* all went to the columns */
	ft_bundle_packet(b, 0, 900, &out);

	get_sub(out.data, out.len, 1, 0, &bundle, &blen);
	get_sub(bundle, blen, 4, 0, &cs, &cslen);
	struct pb_field f;
	struct pb_packed_iter it;
	uint64_t v, want_ts[] = { 1000, 500, 200 };
	assert_true(get(cs, cslen, 1, 0, &f));
	pb_packed_init(&it, f.data, f.len);
	for (int i = 0; i < 3; i++) {
		assert_true(pb_packed_next(&it, &v));
		assert_int_equal(v, want_ts[i]);
	}
	assert_false(pb_packed_next(&it, &v));
	/* next_comm indices: bash 0, zsh 1, bash 0. */
	uint64_t want_idx[] = { 0, 1, 0 };
	assert_true(get(cs, cslen, 6, 0, &f));
	pb_packed_init(&it, f.data, f.len);
	for (int i = 0; i < 3; i++) {
		assert_true(pb_packed_next(&it, &v));
		assert_int_equal(v, want_idx[i]);
	}
	assert_str(cs, cslen, 5, "bash");
	assert_true(get(cs, cslen, 5, 1, &f));
	assert_int_equal(f.len, 3);
	assert_false(get(cs, cslen, 5, 2, &f));
	/* The waking: first timestamp absolute, the intern index of zsh,
	 * the common flags. */
	assert_true(get(cs, cslen, 7, 0, &f));
	pb_packed_init(&it, f.data, f.len);
	assert_true(pb_packed_next(&it, &v));
	assert_int_equal(v, 1600);
	assert_true(get(cs, cslen, 11, 0, &f));
	pb_packed_init(&it, f.data, f.len);
	assert_true(pb_packed_next(&it, &v));
	assert_int_equal(v, 1);
	assert_true(get(cs, cslen, 12, 0, &f));
	pb_packed_init(&it, f.data, f.len);
	assert_true(pb_packed_next(&it, &v));
	assert_int_equal(v, 0x0d);
	assert_true(get(cs, cslen, 9, 0, &f));
	pb_packed_init(&it, f.data, f.len);
	assert_true(pb_packed_next(&it, &v));
	assert_int_equal(v, 1);

	/* Reset: a fresh bundle starts absolute again. */
	ft_bundle_reset(b);
	switch_record(rec, "a", 1, 1, "b", 2, 3);
	ft_encode_record(&t, b, 2000, rec, sizeof rec);
	ft_bundle_packet(b, 0, 1700, &out);
	get_sub(out.data, out.len, 1, 0, &bundle, &blen);
	get_sub(bundle, blen, 4, 0, &cs, &cslen);
	assert_true(get(cs, cslen, 1, 0, &f));
	pb_packed_init(&it, f.data, f.len);
	assert_true(pb_packed_next(&it, &v));
	assert_int_equal(v, 2000);
	pb_buf_free(&out);
	ft_bundle_free(b);
	free(b);
	ft_table_free(&t);
}

static void test_bundle_errors_and_loss(void **state)
{
	(void)state;
	struct ft_bundle *b = malloc(sizeof *b);
	struct pb_buf out;
	const uint8_t *bundle, *e;
	size_t blen, elen;

	ft_bundle_init(b, false);
	pb_buf_init(&out);
	b->lost_events = true;
	ft_bundle_add_error(b, 77, FTRACE_STATUS_ABI_SHORT_EVENT_HEADER);
	ft_bundle_packet(b, 1, 55, &out);
	assert_int_equal(get_u(out.data, out.len, 8), 55);
	get_sub(out.data, out.len, 1, 0, &bundle, &blen);
	assert_int_equal(get_u(bundle, blen, 3), 1);
	get_sub(bundle, blen, 8, 0, &e, &elen);
	assert_int_equal(get_u(e, elen, 1), 77);
	assert_int_equal(get_u(e, elen, 2),
			 FTRACE_STATUS_ABI_SHORT_EVENT_HEADER);
	pb_buf_free(&out);
	ft_bundle_free(b);
	free(b);
}

/* ---- stats and patterns ------------------------------------------------- */

static void test_cpu_stats(void **state)
{
	(void)state;
	struct ft_cpu_stats s;
	const char *text = "entries: 12\noverrun: 3\ncommit overrun: 1\n"
			   "bytes: 4096\noldest event ts:  1234.500000\n"
			   "now ts:  1240.250000\ndropped events: 2\n"
			   "read events: 99\nsomething new: 5\n";
	assert_int_equal(ft_parse_cpu_stats(text, &s), 8);
	assert_int_equal(s.entries, 12);
	assert_int_equal(s.overrun, 3);
	assert_int_equal(s.commit_overrun, 1);
	assert_int_equal(s.bytes, 4096);
	assert_int_equal(s.dropped_events, 2);
	assert_int_equal(s.read_events, 99);
	assert_true(s.has_oldest && s.has_now);
	assert_true(s.oldest_event_ts > 1234.4 && s.oldest_event_ts < 1234.6);
	assert_int_equal(ft_parse_cpu_stats("garbage\n:\nentries: x", &s), 0);
	assert_int_equal(ft_parse_cpu_stats("", &s), 0);
}

static void test_patterns(void **state)
{
	(void)state;
	assert_true(ft_pattern_matches("sched/sched_switch", "sched",
				       "sched_switch"));
	assert_false(ft_pattern_matches("sched/sched_switch", "sched",
					"sched_waking"));
	assert_true(ft_pattern_matches("sched/*", "sched", "sched_waking"));
	assert_false(ft_pattern_matches("sched/*", "schedx", "a"));
	assert_false(ft_pattern_matches("sch/*", "sched", "a"));
	assert_true(ft_pattern_matches("print", "ftrace", "print"));
	assert_false(ft_pattern_matches("print", "ftrace", "printk"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_page_events),
		cmocka_unit_test(test_page_end_padding),
		cmocka_unit_test(test_page_malformed),
		cmocka_unit_test(test_page_commit4),
		cmocka_unit_test(test_table_from_formats),
		cmocka_unit_test(test_encode_typed_switch),
		cmocka_unit_test(test_encode_truncated_fields),
		cmocka_unit_test(test_encode_print_and_exec),
		cmocka_unit_test(test_encode_generic),
		cmocka_unit_test(test_encode_compact),
		cmocka_unit_test(test_bundle_errors_and_loss),
		cmocka_unit_test(test_cpu_stats),
		cmocka_unit_test(test_patterns),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
