/*
 * tp_clock.c - per-machine clock graphs and conversion to trace time
 * (tp_clock.h).
 *
 * For every ordered pair of clocks that appeared in one snapshot there is
 * an edge holding the (from, to) readings of each such snapshot, sorted by
 * `from`.  Converting looks for the shortest path from the source clock to
 * the trace clock (breadth-first; paths are cached per source clock) and
 * on each hop adds the offset of the latest snapshot at or before the
 * value.
 */
#include "tp_clock.h"

#include <stdlib.h>
#include <string.h>

#include "perfetto_fields.h"
#include "u64map.h"
#include "vp_alloc.h"

#define MAX_PATH 16

struct reading_pair {
	int64_t from, to;
};

struct edge {
	uint64_t from, to;
	struct reading_pair *v;
	uint32_t n, cap;
	bool sorted;
};

struct machine_clocks {
	uint32_t machine;
	uint64_t trace_clock;
	bool trace_clock_used;
	bool other_clock_converted; /* a clock other than the trace clock */
	uint32_t snapshots;
	struct edge *edges;
	uint32_t nedges, capedges;
	struct u64map edge_of;   /* from << 32 ^ to hash -> edge index + 1 */
	struct u64map path_of;   /* source clock -> path index + 1 */
	struct {
		uint32_t hops[MAX_PATH]; /* edge indices */
		uint32_t n;
		bool ok;
	} *paths;
	uint32_t npaths, cappaths;
	uint64_t path_gen; /* snapshots when paths were computed */
};

struct tp_clocks {
	struct machine_clocks *m;
	uint32_t n, cap;
	/* snapshot ids: one count for every machine of the trace, as
	 * Perfetto's clock tracker has */
	uint32_t next_snapshot_id;
};

struct tp_clocks *tp_clocks_new(void)
{
	struct tp_clocks *c = vp_xcalloc(1, sizeof(*c));
	return c;
}

void tp_clocks_free(struct tp_clocks *c)
{
	if (!c)
		return;
	for (uint32_t i = 0; i < c->n; i++) {
		struct machine_clocks *m = &c->m[i];
		for (uint32_t e = 0; e < m->nedges; e++)
			free(m->edges[e].v);
		free(m->edges);
		free(m->paths);
		u64map_free(&m->edge_of);
		u64map_free(&m->path_of);
	}
	free(c->m);
	free(c);
}

uint64_t tp_clock_seq_scoped(uint32_t seq, uint32_t clock_id)
{
	if (clock_id >= 64 && clock_id <= 127)
		return (uint64_t)seq << 32 | clock_id;
	return clock_id;
}

static struct machine_clocks *machine_get(struct tp_clocks *c, uint32_t machine)
{
	for (uint32_t i = 0; i < c->n; i++)
		if (c->m[i].machine == machine)
			return &c->m[i];
	if (c->n == c->cap) {
		c->cap = c->cap ? c->cap * 2 : 4;
		c->m = vp_xrealloc(c->m, c->cap * sizeof(*c->m));
	}
	struct machine_clocks *m = &c->m[c->n++];
	memset(m, 0, sizeof(*m));
	m->machine = machine;
	m->trace_clock = BUILTIN_CLOCK_BOOTTIME;
	u64map_init(&m->edge_of);
	u64map_init(&m->path_of);
	return m;
}

static uint64_t edge_key(uint64_t from, uint64_t to)
{
	/* ids are < 2^40 in practice (seq << 32 | 127); fold both in */
	return from * 0x9e3779b97f4a7c15ull ^ (to + 0x7f4a7c15ull) * 31;
}

static struct edge *edge_get(struct machine_clocks *m, uint64_t from,
			     uint64_t to, bool create)
{
	uint64_t k = edge_key(from, to), v;
	/* Collisions of the folded key are resolved by probing k+1 ... */
	for (;; k++) {
		if (!u64map_get(&m->edge_of, k, &v))
			break;
		struct edge *e = &m->edges[v - 1];
		if (e->from == from && e->to == to)
			return e;
	}
	if (!create)
		return NULL;
	if (m->nedges == m->capedges) {
		m->capedges = m->capedges ? m->capedges * 2 : 16;
		m->edges = vp_xrealloc(m->edges, m->capedges * sizeof(*m->edges));
	}
	struct edge *e = &m->edges[m->nedges++];
	memset(e, 0, sizeof(*e));
	e->from = from;
	e->to = to;
	e->sorted = true;
	u64map_put(&m->edge_of, k, m->nedges);
	return e;
}

static void edge_add(struct edge *e, int64_t from, int64_t to)
{
	if (e->n == e->cap) {
		e->cap = e->cap ? e->cap * 2 : 4;
		e->v = vp_xrealloc(e->v, e->cap * sizeof(*e->v));
	}
	if (e->n && from < e->v[e->n - 1].from)
		e->sorted = false;
	e->v[e->n++] = (struct reading_pair){from, to};
}

static int pair_cmp(const void *a, const void *b)
{
	const struct reading_pair *x = a, *y = b;
	return x->from < y->from ? -1 : x->from > y->from;
}

uint32_t tp_clock_add_snapshot(struct tp_clocks *c, uint32_t machine,
			       const struct tp_clock_reading *r, unsigned n)
{
	struct machine_clocks *m = machine_get(c, machine);
	for (unsigned i = 0; i < n; i++)
		for (unsigned j = 0; j < n; j++)
			if (i != j && r[i].clock_id != r[j].clock_id)
				edge_add(edge_get(m, r[i].clock_id, r[j].clock_id,
						  true),
					 r[i].ts_ns, r[j].ts_ns);
	/* New edges may open shorter paths. */
	u64map_clear(&m->path_of);
	m->npaths = 0;
	m->snapshots++;
	return c->next_snapshot_id++;
}

bool tp_clock_set_trace_clock(struct tp_clocks *c, uint32_t machine,
			      uint64_t clock_id)
{
	struct machine_clocks *m = machine_get(c, machine);
	if (m->trace_clock == clock_id)
		return true;
	if (m->trace_clock_used)
		return false;
	m->trace_clock = clock_id;
	u64map_clear(&m->path_of);
	m->npaths = 0;
	return true;
}

bool tp_clock_other_converted(const struct tp_clocks *c, uint32_t machine)
{
	for (uint32_t i = 0; i < c->n; i++)
		if (c->m[i].machine == machine)
			return c->m[i].other_clock_converted;
	return false;
}

uint64_t tp_clock_trace_clock(const struct tp_clocks *c, uint32_t machine)
{
	for (uint32_t i = 0; i < c->n; i++)
		if (c->m[i].machine == machine)
			return c->m[i].trace_clock;
	return BUILTIN_CLOCK_BOOTTIME;
}

/* Breadth-first search from src to the trace clock over the edges. */
static uint32_t path_find(struct machine_clocks *m, uint64_t src)
{
	uint64_t v;
	if (u64map_get(&m->path_of, src, &v))
		return (uint32_t)(v - 1);
	if (m->npaths == m->cappaths) {
		m->cappaths = m->cappaths ? m->cappaths * 2 : 8;
		m->paths = vp_xrealloc(m->paths, m->cappaths * sizeof(*m->paths));
	}
	uint32_t pi = m->npaths++;
	m->paths[pi].n = 0;
	m->paths[pi].ok = false;
	u64map_put(&m->path_of, src, pi + 1);

	/* Nodes are visited through edges; prev[e] = edge that reached
	 * e->from's node.  Small graphs: quadratic is fine. */
	uint32_t ne = m->nedges;
	int32_t *via = vp_xmalloc((ne + 1) * sizeof(*via));      /* edge -> prev edge */
	uint32_t *queue = vp_xmalloc((ne + 1) * sizeof(*queue)); /* edges */
	uint8_t *seen = vp_xcalloc(ne + 1, 1);
	uint32_t qh = 0, qt = 0;
	for (uint32_t e = 0; e < ne; e++)
		if (m->edges[e].from == src) {
			via[e] = -1;
			seen[e] = 1;
			queue[qt++] = e;
		}
	int32_t found = -1;
	while (qh < qt && found < 0) {
		uint32_t e = queue[qh++];
		uint64_t node = m->edges[e].to;
		if (node == m->trace_clock) {
			found = (int32_t)e;
			break;
		}
		for (uint32_t f = 0; f < ne; f++)
			if (!seen[f] && m->edges[f].from == node &&
			    m->edges[f].to != src) {
				seen[f] = 1;
				via[f] = (int32_t)e;
				queue[qt++] = f;
			}
	}
	if (found >= 0) {
		uint32_t hops[MAX_PATH], nh = 0;
		for (int32_t e = found; e >= 0 && nh < MAX_PATH; e = via[e])
			hops[nh++] = (uint32_t)e;
		for (uint32_t i = 0; i < nh; i++)
			m->paths[pi].hops[i] = hops[nh - 1 - i];
		m->paths[pi].n = nh;
		m->paths[pi].ok = nh < MAX_PATH;
	}
	free(via);
	free(queue);
	free(seen);
	return pi;
}

static bool hop(struct edge *e, int64_t ts, int64_t *out)
{
	if (!e->n)
		return false;
	if (!e->sorted) {
		qsort(e->v, e->n, sizeof(*e->v), pair_cmp);
		e->sorted = true;
	}
	uint32_t lo = 0, hi = e->n; /* last reading with from <= ts */
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (e->v[mid].from <= ts)
			lo = mid + 1;
		else
			hi = mid;
	}
	const struct reading_pair *p = &e->v[lo ? lo - 1 : 0];
	int64_t d, r;
	if (__builtin_sub_overflow(ts, p->from, &d) ||
	    __builtin_add_overflow(p->to, d, &r))
		return false;
	*out = r;
	return true;
}

bool tp_clock_to_trace(struct tp_clocks *c, uint32_t machine,
		       uint64_t clock_id, int64_t ts, int64_t *out)
{
	struct machine_clocks *m = machine_get(c, machine);
	m->trace_clock_used = true;
	/* Only the trace clock itself needs no snapshot: any other clock
	 * fails until a snapshot links it, as in Perfetto's converter. */
	if (clock_id == m->trace_clock) {
		*out = ts;
		return true;
	}
	m->other_clock_converted = true;
	uint32_t pi = path_find(m, clock_id);
	if (!m->paths[pi].ok)
		return false;
	for (uint32_t i = 0; i < m->paths[pi].n; i++)
		if (!hop(&m->edges[m->paths[pi].hops[i]], ts, &ts))
			return false;
	*out = ts;
	return true;
}

/* Whether a snapshot of the machine named the clock. */
static bool clock_known(const struct machine_clocks *m, uint64_t clock_id)
{
	for (uint32_t e = 0; e < m->nedges; e++)
		if (m->edges[e].from == clock_id || m->edges[e].to == clock_id)
			return true;
	return false;
}

const char *tp_clock_failure_stat(struct tp_clocks *c, uint32_t machine,
				  uint64_t clock_id)
{
	struct machine_clocks *m = machine_get(c, machine);
	if (!clock_known(m, clock_id))
		return "clock_sync_failure_unknown_source_clock";
	if (!clock_known(m, m->trace_clock))
		return "clock_sync_failure_unknown_target_clock";
	return "clock_sync_failure_no_path";
}
