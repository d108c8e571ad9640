/*
 * cmd_config.c - building the TraceConfig of a vperfetto run (see
 * cmd_config.h): config files, light-mode shorthands, -t / -b.
 */
#include "cmd_config.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "textproto.h"
#include "vp_alloc.h"

typedef Perfetto__Protos__TraceConfig__BufferConfig buffer_config;
typedef Perfetto__Protos__TraceConfig__DataSource data_source;
typedef Perfetto__Protos__DataSourceConfig ds_config;

/* ---- -t and -b ---------------------------------------------------------- */

struct unit {
	const char *name;
	uint64_t mult;
};

/* "<digits><unit>" with unit from units[] (or none, meaning bare_mult;
 * 0 means a unit is required).  Result must fit in uint32. */
static int parse_with_unit(const char *s, const struct unit *units,
			   uint64_t bare_mult, const char *what, uint32_t *out,
			   struct vp_error *err)
{
	const char *p = s;
	uint64_t v = 0;

	if (!isdigit((unsigned char)*p))
		return vp_errorf(err, "%s '%s': expected a number", what, s);
	while (isdigit((unsigned char)*p)) {
		if (v > (UINT32_MAX * 10ull))
			return vp_errorf(err, "%s '%s': too large", what, s);
		v = v * 10 + (uint64_t)(*p++ - '0');
	}
	uint64_t mult = bare_mult;
	if (*p) {
		mult = 0;
		for (const struct unit *u = units; u->name; u++)
			if (strcasecmp(p, u->name) == 0)
				mult = u->mult;
		if (!mult) {
			char list[128] = "";
			for (const struct unit *u = units; u->name; u++)
				snprintf(list + strlen(list),
					 sizeof(list) - strlen(list), "%s%s",
					 u == units ? "" : ", ", u->name);
			return vp_errorf(err, "%s '%s': unknown unit '%s' (use %s)",
					 what, s, p, list);
		}
	} else if (!mult) {
		return vp_errorf(err, "%s '%s': give a unit (e.g. 32mb)", what,
				 s);
	}
	if (v > UINT32_MAX / mult)
		return vp_errorf(err, "%s '%s': too large", what, s);
	*out = (uint32_t)(v * mult);
	return 0;
}

int vp_cmd_parse_duration(const char *s, uint32_t *ms, struct vp_error *err)
{
	static const struct unit units[] = {
		{"ms", 1}, {"s", 1000}, {"m", 60000}, {"h", 3600000}, {NULL, 0},
	};
	return parse_with_unit(s, units, 1000, "duration", ms, err);
}

int vp_cmd_parse_size(const char *s, uint32_t *kb, struct vp_error *err)
{
	static const struct unit units[] = {
		{"kb", 1}, {"k", 1}, {"mb", 1024}, {"m", 1024},
		{"gb", 1024 * 1024}, {"g", 1024 * 1024}, {NULL, 0},
	};
	if (parse_with_unit(s, units, 0, "buffer size", kb, err) < 0)
		return -1;
	if (*kb == 0)
		return vp_errorf(err, "buffer size '%s': must not be 0", s);
	return 0;
}

/* ---- config files ------------------------------------------------------- */

/* Reads all of fd (at most VP_CMD_MAX_CONFIG bytes). */
static int read_all(int fd, const char *name, char **out, size_t *len,
		    struct vp_error *err)
{
	size_t cap = 4096, n = 0;
	char *buf = malloc(cap);

	if (!buf)
		return vp_errorf(err, "%s: out of memory", name);
	for (;;) {
		if (n == cap) {
			if (cap >= VP_CMD_MAX_CONFIG) {
				free(buf);
				return vp_errorf(err, "%s: config larger than "
						 "%u bytes", name,
						 VP_CMD_MAX_CONFIG);
			}
			char *grown = realloc(buf, cap * 2);
			if (!grown) {
				free(buf);
				return vp_errorf(err, "%s: out of memory", name);
			}
			buf = grown;
			cap *= 2;
		}
		ssize_t r = read(fd, buf + n, cap - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			int e = errno;
			free(buf);
			return vp_errorf(err, "%s: read: %s", name, strerror(e));
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	*out = buf;
	*len = n;
	return 0;
}

/* A binary config that fails to decode but reads as text: suggest --txt. */
static bool looks_like_text(const char *buf, size_t len)
{
	size_t printable = 0;
	for (size_t i = 0; i < len; i++)
		if (isprint((unsigned char)buf[i]) || isspace((unsigned char)buf[i]))
			printable++;
	return len > 0 && printable == len;
}

int vp_cmd_load_config(const char *path, bool txt, vp_trace_config **out,
		       struct vp_error *err)
{
	bool is_stdin = strcmp(path, "-") == 0;
	const char *name = is_stdin ? "<stdin>" : path;
	int fd = is_stdin ? 0 : open(path, O_RDONLY | O_CLOEXEC);
	char *buf = NULL;
	size_t len = 0;

	*out = NULL;
	if (fd < 0)
		return vp_errorf(err, "config %s: %s", path, strerror(errno));
	int r = read_all(fd, name, &buf, &len, err);
	if (!is_stdin)
		close(fd);
	if (r < 0)
		return -1;
	if (txt) {
		ProtobufCMessage *m;
		r = vp_textproto_parse(&perfetto__protos__trace_config__descriptor,
				       buf, len, name, &m, err);
		free(buf);
		*out = (vp_trace_config *)m;
		return r;
	}
	*out = perfetto__protos__trace_config__unpack(NULL, len,
						       (const uint8_t *)buf);
	if (!*out) {
		bool text = looks_like_text(buf, len);
		free(buf);
		return vp_errorf(err, "%s: not a valid binary TraceConfig%s", name,
				 text ? " (it looks like text: use --txt)" : "");
	}
	free(buf);
	return 0;
}

/* ---- building configs --------------------------------------------------- */

static void *new_msg(const ProtobufCMessageDescriptor *desc)
{
	void *m = malloc(desc->sizeof_message);
	if (m)
		protobuf_c_message_init(desc, m);
	return m;
}

/* Appends p to the repeated pointer field (arr, n) of a protobuf-c
 * message (which has no capacity: one element more each time); 0 (out
 * of memory stops the command, base/vp_alloc.h). */
#define PUSH(arr, n, p)                                                      \
	__extension__({                                                      \
		(arr) = vp_xreallocarray((arr), (n) + 1, sizeof(*(arr)));    \
		(arr)[(n)++] = (p);                                          \
		0;                                                           \
	})

/* A new data source named name, appended to tc; its config in *cfg. */
static int add_data_source(vp_trace_config *tc, const char *name,
			   ds_config **cfg)
{
	data_source *ds =
		new_msg(&perfetto__protos__trace_config__data_source__descriptor);
	if (!ds)
		return -1;
	if (PUSH(tc->data_sources, tc->n_data_sources, ds) < 0) {
		free(ds);
		return -1;
	}
	ds->config = new_msg(&perfetto__protos__data_source_config__descriptor);
	if (!ds->config)
		return -1;
	ds->config->name = strdup(name);
	*cfg = ds->config;
	return ds->config->name ? 0 : -1;
}

static int add_buffer(vp_trace_config *tc, uint32_t size_kb)
{
	buffer_config *b =
		new_msg(&perfetto__protos__trace_config__buffer_config__descriptor);
	if (!b)
		return -1;
	b->has_size_kb = 1;
	b->size_kb = size_kb;
	b->has_fill_policy = 1;
	b->fill_policy =
		PERFETTO__PROTOS__TRACE_CONFIG__BUFFER_CONFIG__FILL_POLICY__RING_BUFFER;
	if (PUSH(tc->buffers, tc->n_buffers, b) < 0) {
		free(b);
		return -1;
	}
	return 0;
}

/* Appends each comma-separated, non-empty item of list. */
static int push_list(char ***arr, size_t *n, const char *list)
{
	const char *p = list;
	while (*p) {
		size_t len = strcspn(p, ",");
		if (len > 0) {
			char *item = strndup(p, len);
			if (!item || PUSH(*arr, *n, item) < 0) {
				free(item);
				return -1;
			}
		}
		p += len;
		if (*p == ',')
			p++;
	}
	return 0;
}

static int build_light(vp_trace_config *tc, const char *cats,
		       char *const *events, size_t n_events)
{
	ds_config *c;

	if (add_buffer(tc, 32 * 1024) < 0)
		return -1;
	tc->has_duration_ms = 1;
	tc->duration_ms = 10000;
	if (cats) {
		if (add_data_source(tc, "track_event", &c) < 0)
			return -1;
		c->track_event_config =
			new_msg(&perfetto__protos__track_event_config__descriptor);
		if (!c->track_event_config)
			return -1;
		Perfetto__Protos__TrackEventConfig *te = c->track_event_config;
		if (push_list(&te->enabled_categories,
			      &te->n_enabled_categories, cats) < 0)
			return -1;
	}
	if (n_events == 0)
		return 0;
	if (add_data_source(tc, "linux.ftrace", &c) < 0)
		return -1;
	c->ftrace_config = new_msg(&perfetto__protos__ftrace_config__descriptor);
	if (!c->ftrace_config)
		return -1;
	for (size_t i = 0; i < n_events; i++) {
		Perfetto__Protos__FtraceConfig *fc = c->ftrace_config;
		char *e = strdup(events[i]);
		if (!e || PUSH(fc->ftrace_events, fc->n_ftrace_events, e) < 0) {
			free(e);
			return -1;
		}
	}
	if (add_data_source(tc, "linux.process_stats", &c) < 0)
		return -1;
	c->process_stats_config =
		new_msg(&perfetto__protos__process_stats_config__descriptor);
	if (!c->process_stats_config)
		return -1;
	c->process_stats_config->has_scan_all_processes_on_start = 1;
	c->process_stats_config->scan_all_processes_on_start = 1;
	return 0;
}

int vp_cmd_light_config(const char *track_event_cats, char *const *events,
			size_t n_events, vp_trace_config **out,
			struct vp_error *err)
{
	*out = NULL;
	if (!track_event_cats && n_events == 0)
		return vp_errorf(err, "nothing to trace: give -c CONFIG, "
				 "--track-event CATEGORIES or ftrace events "
				 "(e.g. sched/sched_switch)");
	if (track_event_cats && strspn(track_event_cats, ",") ==
				       strlen(track_event_cats))
		return vp_errorf(err, "--track-event: no categories given");
	for (size_t i = 0; i < n_events; i++) {
		const char *slash = strchr(events[i], '/');
		if (!slash || slash == events[i] || !slash[1] ||
		    strchr(slash + 1, '/'))
			return vp_errorf(err, "'%s': not an ftrace event "
					 "(expected GROUP/NAME, e.g. "
					 "sched/sched_switch)", events[i]);
	}
	vp_trace_config *tc = new_msg(&perfetto__protos__trace_config__descriptor);
	if (!tc || build_light(tc, track_event_cats, events, n_events) < 0) {
		if (tc)
			perfetto__protos__trace_config__free_unpacked(tc, NULL);
		return vp_errorf(err, "out of memory");
	}
	*out = tc;
	return 0;
}

int vp_cmd_override(vp_trace_config *tc, bool set_duration,
		    uint32_t duration_ms, bool set_size, uint32_t size_kb,
		    struct vp_error *err)
{
	if (set_duration) {
		tc->has_duration_ms = 1;
		tc->duration_ms = duration_ms;
	}
	if (!set_size)
		return 0;
	if (tc->n_buffers == 0)
		return add_buffer(tc, size_kb) < 0 ? vp_errorf(err, "out of memory")
						   : 0;
	tc->buffers[0]->has_size_kb = 1;
	tc->buffers[0]->size_kb = size_kb;
	return 0;
}

/* ------------------------------------------------ adjusting a config */

static ds_config *find_data_source(vp_trace_config *tc, const char *name)
{
	for (size_t i = 0; i < tc->n_data_sources; i++) {
		ds_config *c = tc->data_sources[i]->config;
		if (c && c->name && strcmp(c->name, name) == 0)
			return c;
	}
	return NULL;
}

int vp_cmd_ensure_data_source(vp_trace_config *tc, const char *name,
			      struct vp_error *err)
{
	ds_config *c;
	if (find_data_source(tc, name))
		return 0;
	if (add_data_source(tc, name, &c) < 0)
		return vp_errorf(err, "out of memory");
	return 0;
}

int vp_cmd_ensure_category(vp_trace_config *tc, const char *cat,
			   struct vp_error *err)
{
	ds_config *c = find_data_source(tc, "track_event");
	if (!c && add_data_source(tc, "track_event", &c) < 0)
		return vp_errorf(err, "out of memory");
	if (!c->track_event_config) {
		c->track_event_config =
			new_msg(&perfetto__protos__track_event_config__descriptor);
		if (!c->track_event_config)
			return vp_errorf(err, "out of memory");
	}
	Perfetto__Protos__TrackEventConfig *te = c->track_event_config;
	for (size_t i = 0; i < te->n_enabled_categories; i++)
		if (strcmp(te->enabled_categories[i], cat) == 0)
			return 0;
	char *dup = strdup(cat);
	if (!dup || PUSH(te->enabled_categories, te->n_enabled_categories,
			 dup) < 0) {
		free(dup);
		return vp_errorf(err, "out of memory");
	}
	return 0;
}

int vp_cmd_pack_config(const vp_trace_config *tc, uint8_t **buf, size_t *len,
		       struct vp_error *err)
{
	size_t n = perfetto__protos__trace_config__get_packed_size(tc);
	uint8_t *b = malloc(n ? n : 1);
	if (!b)
		return vp_errorf(err, "out of memory");
	*len = perfetto__protos__trace_config__pack(tc, b);
	*buf = b;
	return 0;
}
