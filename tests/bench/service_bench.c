/*
 * service_bench.c - how many MB/s one producer pushes through vtraced into
 * a ring buffer, and what is lost at that rate.  Driven by
 * tests/bench/service_bench.sh, which starts vtraced and the consumer.
 *
 *   service_bench raw PRODUCER_SOCK SECONDS [SMB_KB] [VTRACED_PID]
 *       A raw producer (ipc_client + shm_abi, no SDK: this measures the
 *       service, not the SDK's encoding).  Registers data source
 *       "bench.raw", waits for a session to start it, then for SECONDS
 *       writes 4 KiB chunks (4 KiB pages, one chunk each) full of ~100-byte
 *       packets as fast as the SMB frees chunks, committing them in
 *       batches, and answers flushes until the data source is stopped.
 *       Prints key=value lines: chunks and MB/s committed, producer-side
 *       stalls (chunks it could not get at once), vtraced's CPU time over
 *       the write window (from /proc, when VTRACED_PID is given) and, for
 *       scale, memcpy MB/s of the same bytes.
 *   service_bench stats TRACE
 *       Prints the service's figures from the last trace_stats packet of
 *       TRACE: buffer 0's bytes/chunks written, overwritten, discarded, and
 *       the service-wide chunks_discarded / patches_discarded.
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ipc_client.h"
#include "pb_wire.h"
#include "shm_abi.h"
#include "trace_io.h"

#define BENCH_DS_NAME "bench.raw"
#define BENCH_PAGE_SIZE 4096u
#define BENCH_WRITER 1u
#define BENCH_START_TIMEOUT_MS 20000
#define BENCH_STOP_TIMEOUT_MS 30000

/* GetAsyncCommandResponse fields. */
enum {
	CMD_START_DATA_SOURCE = 1,
	CMD_STOP_DATA_SOURCE = 2,
	CMD_SETUP_TRACING = 3,
	CMD_FLUSH = 5,
	CMD_SETUP_DATA_SOURCE = 6,
};

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- the producer --------------------------------------------------------- */

struct producer {
	struct vp_ipc_client *cli;
	struct vp_smb smb;
	bool has_smb;
	uint64_t instance;
	uint32_t target_buffer;
	bool started, stopped, failed;
	uint64_t flush_req; /* a flush to answer, 0: none */
	/* The commit batch. */
	struct pb_buf commit;
	unsigned batched;
	unsigned batch_max;
};

static uint32_t config_target_buffer(const uint8_t *cfg, size_t len)
{
	struct pb_reader r;
	struct pb_field f;
	uint32_t t = 0;
	pb_reader_init(&r, cfg, len);
	while (pb_next(&r, &f))
		if (f.num == 2 && f.wt == PB_WT_VARINT) /* target_buffer */
			t = (uint32_t)f.val;
	return t;
}

/* Reads {1: id, 2: config} of a setup/start/stop command. */
static void ds_cmd(const uint8_t *p, size_t len, uint64_t *id,
		   uint32_t *target)
{
	struct pb_reader r;
	struct pb_field f;
	pb_reader_init(&r, p, len);
	while (pb_next(&r, &f)) {
		if (f.num == 1 && f.wt == PB_WT_VARINT)
			*id = f.val;
		else if (f.num == 2 && f.wt == PB_WT_LEN && target)
			*target = config_target_buffer(f.data, f.len);
	}
}

static void on_async_command(void *ctx, const struct vp_ipc_reply *rep)
{
	struct producer *pr = ctx;
	struct vp_error err;
	if (!rep->success) {
		pr->failed = true;
		if (rep->fd >= 0)
			close(rep->fd);
		return;
	}
	struct pb_reader r;
	struct pb_field f;
	pb_reader_init(&r, rep->data, rep->len);
	while (pb_next(&r, &f)) {
		if (f.wt != PB_WT_LEN)
			continue;
		uint64_t id = 0;
		uint32_t target = 0;
		switch (f.num) {
		case CMD_SETUP_TRACING:
			if (rep->fd >= 0 && !pr->has_smb) {
				if (vp_smb_map(&pr->smb, rep->fd,
					       BENCH_PAGE_SIZE, &err) < 0)
					fprintf(stderr, "service_bench: %s\n",
						err.msg);
				else
					pr->has_smb = true;
			}
			break;
		case CMD_SETUP_DATA_SOURCE:
		case CMD_START_DATA_SOURCE:
			ds_cmd(f.data, f.len, &id, &target);
			pr->instance = id;
			if (target)
				pr->target_buffer = target;
			if (f.num == CMD_START_DATA_SOURCE)
				pr->started = true;
			break;
		case CMD_STOP_DATA_SOURCE:
			pr->stopped = true;
			break;
		case CMD_FLUSH: {
			struct pb_reader fr;
			struct pb_field ff;
			pb_reader_init(&fr, f.data, f.len);
			while (pb_next(&fr, &ff))
				if (ff.num == 2 && ff.wt == PB_WT_VARINT)
					pr->flush_req = ff.val;
			break;
		}
		}
	}
	if (rep->fd >= 0)
		close(rep->fd);
	if (!rep->has_more)
		pr->failed = true; /* the stream ended: the service is gone */
}

static int call(struct producer *pr, const char *method,
		const struct pb_buf *args)
{
	struct vp_error err;
	uint8_t *reply = NULL;
	size_t reply_len = 0;
	int r = vp_ipc_client_call(pr->cli, method, args->data, args->len,
				   &reply, &reply_len, NULL, 10000, &err);
	free(reply);
	if (r < 0)
		fprintf(stderr, "service_bench: %s: %s\n", method, err.msg);
	return r;
}

static int producer_connect(struct producer *pr, const char *addr,
			    uint32_t smb_kb)
{
	struct vp_error err;
	if (vp_ipc_client_connect(&pr->cli, addr, 5000, &err) < 0 ||
	    vp_ipc_client_bind(pr->cli, "ProducerPort", 5000, &err) < 0) {
		fprintf(stderr, "service_bench: %s\n", err.msg);
		return -1;
	}
	struct pb_buf b;
	pb_buf_init(&b);
	pb_put_varint(&b, 1, BENCH_PAGE_SIZE);
	pb_put_varint(&b, 2, (uint64_t)smb_kb * 1024u);
	pb_put_string(&b, 3, "service_bench");
	int r = call(pr, "InitializeConnection", &b);
	pb_buf_reset(&b);
	size_t d = pb_begin_nested(&b, 1);
	pb_put_string(&b, 1, BENCH_DS_NAME);
	pb_end_nested(&b, d);
	if (r == 0)
		r = call(pr, "RegisterDataSource", &b);
	pb_buf_free(&b);
	if (r == 0 && vp_ipc_client_invoke(pr->cli, "GetAsyncCommand", NULL,
					   0, -1, on_async_command, pr,
					   &err) < 0) {
		fprintf(stderr, "service_bench: %s\n", err.msg);
		r = -1;
	}
	return r;
}

static int producer_poll(struct producer *pr, int timeout_ms)
{
	struct vp_error err;
	if (vp_ipc_client_poll(pr->cli, timeout_ms, &err) < 0) {
		fprintf(stderr, "service_bench: %s\n", err.msg);
		pr->failed = true;
		return -1;
	}
	return pr->failed ? -1 : 0;
}

/* Sends the batched chunks (and a flush ack) in one CommitData. */
static int commit_send(struct producer *pr, uint64_t flush_id)
{
	struct vp_error err;
	if (pr->batched == 0 && flush_id == 0)
		return 0;
	if (flush_id)
		pb_put_varint(&pr->commit, 3, flush_id);
	int r = vp_ipc_client_invoke(pr->cli, "CommitData", pr->commit.data,
				     pr->commit.len, -1, NULL, NULL, &err);
	pb_buf_reset(&pr->commit);
	pr->batched = 0;
	if (r < 0)
		fprintf(stderr, "service_bench: CommitData: %s\n", err.msg);
	return r;
}

static void commit_add(struct producer *pr, const struct vp_smb_chunk *c)
{
	size_t m = pb_begin_nested(&pr->commit, 1);
	pb_put_varint(&pr->commit, 1, c->page);
	pb_put_varint(&pr->commit, 2, c->chunk);
	pb_put_varint(&pr->commit, 3, pr->target_buffer);
	pb_end_nested(&pr->commit, m);
	pr->batched++;
}

/* ---- chunk contents ------------------------------------------------------- */

/* A chunk body (after the header) of whole packets of 90-110 bytes:
 * TracePacket { timestamp 8, for_testing 900 { payload 1 } }. */
static size_t fill_body(uint8_t *body, size_t room, unsigned *count)
{
	uint32_t rng = 12345;
	size_t off = 0;
	*count = 0;
	while (room - off >= VP_FRAGMENT_LEN_SIZE + 40) {
		rng = rng * 1103515245u + 12345u;
		size_t want = 90 + (rng >> 16) % 21;
		size_t left = room - off - VP_FRAGMENT_LEN_SIZE;
		if (left - want < VP_FRAGMENT_LEN_SIZE + 40)
			want = left; /* the last packet takes the rest */
		struct pb_buf p;
		pb_buf_init(&p);
		pb_put_varint(&p, 8, 1000000u + *count);
		/* for_testing: tag (3 bytes) + len (1 byte) + body */
		size_t pay = want - p.len - 3 - 1 - 2 - 1;
		size_t ft = pb_begin_nested(&p, 900);
		uint8_t fill[128];
		memset(fill, 'a' + (int)(*count % 26), sizeof(fill));
		pb_put_bytes(&p, 1, fill, pay < sizeof(fill) ? pay : 0);
		pb_end_nested(&p, ft);
		vp_write_redundant_varint(body + off, (uint32_t)p.len);
		memcpy(body + off + VP_FRAGMENT_LEN_SIZE, p.data, p.len);
		off += VP_FRAGMENT_LEN_SIZE + p.len;
		pb_buf_free(&p);
		(*count)++;
	}
	return off;
}

/* ---- the run --------------------------------------------------------------- */

/* utime + stime of a process, in seconds (-1 if unknown). */
static double proc_cpu_s(long pid)
{
	char path[64], buf[1024];
	if (pid <= 0)
		return -1;
	snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	char *p = strrchr(buf, ')');
	unsigned long ut = 0, st = 0;
	if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u "
			 "%lu %lu", &ut, &st) != 2)
		return -1;
	return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

static double memcpy_mbps(const uint8_t *chunk, size_t size)
{
	size_t area_size = 64u << 20;
	uint8_t *area = malloc(area_size);
	if (!area)
		return 0;
	memset(area, 0, area_size);
	size_t off = 0, total = 0;
	double t0 = now_s(), t;
	do {
		for (int i = 0; i < 4096; i++) {
			if (off + size > area_size)
				off = 0;
			memcpy(area + off, chunk, size);
			off += size;
			total += size;
		}
		t = now_s();
	} while (t - t0 < 1.0);
	volatile uint8_t sink = area[total % area_size];
	(void)sink;
	free(area);
	return (double)total / (t - t0) / 1e6;
}

static int run_raw(const char *addr, double seconds, uint32_t smb_kb,
		   long vtraced_pid)
{
	struct producer pr;
	memset(&pr, 0, sizeof(pr));
	pb_buf_init(&pr.commit);
	if (producer_connect(&pr, addr, smb_kb) < 0)
		return 1;
	double deadline = now_s() + BENCH_START_TIMEOUT_MS / 1000.0;
	while (!(pr.started && pr.has_smb)) {
		if (producer_poll(&pr, 100) < 0 || now_s() > deadline) {
			fprintf(stderr, "service_bench: no session started "
					"%s\n", BENCH_DS_NAME);
			return 1;
		}
	}
	size_t chunk_size = vp_smb_chunk_size(&pr.smb, VP_PAGE_DIV_1);
	size_t room = chunk_size - VP_SMB_CHUNK_HEADER_SIZE;
	uint8_t *body = calloc(1, room);
	unsigned packets;
	size_t body_len = fill_body(body, room, &packets);
	size_t n_chunks = pr.smb.num_pages; /* one per page */
	pr.batch_max = (unsigned)(n_chunks / 4 ? n_chunks / 4 : 1);
	if (pr.batch_max > 64)
		pr.batch_max = 64;

	uint64_t committed = 0, stalled_chunks = 0, stall_waits = 0;
	uint32_t chunk_id = 0, cursor = 0;
	double cpu0 = proc_cpu_s(vtraced_pid);
	double t0 = now_s(), t_end = t0 + seconds, t = t0;
	unsigned iter = 0;
	while (!pr.stopped && !pr.failed) {
		if ((++iter & 63) == 0) {
			t = now_s();
			if (t >= t_end)
				break;
			if (producer_poll(&pr, 0) < 0)
				break;
			if (pr.flush_req) {
				commit_send(&pr, pr.flush_req);
				pr.flush_req = 0;
			}
		}
		struct vp_smb_chunk c;
		bool stalled = false;
		while (!vp_smb_acquire_chunk_for_writing(
			&pr.smb, VP_PAGE_DIV_1, BENCH_WRITER, chunk_id, &cursor,
			&c)) {
			/* The SMB is full: hand the service what we have and
			 * wait for it to free chunks. */
			if (!stalled) {
				stalled = true;
				stalled_chunks++;
				if (commit_send(&pr, 0) < 0)
					goto out;
			}
			stall_waits++;
			if (producer_poll(&pr, 0) < 0)
				goto out;
			sched_yield();
		}
		memcpy(c.begin + VP_SMB_CHUNK_HEADER_SIZE, body, body_len);
		vp_smb_release_chunk_as_complete(&pr.smb, &c, packets, 0);
		chunk_id++;
		committed++;
		commit_add(&pr, &c);
		if (pr.batched >= pr.batch_max && commit_send(&pr, 0) < 0)
			break;
	}
out:
	commit_send(&pr, 0);
	t = now_s();
	double cpu1 = proc_cpu_s(vtraced_pid);
	double elapsed = t - t0;

	/* Answer flushes until the session stops the data source. */
	deadline = now_s() + BENCH_STOP_TIMEOUT_MS / 1000.0;
	while (!pr.stopped && !pr.failed && now_s() < deadline) {
		if (producer_poll(&pr, 50) < 0)
			break;
		if (pr.flush_req) {
			commit_send(&pr, pr.flush_req);
			pr.flush_req = 0;
		}
	}

	double bytes = (double)committed * (double)chunk_size;
	printf("chunk_size %zu\n", chunk_size);
	printf("packets_per_chunk %u\n", packets);
	printf("smb_kb %zu\n", pr.smb.size / 1024);
	printf("batch %u\n", pr.batch_max);
	printf("seconds %.3f\n", elapsed);
	printf("chunks_committed %" PRIu64 "\n", committed);
	printf("bytes_committed %.0f\n", bytes);
	printf("committed_mbps %.1f\n", bytes / elapsed / 1e6);
	printf("stalled_chunks %" PRIu64 "\n", stalled_chunks);
	printf("stall_waits %" PRIu64 "\n", stall_waits);
	if (cpu0 >= 0 && cpu1 >= 0)
		printf("vtraced_cpu_s %.3f\n", cpu1 - cpu0);
	printf("stopped %d\n", pr.stopped ? 1 : 0);
	uint8_t *whole = malloc(chunk_size);
	memset(whole, 0, VP_SMB_CHUNK_HEADER_SIZE);
	memcpy(whole + VP_SMB_CHUNK_HEADER_SIZE, body, body_len);
	printf("memcpy_mbps %.1f\n", memcpy_mbps(whole, chunk_size));
	free(whole);
	free(body);
	pb_buf_free(&pr.commit);
	if (pr.has_smb)
		vp_smb_unmap(&pr.smb);
	vp_ipc_client_close(pr.cli);
	return committed ? 0 : 1;
}

/* ---- reading the service's stats out of a trace ----------------------------- */

static void print_stats(const uint8_t *ts, size_t len)
{
	static const struct {
		uint32_t num;
		const char *name;
	} top[] = {
		{8, "svc_chunks_discarded"},
		{9, "svc_patches_discarded"},
		{10, "svc_invalid_packets"},
		{14, "svc_flushes_failed"},
	},
	  buf[] = {
		  {1, "bytes_written"},
		  {2, "chunks_written"},
		  {3, "chunks_overwritten"},
		  {10, "chunks_rewritten"},
		  {11, "chunks_committed_out_of_order"},
		  {12, "buffer_size"},
		  {13, "bytes_overwritten"},
		  {14, "bytes_read"},
		  {17, "chunks_read"},
		  {18, "chunks_discarded"},
		  {9, "abi_violations"},
		  {19, "trace_writer_packet_loss"},
	  };
	struct pb_reader r;
	struct pb_field f;
	bool first_buf = true;
	pb_reader_init(&r, ts, len);
	while (pb_next(&r, &f)) {
		for (size_t i = 0; i < sizeof(top) / sizeof(top[0]); i++)
			if (f.num == top[i].num && f.wt == PB_WT_VARINT)
				printf("%s %" PRIu64 "\n", top[i].name, f.val);
		if (f.num != 1 || f.wt != PB_WT_LEN || !first_buf)
			continue;
		first_buf = false;
		struct pb_reader br;
		struct pb_field bf;
		pb_reader_init(&br, f.data, f.len);
		while (pb_next(&br, &bf))
			for (size_t i = 0; i < sizeof(buf) / sizeof(buf[0]);
			     i++)
				if (bf.num == buf[i].num &&
				    bf.wt == PB_WT_VARINT)
					printf("%s %" PRIu64 "\n", buf[i].name,
					       bf.val);
	}
}

static int run_stats(const char *path)
{
	struct trace_reader *tr;
	struct trace_record rec;
	struct vp_error err;
	uint8_t *last = NULL;
	size_t last_len = 0;
	uint64_t packets = 0;
	if (trace_reader_open(&tr, path, &err) < 0) {
		fprintf(stderr, "service_bench: %s\n", err.msg);
		return 1;
	}
	int r;
	while ((r = trace_reader_next(tr, &rec, &err)) == 1) {
		if (rec.field != TRACE_PACKET_FIELD || rec.wt != PB_WT_LEN)
			continue;
		packets++;
		struct pb_reader pr;
		struct pb_field f;
		pb_reader_init(&pr, rec.data, rec.len);
		while (pb_next(&pr, &f)) {
			if (f.num != 35 || f.wt != PB_WT_LEN) /* trace_stats */
				continue;
			free(last);
			last = malloc(f.len ? f.len : 1);
			memcpy(last, f.data, f.len);
			last_len = f.len;
		}
	}
	if (r < 0)
		fprintf(stderr, "service_bench: %s\n", err.msg);
	trace_reader_close(tr);
	printf("trace_packets %" PRIu64 "\n", packets);
	if (!last) {
		fprintf(stderr, "service_bench: %s has no trace_stats\n", path);
		return 1;
	}
	print_stats(last, last_len);
	free(last);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 4 && strcmp(argv[1], "raw") == 0)
		return run_raw(argv[2], atof(argv[3]),
			       argc > 4 ? (uint32_t)atoi(argv[4]) : 256u,
			       argc > 5 ? atol(argv[5]) : 0);
	if (argc == 3 && strcmp(argv[1], "stats") == 0)
		return run_stats(argv[2]);
	fprintf(stderr,
		"usage: service_bench raw PRODUCER_SOCK SECONDS [SMB_KB] "
		"[VTRACED_PID]\n"
		"       service_bench stats TRACE\n");
	return 2;
}
