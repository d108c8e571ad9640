/*
 * test_textproto.c - unit tests of the protobuf text format parser and
 * printer (wire/textproto.h): a realistic Perfetto TraceConfig
 * checked field by field, every error with its exact place, print/parse
 * round trips compared as packed bytes, the nesting limit, oneofs,
 * defaults, proto3 fields; raw bytes printed as Perfetto prints them.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "perfetto/config/config.pb-c.h"
#include "textproto.h"
#include "textproto_test.pb-c.h"
#include "textproto_test3.pb-c.h"

typedef Perfetto__Protos__TraceConfig TraceConfig;
#define TC_DESC (&perfetto__protos__trace_config__descriptor)
#define AT_DESC (&vptest__all_types__descriptor)
#define NODE_DESC (&vptest__node__descriptor)

/* Parses text, failing the test with the parser's message on error. */
static ProtobufCMessage *parse_ok(const ProtobufCMessageDescriptor *desc,
				  const char *text)
{
	ProtobufCMessage *m = (ProtobufCMessage *)1;
	struct vp_error err = {{0}};
	int r = vp_textproto_parse(desc, text, strlen(text), "t.cfg", &m, &err);
	if (r != 0)
		fail_msg("unexpected parse error: %s", err.msg);
	assert_non_null(m);
	return m;
}

/* Parses text, which must fail with exactly `want`. */
static void parse_err(const ProtobufCMessageDescriptor *desc, const char *text,
		      const char *want)
{
	ProtobufCMessage *m = (ProtobufCMessage *)1;
	struct vp_error err = {{0}};
	int r = vp_textproto_parse(desc, text, strlen(text), "t.cfg", &m, &err);
	if (r == 0) {
		protobuf_c_message_free_unpacked(m, NULL);
		fail_msg("parse of <<%.200s>> succeeded; wanted: %s", text, want);
	}
	assert_int_equal(r, -1);
	assert_null(m);
	if (strcmp(err.msg, want) != 0)
		fail_msg("input <<%.200s>>\n  got:  %s\n  want: %s", text, err.msg,
			 want);
}

/* Packs m into a new buffer. */
static uint8_t *pack(const ProtobufCMessage *m, size_t *len)
{
	*len = protobuf_c_message_get_packed_size(m);
	uint8_t *buf = malloc(*len + 1);
	assert_non_null(buf);
	assert_int_equal(protobuf_c_message_pack(m, buf), *len);
	return buf;
}

/* print -> parse gives a message that packs to the same bytes. */
static void assert_round_trip(const ProtobufCMessage *m)
{
	char *text = vp_textproto_print(m);
	assert_non_null(text);
	ProtobufCMessage *back = parse_ok(m->descriptor, text);
	size_t la, lb;
	uint8_t *a = pack(m, &la);
	uint8_t *b = pack(back, &lb);
	if (la != lb || memcmp(a, b, la) != 0)
		fail_msg("round trip differs (%zu vs %zu bytes); text:\n%s", la,
			 lb, text);
	/* Printing is deterministic: the reparsed message prints the same. */
	char *again = vp_textproto_print(back);
	assert_string_equal(text, again);
	free(again);
	free(a);
	free(b);
	free(text);
	protobuf_c_message_free_unpacked(back, NULL);
}

static const char realistic_cfg[] =
	"# A system trace: app events, scheduling, process stats.\n"
	"buffers {\n"
	"  size_kb: 65536\n"
	"  fill_policy: RING_BUFFER\n"
	"}\n"
	"buffers: {\n"
	"  size_kb: 2048  # small one for process stats\n"
	"  fill_policy: DISCARD\n"
	"}\n"
	"data_sources {\n"
	"  config {\n"
	"    name: \"track_event\"\n"
	"    track_event_config {\n"
	"      enabled_categories: \"*\"\n"
	"      disabled_categories: [\"slow\", 'debug']\n"
	"    }\n"
	"  }\n"
	"}\n"
	"data_sources {\n"
	"  config {\n"
	"    name: \"linux.ftrace\"\n"
	"    target_buffer: 0\n"
	"    ftrace_config {\n"
	"      ftrace_events: \"sched/sched_switch\"\n"
	"      ftrace_events: \"sched/sched_wakeup\"\n"
	"      ftrace_events: [\"power/cpu_frequency\", \"power/cpu_idle\"]\n"
	"      buffer_size_kb: 0x800\n"
	"      compact_sched { enabled: true }\n"
	"    }\n"
	"  }\n"
	"  producer_name_filter: \"vtraced_probes\"\n"
	"}\n"
	"data_sources <\n"
	"  config < name: \"linux.process_stats\"; target_buffer: 1;\n"
	"    process_stats_config { scan_all_processes_on_start: true,\n"
	"                           quirks: DISABLE_ON_DEMAND } >\n"
	">\n"
	"duration_ms: 10000;\n"
	"write_into_file: true,\n"
	"file_write_period_ms: 2500\n"
	"max_file_size_bytes: 1000000000000\n"
	"incremental_state_config { clear_period_ms: 5000 }\n"
	"builtin_data_sources {\n"
	"  primary_trace_clock: BUILTIN_CLOCK_BOOTTIME\n"
	"  snapshot_interval_ms: 1000\n"
	"  disable_service_events: false\n"
	"}\n"
	"unique_session_name: \"vp\" '-' \"session\\x21\"\n";

static void test_realistic_config(void **state)
{
	(void)state;
	TraceConfig *tc = (TraceConfig *)parse_ok(TC_DESC, realistic_cfg);

	assert_int_equal(tc->n_buffers, 2);
	assert_true(tc->buffers[0]->has_size_kb);
	assert_int_equal(tc->buffers[0]->size_kb, 65536);
	assert_true(tc->buffers[0]->has_fill_policy);
	assert_int_equal(
		tc->buffers[0]->fill_policy,
		PERFETTO__PROTOS__TRACE_CONFIG__BUFFER_CONFIG__FILL_POLICY__RING_BUFFER);
	assert_int_equal(tc->buffers[1]->size_kb, 2048);
	assert_int_equal(
		tc->buffers[1]->fill_policy,
		PERFETTO__PROTOS__TRACE_CONFIG__BUFFER_CONFIG__FILL_POLICY__DISCARD);

	assert_int_equal(tc->n_data_sources, 3);
	Perfetto__Protos__DataSourceConfig *c = tc->data_sources[0]->config;
	assert_non_null(c);
	assert_string_equal(c->name, "track_event");
	assert_false(c->has_target_buffer);
	assert_null(c->ftrace_config);
	assert_non_null(c->track_event_config);
	assert_int_equal(c->track_event_config->n_enabled_categories, 1);
	assert_string_equal(c->track_event_config->enabled_categories[0], "*");
	assert_int_equal(c->track_event_config->n_disabled_categories, 2);
	assert_string_equal(c->track_event_config->disabled_categories[0], "slow");
	assert_string_equal(c->track_event_config->disabled_categories[1], "debug");
	assert_int_equal(tc->data_sources[0]->n_producer_name_filter, 0);

	c = tc->data_sources[1]->config;
	assert_string_equal(c->name, "linux.ftrace");
	assert_true(c->has_target_buffer);
	assert_int_equal(c->target_buffer, 0);
	Perfetto__Protos__FtraceConfig *fc = c->ftrace_config;
	assert_non_null(fc);
	assert_int_equal(fc->n_ftrace_events, 4);
	assert_string_equal(fc->ftrace_events[0], "sched/sched_switch");
	assert_string_equal(fc->ftrace_events[1], "sched/sched_wakeup");
	assert_string_equal(fc->ftrace_events[2], "power/cpu_frequency");
	assert_string_equal(fc->ftrace_events[3], "power/cpu_idle");
	assert_true(fc->has_buffer_size_kb);
	assert_int_equal(fc->buffer_size_kb, 2048);
	assert_non_null(fc->compact_sched);
	assert_true(fc->compact_sched->has_enabled);
	assert_true(fc->compact_sched->enabled);
	assert_int_equal(tc->data_sources[1]->n_producer_name_filter, 1);
	assert_string_equal(tc->data_sources[1]->producer_name_filter[0],
			    "vtraced_probes");

	c = tc->data_sources[2]->config;
	assert_string_equal(c->name, "linux.process_stats");
	assert_int_equal(c->target_buffer, 1);
	assert_non_null(c->process_stats_config);
	assert_true(c->process_stats_config->scan_all_processes_on_start);
	assert_int_equal(c->process_stats_config->n_quirks, 1);
	assert_int_equal(
		c->process_stats_config->quirks[0],
		PERFETTO__PROTOS__PROCESS_STATS_CONFIG__QUIRKS__DISABLE_ON_DEMAND);

	assert_true(tc->has_duration_ms);
	assert_int_equal(tc->duration_ms, 10000);
	assert_true(tc->has_write_into_file);
	assert_true(tc->write_into_file);
	assert_int_equal(tc->file_write_period_ms, 2500);
	assert_true(tc->has_max_file_size_bytes);
	assert_true(tc->max_file_size_bytes == 1000000000000ull);
	assert_non_null(tc->incremental_state_config);
	assert_int_equal(tc->incremental_state_config->clear_period_ms, 5000);
	assert_non_null(tc->builtin_data_sources);
	assert_int_equal(tc->builtin_data_sources->primary_trace_clock,
			 PERFETTO__PROTOS__BUILTIN_CLOCK__BUILTIN_CLOCK_BOOTTIME);
	assert_int_equal(tc->builtin_data_sources->snapshot_interval_ms, 1000);
	assert_true(tc->builtin_data_sources->has_disable_service_events);
	assert_false(tc->builtin_data_sources->disable_service_events);
	assert_false(tc->builtin_data_sources->has_disable_clock_snapshotting);
	assert_string_equal(tc->unique_session_name, "vp-session!");
	assert_false(tc->has_flush_period_ms);
	assert_null(tc->trigger_config);

	/* The same config built by hand packs to the same bytes. */
	size_t len;
	uint8_t *bytes = pack(&tc->base, &len);
	TraceConfig *un = perfetto__protos__trace_config__unpack(NULL, len, bytes);
	assert_non_null(un);
	assert_int_equal(un->n_data_sources, 3);
	assert_string_equal(un->data_sources[1]->config->ftrace_config->ftrace_events[3],
			    "power/cpu_idle");
	perfetto__protos__trace_config__free_unpacked(un, NULL);
	free(bytes);

	assert_round_trip(&tc->base);
	protobuf_c_message_free_unpacked(&tc->base, NULL);
}

/* The printer's exact output for a small config. */
static void test_print_format(void **state)
{
	(void)state;
	ProtobufCMessage *m = parse_ok(
		TC_DESC,
		"duration_ms: 5000 buffers { size_kb: 1024 fill_policy: 1 }"
		" data_sources { config { name: \"a\\\"b\\n\" "
		"track_event_config { enabled_categories: [\"x\", \"y\"] } } }");
	char *text = vp_textproto_print(m);
	assert_string_equal(text,
			    "buffers {\n"
			    "  size_kb: 1024\n"
			    "  fill_policy: RING_BUFFER\n"
			    "}\n"
			    "data_sources {\n"
			    "  config {\n"
			    "    name: \"a\\\"b\\n\"\n"
			    "    track_event_config {\n"
			    "      enabled_categories: \"x\"\n"
			    "      enabled_categories: \"y\"\n"
			    "    }\n"
			    "  }\n"
			    "}\n"
			    "duration_ms: 5000\n");
	free(text);
	protobuf_c_message_free_unpacked(m, NULL);

	/* An empty message prints as nothing and parses back. */
	m = parse_ok(TC_DESC, "  # nothing\n");
	text = vp_textproto_print(m);
	assert_string_equal(text, "");
	free(text);
	protobuf_c_message_free_unpacked(m, NULL);
}

static void test_errors(void **state)
{
	(void)state;
	parse_err(TC_DESC, "duration_ms: 10\nbogus: 1\n",
		  "t.cfg:2:1: field 'bogus': unknown field (not in "
		  "perfetto.protos.TraceConfig)");
	parse_err(TC_DESC, "buffers {\n  size_kb: 1\n  sizekb: 2\n}\n",
		  "t.cfg:3:3: field 'buffers.sizekb': unknown field (not in "
		  "perfetto.protos.TraceConfig.BufferConfig)");
	parse_err(TC_DESC, "duration_ms: abc\n",
		  "t.cfg:1:14: field 'duration_ms': expected a number, got 'abc'");
	parse_err(TC_DESC, "duration_ms: \"10\"\n",
		  "t.cfg:1:14: field 'duration_ms': expected a number, got '\"10\"'");
	parse_err(TC_DESC, "duration_ms: 10s\n",
		  "t.cfg:1:14: field 'duration_ms': invalid number '10s'");
	parse_err(TC_DESC, "duration_ms: 1.5\n",
		  "t.cfg:1:14: field 'duration_ms': expected an integer, got '1.5'");
	parse_err(TC_DESC, "duration_ms: 4294967296\n",
		  "t.cfg:1:14: field 'duration_ms': value out of range for "
		  "uint32: 4294967296");
	parse_err(TC_DESC, "duration_ms: -1\n",
		  "t.cfg:1:14: field 'duration_ms': value out of range for "
		  "uint32: -1");
	parse_err(TC_DESC, "max_file_size_bytes: 18446744073709551616\n",
		  "t.cfg:1:22: field 'max_file_size_bytes': value out of range "
		  "for uint64: 18446744073709551616");
	parse_err(TC_DESC, "buffers {\n  fill_policy: FOO\n}\n",
		  "t.cfg:2:16: field 'buffers.fill_policy': unknown enum value "
		  "'FOO' (enum perfetto.protos.TraceConfig.BufferConfig.FillPolicy)");
	parse_err(TC_DESC, "buffers { fill_policy: 7 }",
		  "t.cfg:1:24: field 'buffers.fill_policy': unknown enum value 7 "
		  "(enum perfetto.protos.TraceConfig.BufferConfig.FillPolicy)");
	parse_err(TC_DESC, "duration_ms: 1\nduration_ms: 2\n",
		  "t.cfg:2:1: field 'duration_ms': given twice");
	parse_err(TC_DESC, "incremental_state_config {}\n"
		  "incremental_state_config { clear_period_ms: 1 }\n",
		  "t.cfg:2:1: field 'incremental_state_config': given twice");
	parse_err(TC_DESC, "unique_session_name: \"abc\n",
		  "t.cfg:1:22: field 'unique_session_name': unterminated string");
	parse_err(TC_DESC, "unique_session_name: 'abc\\'",
		  "t.cfg:1:22: field 'unique_session_name': unterminated string");
	parse_err(TC_DESC, "buffers {\n  size_kb: 4\n",
		  "t.cfg:3:1: field 'buffers': unexpected end of input "
		  "(missing '}')");
	parse_err(TC_DESC, "data_sources { config { name: ",
		  "t.cfg:1:31: field 'data_sources.config.name': unexpected end "
		  "of input (expected a string)");
	parse_err(TC_DESC, "duration_ms",
		  "t.cfg:1:12: field 'duration_ms': unexpected end of input "
		  "(expected ':')");
	parse_err(TC_DESC, "duration_ms 5",
		  "t.cfg:1:13: field 'duration_ms': expected ':', got '5'");
	parse_err(TC_DESC, "buffers: 5",
		  "t.cfg:1:10: field 'buffers': expected '{', got '5'");
	parse_err(TC_DESC, "duration_ms: [1, 2]",
		  "t.cfg:1:14: field 'duration_ms': a list for a non-repeated field");
	parse_err(TC_DESC, "buffers { size_kb: 1 >",
		  "t.cfg:1:22: field 'buffers': expected a field name, got '>'");
	parse_err(TC_DESC, "}",
		  "t.cfg:1:1: expected a field name, got '}'");
	parse_err(TC_DESC, "duration_ms: 5 @",
		  "t.cfg:1:16: unexpected character '@'");
	parse_err(TC_DESC, "data_sources {\n config {\n  name: \"x\" \x01",
		  "t.cfg:3:13: field 'data_sources.config': unexpected "
		  "character '\\x01'");
	parse_err(TC_DESC, "write_into_file: yes",
		  "t.cfg:1:18: field 'write_into_file': expected true or false, "
		  "got 'yes'");
	parse_err(TC_DESC, "data_sources { producer_name_filter: [\"a\" \"b\"; ] }",
		  "t.cfg:1:46: field 'data_sources.producer_name_filter': "
		  "expected ',' or ']', got ';'");
	parse_err(TC_DESC, "unique_session_name: \"a\\qb\"",
		  "t.cfg:1:24: field 'unique_session_name': invalid escape '\\q'");
	parse_err(TC_DESC, "unique_session_name: \"a\\400\"",
		  "t.cfg:1:24: field 'unique_session_name': octal escape out of "
		  "range");
	parse_err(TC_DESC, "unique_session_name: \"a\\xZ\"",
		  "t.cfg:1:24: field 'unique_session_name': \\x escape without "
		  "hex digits");
	parse_err(TC_DESC, "unique_session_name: \"\\ud800\"",
		  "t.cfg:1:23: field 'unique_session_name': invalid \\u escape");
	parse_err(TC_DESC, "unique_session_name: \"a\\0b\"\n",
		  "t.cfg:2:1: field 'unique_session_name': string contains a "
		  "NUL byte (before this token)");
	parse_err(TC_DESC, "[perfetto.ext]: 1",
		  "t.cfg:1:1: expected a field name, got '['");
	parse_err(TC_DESC, "duration_ms: 0x",
		  "t.cfg:1:14: field 'duration_ms': invalid number '0x'");
	parse_err(TC_DESC, "duration_ms: 09",
		  "t.cfg:1:14: field 'duration_ms': invalid number '09'");

	/* The name given is used as is; NULL gives a placeholder. */
	ProtobufCMessage *m;
	struct vp_error err;
	assert_int_equal(vp_textproto_parse(TC_DESC, "x:1", 3, NULL, &m, &err), -1);
	assert_string_equal(err.msg, "<config>:1:1: field 'x': unknown field "
				     "(not in perfetto.protos.TraceConfig)");
	/* The text need not be NUL-terminated: only len bytes are read. */
	assert_int_equal(vp_textproto_parse(TC_DESC, "duration_ms: 12345", 15,
					    "cut", &m, &err), 0);
	assert_int_equal(((TraceConfig *)m)->duration_ms, 12);
	protobuf_c_message_free_unpacked(m, NULL);
}

static void test_scalars(void **state)
{
	(void)state;
	Vptest__AllTypes *a = (Vptest__AllTypes *)parse_ok(
		AT_DESC,
		"i32: -2147483648 i64: -9223372036854775808 u32: 4294967295\n"
		"u64: 18446744073709551615 s32: -0x10 s64: 0777 f32: 0xffffffff\n"
		"f64: 1 sf32: 2147483647 sf64: -1 fl: 1.5f db: -.25e-3 b: t\n"
		"color: BLUE s: 'it''s' by: \"\\000\\xff\\u00e9\" ri32: [] "
		"ri32: [1, -2] ri32: 3 rdb: [inf, -inf, nan, -Infinity, 1e308, 7]\n"
		"rb: [true, false, True, False, t, f, 1, 0] rcolor: [0, NEG, -3, 2]\n"
		"rs: ['\\u00e9\\U0001F600', \"\\a\\b\\f\\n\\r\\t\\v\\\\\\'\\\"\\?\"]\n"
		"rf64: [0, 18446744073709551615] rfl: [3.4028234e38, -0.0]\n");
	assert_int_equal(a->i32, INT32_MIN);
	assert_true(a->i64 == INT64_MIN);
	assert_true(a->u32 == UINT32_MAX);
	assert_true(a->u64 == UINT64_MAX);
	assert_int_equal(a->s32, -16);
	assert_int_equal(a->s64, 511);
	assert_true(a->f32 == 0xffffffffu);
	assert_true(a->has_f64 && a->f64 == 1);
	assert_int_equal(a->sf32, INT32_MAX);
	assert_int_equal(a->sf64, -1);
	assert_true(a->fl == 1.5f);
	assert_true(a->db == -0.00025);
	assert_true(a->has_b && a->b);
	assert_int_equal(a->color, VPTEST__ALL_TYPES__COLOR__BLUE);
	assert_string_equal(a->s, "its");
	assert_true(a->has_by);
	assert_int_equal(a->by.len, 4);
	assert_memory_equal(a->by.data, "\0\xff\xc3\xa9", 4);
	assert_int_equal(a->n_ri32, 3);
	assert_int_equal(a->ri32[0], 1);
	assert_int_equal(a->ri32[1], -2);
	assert_int_equal(a->ri32[2], 3);
	assert_int_equal(a->n_rdb, 6);
	assert_true(isinf(a->rdb[0]) && a->rdb[0] > 0);
	assert_true(isinf(a->rdb[1]) && a->rdb[1] < 0);
	assert_true(isnan(a->rdb[2]));
	assert_true(isinf(a->rdb[3]) && a->rdb[3] < 0);
	assert_true(a->rdb[4] == 1e308);
	assert_true(a->rdb[5] == 7);
	assert_int_equal(a->n_rb, 8);
	static const int want_rb[] = {1, 0, 1, 0, 1, 0, 1, 0};
	for (int i = 0; i < 8; i++)
		assert_int_equal(a->rb[i], want_rb[i]);
	assert_int_equal(a->n_rcolor, 4);
	assert_int_equal(a->rcolor[1], VPTEST__ALL_TYPES__COLOR__NEG);
	assert_int_equal(a->rcolor[2], -3);
	assert_int_equal(a->n_rs, 2);
	assert_string_equal(a->rs[0], "\xc3\xa9\xf0\x9f\x98\x80");
	assert_string_equal(a->rs[1], "\a\b\f\n\r\t\v\\'\"?");
	assert_true(a->rf64[1] == UINT64_MAX);
	assert_true(a->rfl[0] == 3.4028234e38f);
	assert_true(a->rfl[1] == 0 && signbit(a->rfl[1]));
	/* Fields with defaults, not given, keep them and are not "set". */
	assert_string_equal(a->sdef, "dflt");
	assert_false(a->has_idef);
	assert_int_equal(a->idef, 42);
	assert_round_trip(&a->base);
	char *text = vp_textproto_print(&a->base);
	assert_null(strstr(text, "sdef"));
	assert_null(strstr(text, "idef"));
	assert_non_null(strstr(text, "by: \"\\000\\377\\303\\251\"\n"));
	assert_non_null(strstr(text, "rdb: nan\n"));
	assert_non_null(strstr(text, "rdb: -inf\n"));
	free(text);
	protobuf_c_message_free_unpacked(&a->base, NULL);

	/* Defaults replaced by given values (freed by free_unpacked). */
	a = (Vptest__AllTypes *)parse_ok(AT_DESC,
					 "sdef: \"given\" idef: 7 bydef: \"\"");
	assert_string_equal(a->sdef, "given");
	assert_true(a->has_idef && a->idef == 7);
	assert_true(a->has_bydef && a->bydef.len == 0);
	assert_round_trip(&a->base);
	protobuf_c_message_free_unpacked(&a->base, NULL);

	parse_err(AT_DESC, "i32: 2147483648",
		  "t.cfg:1:6: field 'i32': value out of range for int32: "
		  "2147483648");
	parse_err(AT_DESC, "i32: -2147483649",
		  "t.cfg:1:6: field 'i32': value out of range for int32: "
		  "-2147483649");
	parse_err(AT_DESC, "i64: 9223372036854775808",
		  "t.cfg:1:6: field 'i64': value out of range for int64: "
		  "9223372036854775808");
	parse_err(AT_DESC, "sf32: - ",
		  "t.cfg:1:9: field 'sf32': unexpected end of input (expected a "
		  "number)");
	parse_err(AT_DESC, "fl: 1e39",
		  "t.cfg:1:5: field 'fl': value out of range for float");
	parse_err(AT_DESC, "db: 1e999",
		  "t.cfg:1:5: field 'db': value out of range for double");
	parse_err(AT_DESC, "db: infinit",
		  "t.cfg:1:5: field 'db': expected a number, got 'infinit'");
	parse_err(AT_DESC, "db: 1.2.3",
		  "t.cfg:1:5: field 'db': invalid number '1.2.3'");
	parse_err(AT_DESC, "b: 2", "t.cfg:1:4: field 'b': expected true or "
				   "false, got '2'");
	parse_err(AT_DESC, "color: -4",
		  "t.cfg:1:8: field 'color': unknown enum value -4 (enum "
		  "vptest.AllTypes.Color)");
	parse_err(AT_DESC, "s: 5", "t.cfg:1:4: field 's': expected a string, "
				   "got '5'");
	parse_err(AT_DESC, "rs: [\"a\",]",
		  "t.cfg:1:10: field 'rs': expected a string, got ']'");
	parse_err(AT_DESC, "rs [\"a\"]",
		  "t.cfg:1:4: field 'rs': expected ':', got '['");
}

/* Repeated messages: by repetition, `[ {..}, <..> ]`, with or without ':'. */
static void test_repeated_messages(void **state)
{
	(void)state;
	Vptest__AllTypes *a = (Vptest__AllTypes *)parse_ok(
		AT_DESC, "rnode [ {v: 1}, <v: 2> ] rnode: [] rnode {v: 3}\n"
			 "rnode: [{child {v: 4}}]\n");
	assert_int_equal(a->n_rnode, 4);
	for (int i = 0; i < 3; i++)
		assert_int_equal(a->rnode[i]->v, i + 1);
	assert_false(a->rnode[3]->has_v);
	assert_int_equal(a->rnode[3]->child->v, 4);
	assert_round_trip(&a->base);
	protobuf_c_message_free_unpacked(&a->base, NULL);

	/* Many elements: the arrays grow correctly. */
	char *big = malloc(400000);
	size_t n = 0;
	for (int i = 0; i < 5000; i++)
		n += (size_t)sprintf(big + n, "ri32: %d rs: \"s%d\" rnode { v: %d }\n",
				     i, i, -i);
	a = (Vptest__AllTypes *)parse_ok(AT_DESC, big);
	assert_int_equal(a->n_ri32, 5000);
	assert_int_equal(a->n_rs, 5000);
	assert_int_equal(a->n_rnode, 5000);
	assert_int_equal(a->ri32[4999], 4999);
	assert_string_equal(a->rs[1234], "s1234");
	assert_int_equal(a->rnode[4321]->v, -4321);
	assert_round_trip(&a->base);
	protobuf_c_message_free_unpacked(&a->base, NULL);

	/* An error after many elements frees everything (ASan checks). */
	strcpy(big + n, "rnode { v: x }\n");
	char want[128];
	snprintf(want, sizeof(want),
		 "t.cfg:5001:12: field 'rnode.v': expected a number, got 'x'");
	parse_err(AT_DESC, big, want);
	free(big);
}

static void test_oneof(void **state)
{
	(void)state;
	Vptest__AllTypes *a =
		(Vptest__AllTypes *)parse_ok(AT_DESC, "one_str: \"hello\"");
	assert_int_equal(a->choice_case, VPTEST__ALL_TYPES__CHOICE_ONE_STR);
	assert_string_equal(a->one_str, "hello");
	assert_round_trip(&a->base);
	protobuf_c_message_free_unpacked(&a->base, NULL);

	a = (Vptest__AllTypes *)parse_ok(AT_DESC, "one_node { v: 9 }");
	assert_int_equal(a->choice_case, VPTEST__ALL_TYPES__CHOICE_ONE_NODE);
	assert_int_equal(a->one_node->v, 9);
	assert_round_trip(&a->base);
	protobuf_c_message_free_unpacked(&a->base, NULL);

	a = (Vptest__AllTypes *)parse_ok(AT_DESC, "one_bytes: \"\\001\"");
	assert_int_equal(a->choice_case, VPTEST__ALL_TYPES__CHOICE_ONE_BYTES);
	assert_int_equal(a->one_bytes.len, 1);
	assert_round_trip(&a->base);
	protobuf_c_message_free_unpacked(&a->base, NULL);

	parse_err(AT_DESC, "one_str: \"a\"\none_int: 5",
		  "t.cfg:2:1: field 'one_int': oneof already set by field "
		  "'one_str'");
	parse_err(AT_DESC, "one_node { v: 1 } one_str: \"leak?\"",
		  "t.cfg:1:19: field 'one_str': oneof already set by field "
		  "'one_node'");
	parse_err(AT_DESC, "one_int: 1 one_int: 2",
		  "t.cfg:1:12: field 'one_int': given twice");
}

/* Builds "child { " x depth, "v: 1", " }" x depth. */
static char *nested(int depth, bool close)
{
	char *s = malloc((size_t)depth * 12 + 16);
	size_t n = 0;
	for (int i = 0; i < depth; i++)
		n += (size_t)sprintf(s + n, "child { ");
	n += (size_t)sprintf(s + n, "v: 1");
	for (int i = 0; close && i < depth; i++)
		n += (size_t)sprintf(s + n, " }");
	return s;
}

static void test_nesting_limit(void **state)
{
	(void)state;
	char *s = nested(VP_TEXTPROTO_MAX_DEPTH, true);
	Vptest__Node *node = (Vptest__Node *)parse_ok(NODE_DESC, s);
	Vptest__Node *p = node;
	for (int i = 0; i < VP_TEXTPROTO_MAX_DEPTH; i++)
		p = p->child;
	assert_true(p->has_v);
	assert_null(p->child);
	assert_round_trip(&node->base);
	protobuf_c_message_free_unpacked(&node->base, NULL);
	free(s);

	/* One level more: rejected at the brace that opens it. */
	s = nested(VP_TEXTPROTO_MAX_DEPTH + 1, true);
	ProtobufCMessage *m;
	struct vp_error err;
	assert_int_equal(vp_textproto_parse(NODE_DESC, s, strlen(s), "deep", &m,
					    &err), -1);
	assert_null(m);
	char want[32];
	snprintf(want, sizeof(want), "deep:1:%d: field 'child.",
		 VP_TEXTPROTO_MAX_DEPTH * 8 + 7);
	assert_memory_equal(err.msg, want, strlen(want));
	/* The middle of the 101-field path is elided to keep it short. */
	assert_non_null(strstr(err.msg, ".child...child."));
	assert_non_null(strstr(err.msg, ".child': nesting deeper than 100 "
					"levels"));
	assert_true(strlen(err.msg) < 300);
	free(s);

	/* A huge unclosed nesting fails the same way, without recursing. */
	s = nested(100000, false);
	assert_int_equal(vp_textproto_parse(NODE_DESC, s, strlen(s), "deep", &m,
					    &err), -1);
	assert_non_null(strstr(err.msg, "nesting deeper than 100 levels"));
	free(s);

	/* Unclosed but within the limit: end of input. */
	s = nested(3, false);
	parse_err(NODE_DESC, s,
		  "t.cfg:1:29: field 'child.child.child': unexpected end of "
		  "input (missing '}')");
	free(s);
}

static void test_proto3(void **state)
{
	(void)state;
	Vptest3__P3 *p = (Vptest3__P3 *)parse_ok(
		&vptest3__p3__descriptor,
		"a: 0 s: \"x\" b: \"\\377\" r: [1,2] sub { a: 5 sub {} } d: 0.5 "
		"flag: true");
	assert_int_equal(p->a, 0);
	assert_string_equal(p->s, "x");
	assert_int_equal(p->b.len, 1);
	assert_int_equal(p->n_r, 2);
	assert_int_equal(p->sub->a, 5);
	assert_non_null(p->sub->sub);
	char *text = vp_textproto_print(&p->base);
	/* Zero scalars are not printed in proto3; messages always are. */
	assert_string_equal(text, "s: \"x\"\n"
				  "b: \"\\377\"\n"
				  "r: 1\n"
				  "r: 2\n"
				  "sub {\n"
				  "  a: 5\n"
				  "  sub {\n"
				  "  }\n"
				  "}\n"
				  "d: 0.5\n"
				  "flag: true\n");
	free(text);
	assert_round_trip(&p->base);
	protobuf_c_message_free_unpacked(&p->base, NULL);
	parse_err(&vptest3__p3__descriptor, "a: 1 a: 1",
		  "t.cfg:1:6: field 'a': given twice");
}

/* Messages unpacked from the wire (not built by the parser) print too. */
static void test_print_unpacked(void **state)
{
	(void)state;
	Perfetto__Protos__TraceConfig tc = PERFETTO__PROTOS__TRACE_CONFIG__INIT;
	Perfetto__Protos__TraceConfig__BufferConfig buf =
		PERFETTO__PROTOS__TRACE_CONFIG__BUFFER_CONFIG__INIT;
	Perfetto__Protos__TraceConfig__BufferConfig *bufs[] = {&buf};
	buf.has_size_kb = 1;
	buf.size_kb = 4096;
	tc.n_buffers = 1;
	tc.buffers = bufs;
	tc.has_duration_ms = 1;
	tc.duration_ms = 3000;
	tc.unique_session_name = "s\tq";
	char *text = vp_textproto_print(&tc.base);
	assert_string_equal(text, "buffers {\n  size_kb: 4096\n}\n"
				  "duration_ms: 3000\n"
				  "unique_session_name: \"s\\tq\"\n");
	free(text);
	assert_round_trip(&tc.base);
}

/* Raw bytes print as Perfetto's processor prints them: wire order, types
 * from the descriptor, unknown fields by number, packed arrays a line per
 * value, bytes that do not parse as a comment. */
static void test_print_wire(void **state)
{
	(void)state;
	static const uint8_t wire[] = {
		0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
		0x01,                   /* i32: -1 */
		0x28, 0x03,             /* s32: zigzag 3 */
		0x70, 0x02, 0x70, 0x07, /* color: BLUE, then no such value */
		0x61, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xf8, 0x3f, /* db */
		0x7a, 0x03, 0x61, 0x27, 0x01,        /* s: "a'\1" */
		0xd2, 0x01, 0x02, 0x10, 0x03,        /* rnode { v: 3 } */
		0xa2, 0x01, 0x02, 0x01, 0x02,        /* ri32, packed [1, 2] */
		0x98, 0x06, 0x05,                    /* 99: varint */
		0xa5, 0x06, 0x2a, 0x00, 0x00, 0x00,  /* 100: fixed32 */
		0xaa, 0x06, 0x02, 0x68, 0x69,        /* 101: "hi" */
		0x82, 0x01, 0x05, 0x7a,              /* by: cut short */
	};
	char *text = vp_textproto_print_wire(AT_DESC, wire, sizeof(wire));
	assert_string_equal(text, "i32: -1\n"
				  "s32: -2\n"
				  "color: BLUE\n"
				  "14: 7\n"
				  "db: 1.500000\n"
				  "s: \"a\\'\\001\"\n"
				  "rnode {\n  v: 3\n}\n"
				  "ri32: 1\n"
				  "ri32: 2\n"
				  "99: 5\n"
				  "100: 0x0000002a\n"
				  "101: \"hi\"\n"
				  "# Extra bytes: \"\\202\\001\\005z\"\n");
	free(text);
	text = vp_textproto_print_wire(AT_DESC, wire, 0);
	assert_string_equal(text, "");
	free(text);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_realistic_config),
		cmocka_unit_test(test_print_format),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_scalars),
		cmocka_unit_test(test_repeated_messages),
		cmocka_unit_test(test_oneof),
		cmocka_unit_test(test_nesting_limit),
		cmocka_unit_test(test_proto3),
		cmocka_unit_test(test_print_unpacked),
		cmocka_unit_test(test_print_wire),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
