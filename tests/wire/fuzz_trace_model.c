/*
 * fuzz_trace_model.c - libFuzzer target: the trace model on arbitrary
 * packets.  The input is a trace (its TracePacket fields; other fields
 * and what follows malformed bytes are skipped); the packets go through
 * both decodes, which must agree,
 * their fields are walked (each inside the packet), all on one sequence
 * state whose counts must stay consistent, and every ClockSnapshot is
 * read clock by clock.
 */
#include <stdint.h>
#include <string.h>

#include "pb_wire.h"
#include "trace_model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(bool ok)
{
	if (!ok)
		__builtin_trap();
}

static void one_packet(struct vp_seq_state *st, const uint8_t *pkt,
		       size_t len)
{
	static struct vp_packet p, q; /* large: not on the stack */
	bool ok = vp_packet_decode(&p, pkt, len);

	check(vp_packet_envelope(&q, pkt, len) == ok);
	check(p.err == q.err && p.err_off == q.err_off);
	if (!ok) {
		check(p.err_off <= len);
		return;
	}
	check(p.ts == q.ts && p.seq_id == q.seq_id &&
	      p.clears_state == q.clears_state &&
	      p.payload_num == q.payload_num);
	/* both walks see the same fields, each inside the packet */
	struct pb_reader r1, r2;
	struct pb_field s1, s2;
	const struct pb_field *f1, *f2;
	size_t i = 0, j = 0, n = 0;
	while (vp_packet_field(&p, &i, &r1, &s1, &f1)) {
		check(vp_packet_field(&q, &j, &r2, &s2, &f2));
		check(f1->num == f2->num && f1->start == f2->start &&
		      f1->end == f2->end);
		check(f1->start >= pkt && f1->end <= pkt + len);
		n++;
	}
	check(!vp_packet_field(&q, &j, &r2, &s2, &f2));
	check(n == p.n_fields);

	uint64_t before = st->packets;
	unsigned ev = vp_seq_update(st, &p);
	check(st->packets == before + 1);
	check(st->skipped <= st->packets && st->losses < st->packets);
	check(!(ev & VP_SEQ_SKIP) || !st->valid);
	check(!(ev & VP_SEQ_CLEARED) || p.clears_state);

	if (p.snapshot.data) {
		struct vp_snapshot_iter it;
		struct vp_clock_reading c;
		vp_snapshot_begin(&it, p.snapshot.data, p.snapshot.len);
		while (vp_snapshot_next(&it, &c))
			;
		check(!it.bad || it.bad->err != PB_OK);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct vp_seq_state st;
	struct pb_reader r;
	struct pb_field f;

	memset(&st, 0, sizeof(st));
	pb_reader_init(&r, data, size);
	while (pb_next(&r, &f))
		if (f.num == 1 && f.wt == PB_WT_LEN)
			one_packet(&st, f.data, f.len);
	return 0;
}
