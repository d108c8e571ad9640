/*
 * tb_bench.c - throughput of the trace buffer, the service's hot path.
 *
 * 4 KiB chunks (a 4 KiB page with one chunk) full of ~100-byte packets,
 * from 4 sequences, go through a 64 MiB ring buffer: copy_chunk alone,
 * then copy_chunk + read_packet of every packet.  For scale, a plain
 * memcpy of the same bytes into a 64 MiB area runs in the same process.
 *
 *   tb_bench [MiB to push, default 2048]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "shm_abi.h"
#include "trace_buffer.h"

#define CHUNK_SIZE 4088u /* (4096 - page header) / 1 */
#define N_SEQ 4u
#define N_TEMPLATES 32u /* distinct chunks per sequence */
#define RING_SIZE (64u << 20)
#define BATCH 2048u /* chunks copied between read passes (8 MiB) */

static uint8_t templates[N_SEQ][N_TEMPLATES][CHUNK_SIZE];
static unsigned packets_per_template[N_SEQ][N_TEMPLATES];

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Fills one chunk with whole packets of 90-110 bytes, the last one sized
 * to the room left. */
static unsigned fill_chunk(uint8_t *c, uint16_t writer, uint32_t *rng)
{
	size_t off = VP_SMB_CHUNK_HEADER_SIZE;
	unsigned count = 0;

	memset(c, 0, CHUNK_SIZE);
	c[4] = (uint8_t)writer;
	while (CHUNK_SIZE - off > VP_FRAGMENT_LEN_SIZE) {
		*rng = *rng * 1103515245u + 12345u;
		size_t len = 90 + (*rng >> 16) % 21;
		size_t room = CHUNK_SIZE - off - VP_FRAGMENT_LEN_SIZE;
		if (len > room || room - len < 100)
			len = room;
		vp_write_redundant_varint(c + off, (uint32_t)len);
		memset(c + off + VP_FRAGMENT_LEN_SIZE, 0x40 + (int)count % 26,
		       len);
		off += VP_FRAGMENT_LEN_SIZE + len;
		count++;
	}
	uint16_t w = vp_chunk_packets_word(count, 0);
	c[6] = (uint8_t)w;
	c[7] = (uint8_t)(w >> 8);
	return count;
}

static void set_chunk_id(uint8_t *c, uint32_t id)
{
	c[0] = (uint8_t)id;
	c[1] = (uint8_t)(id >> 8);
	c[2] = (uint8_t)(id >> 16);
	c[3] = (uint8_t)(id >> 24);
}

static const struct vp_tb_sequence_meta meta = {1, 0, 100, 0};

/* Copies chunk n of the stream (sequences take turns). */
static void copy_nth(struct vp_trace_buffer *tb, uint64_t n)
{
	unsigned s = (unsigned)(n % N_SEQ);
	uint32_t id = (uint32_t)(n / N_SEQ);
	uint8_t *c = templates[s][id % N_TEMPLATES];
	set_chunk_id(c, id);
	vp_trace_buffer_copy_chunk(tb, 1, &meta, c, CHUNK_SIZE, true);
}

static double bench_memcpy(uint64_t n_chunks)
{
	uint8_t *dst = malloc(RING_SIZE);
	memset(dst, 0, RING_SIZE);
	size_t off = 0;
	double t0 = now();
	for (uint64_t n = 0; n < n_chunks; n++) {
		if (RING_SIZE - off < CHUNK_SIZE)
			off = 0;
		memcpy(dst + off, templates[n % N_SEQ][(n / N_SEQ) % N_TEMPLATES],
		       CHUNK_SIZE);
		off += CHUNK_SIZE;
	}
	double t = now() - t0;
	volatile uint8_t sink = dst[off / 2];
	(void)sink;
	free(dst);
	return t;
}

static struct vp_trace_buffer *new_ring(void)
{
	struct vp_trace_buffer *tb;
	struct vp_error err;
	if (vp_trace_buffer_new(&tb, RING_SIZE, VP_FILL_RING_BUFFER, &err)) {
		fprintf(stderr, "tb_bench: %s\n", err.msg);
		exit(1);
	}
	return tb;
}

static double bench_copy(uint64_t n_chunks)
{
	struct vp_trace_buffer *tb = new_ring();
	double t0 = now();
	for (uint64_t n = 0; n < n_chunks; n++)
		copy_nth(tb, n);
	double t = now() - t0;
	vp_trace_buffer_free(tb);
	return t;
}

static double bench_copy_read(uint64_t n_chunks, uint64_t *packets,
			      uint64_t *dropped)
{
	struct vp_trace_buffer *tb = new_ring();
	struct pb_buf out;
	struct vp_tb_packet_info info;

	pb_buf_init(&out);
	*packets = *dropped = 0;
	double t0 = now();
	for (uint64_t n = 0; n < n_chunks;) {
		for (unsigned b = 0; b < BATCH && n < n_chunks; b++, n++)
			copy_nth(tb, n);
		vp_trace_buffer_begin_read(tb);
		for (;;) {
			out.len = 0;
			if (vp_trace_buffer_read_packet(tb, &out, &info) != 1)
				break;
			(*packets)++;
			*dropped += info.previous_packet_dropped;
		}
	}
	double t = now() - t0;
	pb_buf_free(&out);
	vp_trace_buffer_free(tb);
	return t;
}

int main(int argc, char **argv)
{
	uint64_t mib = argc > 1 ? strtoull(argv[1], NULL, 10) : 2048;
	uint64_t n_chunks = (mib << 20) / CHUNK_SIZE;
	uint64_t expect = 0;
	uint32_t rng = 1;

	if (!n_chunks) {
		fprintf(stderr, "usage: tb_bench [MiB]\n");
		return 2;
	}
	for (unsigned s = 0; s < N_SEQ; s++)
		for (unsigned t = 0; t < N_TEMPLATES; t++)
			packets_per_template[s][t] = fill_chunk(
				templates[s][t], (uint16_t)(s + 1), &rng);
	for (uint64_t n = 0; n < n_chunks; n++)
		expect += packets_per_template[n % N_SEQ]
					      [(n / N_SEQ) % N_TEMPLATES];

	double bytes = (double)n_chunks * CHUNK_SIZE;
	double t_mem = bench_memcpy(n_chunks);
	double t_copy = bench_copy(n_chunks);
	uint64_t packets, dropped;
	double t_cr = bench_copy_read(n_chunks, &packets, &dropped);

	printf("tb_bench: %.0f MiB in %llu chunks of %u bytes, %llu packets "
	       "(~%.0f bytes each), 4 sequences, 64 MiB ring\n",
	       bytes / (1 << 20), (unsigned long long)n_chunks, CHUNK_SIZE,
	       (unsigned long long)expect, bytes / (double)expect);
	printf("  memcpy           %8.0f MB/s\n", bytes / t_mem / 1e6);
	printf("  copy_chunk       %8.0f MB/s\n", bytes / t_copy / 1e6);
	printf("  copy + read      %8.0f MB/s  (%.1f M packets/s)\n",
	       bytes / t_cr / 1e6, (double)packets / t_cr / 1e6);
	if (packets != expect || dropped) {
		fprintf(stderr, "tb_bench: read %llu packets of %llu, %llu "
			"flagged dropped\n", (unsigned long long)packets,
			(unsigned long long)expect,
			(unsigned long long)dropped);
		return 1;
	}
	return 0;
}
