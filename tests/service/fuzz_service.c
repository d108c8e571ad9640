/*
 * fuzz_service.c - libFuzzer target for vtraced's ProducerPort and
 * ConsumerPort: every method handler's argument parsing, CommitData with
 * hostile chunk indices and hostile shared memory, ReadBuffers of what got
 * in.
 *
 * Each input runs against a fresh service on a fresh loop, reached through
 * two socketpairs (one producer connection, one consumer connection) that
 * the service adopts.  Both connections are bound first, so the method
 * handlers are reached.  The input is then a script of operations, each an
 * op byte followed by its operands (missing operand bytes read as 0):
 *
 *   0 RAWP len16 bytes      a frame of any bytes on the producer connection
 *   1 RAWC len16 bytes      the same on the consumer connection
 *   2 INVP m flags len16 a  InvokeMethod m (an index into the bound method
 *                           table; past its end: an unknown id) with args a
 *   3 INVC m flags len16 a  the same on the consumer connection
 *   4 SETUP smb page kb pol producer InitializeConnection (SMB size / page
 *                           size hints), RegisterDataSource "fz",
 *                           GetAsyncCommand; consumer EnableTracing of one
 *                           small buffer with data source "fz"
 *   5 SMBW off24 len8 bytes raw bytes into the SMB the service sent
 *   6 CHUNK lay wr cid pk buf flags len16 bytes
 *                           a chunk written through the ABI (acquire,
 *                           fill, complete with pk & 31 packets and chunk
 *                           flags pk >> 5), then CommitData naming it in
 *                           target buffer buf % 4; flags bit 7: name page
 *                           (flags >> 4) & 7 chunk flags & 15 instead, bit 6
 *                           with it: the chunk inline; bits 2-3 both set:
 *                           ask for a flush ack
 *   7 NOTIFY id             NotifyDataSourceStarted(id)
 *
 * After every operation the loop runs until the service has read all that
 * was sent and stopped answering.  Replies are read and dropped, except the
 * bind replies (method tables) and a passed fd (the SMB, mapped).
 *
 * Build: CC=clang meson setup B -Dfuzz=true -Db_sanitize=address,undefined
 * Seeds: tests/service/fuzz_service_seeds/ (gen_seeds.py).
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/sockios.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "event_loop.h"
#include "ipc_frame.h"
#include "pb_wire.h"
#include "shm_abi.h"
#include "vp_service.h"
#include "vp_log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FZ_MAX_METHODS 32
#define FZ_MAX_SPINS 20000

/* The test's end of one connection. */
struct fz_conn {
	int fd; /* -1 once the service hung up */
	struct vp_ipc_rx rx;
	uint32_t method_ids[FZ_MAX_METHODS];
	char method_names[FZ_MAX_METHODS][32];
	size_t n_methods;
	uint64_t next_req;
	bool is_producer;
};

struct fz {
	struct vp_loop *loop;
	struct vp_service *svc;
	struct fz_conn prod, cons;
	struct vp_smb smb;
	bool has_smb;
	uint32_t page_size;
	uint32_t cursor; /* the writer's page cursor */
	unsigned spins;
	bool progress;
};

/* ---- input reading ------------------------------------------------------- */

struct fz_in {
	const uint8_t *p;
	size_t n;
};

static uint32_t in_u8(struct fz_in *in)
{
	if (!in->n)
		return 0;
	in->n--;
	return *in->p++;
}

static uint32_t in_u16(struct fz_in *in)
{
	uint32_t lo = in_u8(in);
	return lo | in_u8(in) << 8;
}

/* Up to want bytes of the input (fewer at its end). */
static const uint8_t *in_bytes(struct fz_in *in, size_t want, size_t *got)
{
	*got = want < in->n ? want : in->n;
	const uint8_t *p = in->p;
	in->p += *got;
	in->n -= *got;
	return p;
}

/* ---- the test's side of the sockets --------------------------------------- */

static void conn_lost(struct fz_conn *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
}

static void take_bind_reply(struct fz_conn *c, const struct vp_ipc_frame *f)
{
	struct vp_ipc_method_iter it;
	uint32_t id;
	struct vp_ipc_bytes name;
	if (f->msg != VP_IPC_MSG_BIND_SERVICE_REPLY || !f->bind_reply.success)
		return;
	c->n_methods = 0;
	vp_ipc_methods_begin(f, &it);
	while (c->n_methods < FZ_MAX_METHODS &&
	       vp_ipc_methods_next(&it, &id, &name)) {
		size_t n = name.len < 31 ? name.len : 31;
		memcpy(c->method_names[c->n_methods], name.data, n);
		c->method_names[c->n_methods][n] = '\0';
		c->method_ids[c->n_methods++] = id;
	}
}

/* A fd the service passed: the first one on the producer side is the SMB. */
static void take_fd(struct fz *fz, struct fz_conn *c, int fd)
{
	struct vp_error err;
	if (c->is_producer && !fz->has_smb &&
	    vp_smb_map(&fz->smb, fd, fz->page_size, &err) == 0)
		fz->has_smb = true;
	close(fd);
}

/* Reads what the service sent; returns true if anything came. */
static bool conn_drain(struct fz *fz, struct fz_conn *c)
{
	bool any = false;
	while (c->fd >= 0) {
		size_t avail;
		uint8_t *space = vp_ipc_rx_space(&c->rx, &avail);
		union {
			struct cmsghdr h;
			char buf[CMSG_SPACE(sizeof(int) * 8)];
		} cm;
		struct iovec iov = {space, avail};
		struct msghdr msg = {
			.msg_iov = &iov,
			.msg_iovlen = 1,
			.msg_control = cm.buf,
			.msg_controllen = sizeof(cm.buf),
		};
		ssize_t n = recvmsg(c->fd, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		for (struct cmsghdr *h = CMSG_FIRSTHDR(&msg); h;
		     h = CMSG_NXTHDR(&msg, h)) {
			if (h->cmsg_level != SOL_SOCKET ||
			    h->cmsg_type != SCM_RIGHTS)
				continue;
			size_t nfd = (h->cmsg_len - CMSG_LEN(0)) / sizeof(int);
			for (size_t i = 0; i < nfd; i++) {
				int fd;
				memcpy(&fd, CMSG_DATA(h) + i * sizeof(int),
				       sizeof(int));
				take_fd(fz, c, fd);
			}
		}
		if (n <= 0) {
			conn_lost(c);
			return true;
		}
		any = true;
		vp_ipc_rx_commit(&c->rx, (size_t)n);
		struct vp_ipc_rx_frame rf;
		struct vp_error err;
		int r;
		while ((r = vp_ipc_rx_next(&c->rx, &rf, &err)) == 1) {
			struct vp_ipc_frame f;
			for (int i = 0; i < rf.n_fds; i++)
				close(rf.fds[i]);
			if (vp_ipc_frame_decode(rf.data, rf.len, &f, &err) ==
			    0)
				take_bind_reply(c, &f);
		}
		if (r < 0) {
			conn_lost(c);
			return true;
		}
	}
	return any;
}

/* Bytes this end sent that the service has not read yet. */
static int conn_unread(const struct fz_conn *c)
{
	int n = 0;
	if (c->fd < 0 || ioctl(c->fd, SIOCOUTQ, &n) < 0)
		return 0;
	return n;
}

/* A loop task: read replies; quit once the service is idle. */
static void idle_check(void *ctx)
{
	struct fz *fz = ctx;
	bool got = conn_drain(fz, &fz->prod);
	got |= conn_drain(fz, &fz->cons);
	if (got)
		fz->progress = true;
	bool busy = conn_unread(&fz->prod) > 0 || conn_unread(&fz->cons) > 0;
	if (++fz->spins >= FZ_MAX_SPINS || (!busy && !got && !fz->progress)) {
		vp_loop_quit(fz->loop);
		return;
	}
	fz->progress = false;
	vp_loop_post(fz->loop, idle_check, fz);
}

/* Runs the service until it has consumed the sent bytes and gone quiet. */
static void pump(struct fz *fz)
{
	fz->spins = 0;
	fz->progress = true;
	vp_loop_post(fz->loop, idle_check, fz);
	vp_loop_run(fz->loop);
}

/* Sends bytes on c, running the service when the socket is full. */
static void conn_send(struct fz *fz, struct fz_conn *c, const uint8_t *p,
		      size_t n)
{
	unsigned stalls = 0;
	while (n > 0 && c->fd >= 0) {
		ssize_t w = send(c->fd, p, n, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (w > 0) {
			p += w;
			n -= (size_t)w;
			continue;
		}
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) &&
		    ++stalls < 64) {
			pump(fz);
			continue;
		}
		conn_lost(c);
	}
}

static void send_frame_raw(struct fz *fz, struct fz_conn *c,
			   const uint8_t *frame, size_t len)
{
	uint8_t hdr[4] = {(uint8_t)len, (uint8_t)(len >> 8),
			  (uint8_t)(len >> 16), (uint8_t)(len >> 24)};
	conn_send(fz, c, hdr, 4);
	conn_send(fz, c, frame, len);
}

static uint32_t method_id(const struct fz_conn *c, const char *name)
{
	for (size_t i = 0; i < c->n_methods; i++)
		if (strcmp(c->method_names[i], name) == 0)
			return c->method_ids[i];
	return 0xffff;
}

static void send_invoke(struct fz *fz, struct fz_conn *c, uint32_t method,
			const void *args, size_t len, bool drop)
{
	struct pb_buf b;
	pb_buf_init(&b);
	size_t bm = vp_ipc_frame_begin(&b, ++c->next_req);
	vp_ipc_put_invoke(&b, 1, method, args, len, drop);
	vp_ipc_frame_end(&b, bm);
	conn_send(fz, c, b.data, b.len);
	pb_buf_free(&b);
}

static void send_invoke_named(struct fz *fz, struct fz_conn *c,
			      const char *name, const struct pb_buf *args)
{
	send_invoke(fz, c, method_id(c, name), args->data, args->len, false);
}

static void send_bind(struct fz *fz, struct fz_conn *c, const char *service)
{
	struct pb_buf b;
	pb_buf_init(&b);
	size_t bm = vp_ipc_frame_begin(&b, ++c->next_req);
	vp_ipc_put_bind(&b, service);
	vp_ipc_frame_end(&b, bm);
	conn_send(fz, c, b.data, b.len);
	pb_buf_free(&b);
}

/* ---- operations ----------------------------------------------------------- */

static void op_raw(struct fz *fz, struct fz_conn *c, struct fz_in *in)
{
	size_t n;
	const uint8_t *p = in_bytes(in, in_u16(in), &n);
	send_frame_raw(fz, c, p, n);
}

static void op_invoke(struct fz *fz, struct fz_conn *c, struct fz_in *in)
{
	uint32_t m = in_u8(in);
	uint32_t flags = in_u8(in);
	size_t n;
	const uint8_t *p = in_bytes(in, in_u16(in), &n);
	uint32_t id = m < c->n_methods ? c->method_ids[m] : m;
	send_invoke(fz, c, id, p, n, flags & 1);
}

static void op_setup(struct fz *fz, struct fz_in *in)
{
	uint32_t smb_kb = 4u << (in_u8(in) % 8); /* 4 KiB .. 512 KiB */
	uint32_t page = 4096u << (in_u8(in) % 5); /* 4 .. 64 KiB */
	uint32_t buf_kb = 1 + in_u8(in) % 64;
	uint32_t policy = in_u8(in) % 3;
	if (!fz->has_smb)
		fz->page_size = page;

	struct pb_buf b;
	pb_buf_init(&b);
	pb_put_varint(&b, 1, page);
	pb_put_varint(&b, 2, smb_kb * 1024u);
	pb_put_string(&b, 3, "fz");
	send_invoke_named(fz, &fz->prod, "InitializeConnection", &b);

	pb_buf_reset(&b);
	size_t d = pb_begin_nested(&b, 1);
	pb_put_string(&b, 1, "fz");
	pb_put_varint(&b, 2, 1); /* will_notify_on_start */
	pb_end_nested(&b, d);
	send_invoke_named(fz, &fz->prod, "RegisterDataSource", &b);

	pb_buf_reset(&b);
	send_invoke_named(fz, &fz->prod, "GetAsyncCommand", &b);

	/* EnableTracingRequest { trace_config 1 { buffers 1 { size_kb 1,
	 * fill_policy 4 }, data_sources 2 { config 1 { name 1 } } } } */
	pb_buf_reset(&b);
	size_t tc = pb_begin_nested(&b, 1);
	size_t bu = pb_begin_nested(&b, 1);
	pb_put_varint(&b, 1, buf_kb);
	if (policy)
		pb_put_varint(&b, 4, policy);
	pb_end_nested(&b, bu);
	size_t ds = pb_begin_nested(&b, 2);
	size_t cf = pb_begin_nested(&b, 1);
	pb_put_string(&b, 1, "fz");
	pb_end_nested(&b, cf);
	pb_end_nested(&b, ds);
	pb_end_nested(&b, tc);
	send_invoke_named(fz, &fz->cons, "EnableTracing", &b);
	pb_buf_free(&b);
}

static void op_smb_write(struct fz *fz, struct fz_in *in)
{
	uint32_t off = in_u16(in) | in_u8(in) << 16;
	size_t n;
	const uint8_t *p = in_bytes(in, in_u8(in), &n);
	if (!fz->has_smb || fz->smb.size == 0)
		return;
	off %= (uint32_t)fz->smb.size;
	if (n > fz->smb.size - off)
		n = fz->smb.size - off;
	memcpy(fz->smb.base + off, p, n);
}

static void op_chunk(struct fz *fz, struct fz_in *in)
{
	enum vp_page_layout layout =
		(enum vp_page_layout)(1 + in_u8(in) % 5);
	uint16_t writer = (uint16_t)(1 + in_u8(in) % 4);
	uint32_t chunk_id = in_u8(in);
	uint32_t pk = in_u8(in);
	uint32_t target = in_u8(in) % 4; /* 1 is the session's buffer */
	uint32_t flags = in_u8(in);
	size_t n;
	const uint8_t *p = in_bytes(in, in_u16(in), &n);

	uint32_t page = (flags >> 4) & 7, chunk = flags & 15; /* hostile */
	if (fz->has_smb && !(flags & 0x80)) {
		struct vp_smb_chunk c;
		if (!vp_smb_acquire_chunk_for_writing(&fz->smb, layout, writer,
						      chunk_id, &fz->cursor,
						      &c))
			return;
		size_t room = c.size - VP_SMB_CHUNK_HEADER_SIZE;
		memcpy(c.begin + VP_SMB_CHUNK_HEADER_SIZE, p,
		       n < room ? n : room);
		vp_smb_release_chunk_as_complete(&fz->smb, &c, pk & 0x1fu,
						 pk >> 5);
		page = c.page;
		chunk = c.chunk;
	}
	/* CommitDataRequest { chunks_to_move 1 { page 1, chunk 2,
	 * target_buffer 3 [, data 4] }, flush_request_id 3 } */
	struct pb_buf b;
	pb_buf_init(&b);
	size_t m = pb_begin_nested(&b, 1);
	pb_put_varint(&b, 1, page);
	pb_put_varint(&b, 2, chunk);
	pb_put_varint(&b, 3, target);
	if (flags & 0x80 && (flags & 0x40))
		pb_put_bytes(&b, 4, p, n); /* an inline chunk */
	pb_end_nested(&b, m);
	if ((flags & 0x0c) == 0x0c)
		pb_put_varint(&b, 3, chunk_id);
	send_invoke_named(fz, &fz->prod, "CommitData", &b);
	pb_buf_free(&b);
}

static void op_notify(struct fz *fz, struct fz_in *in)
{
	struct pb_buf b;
	pb_buf_init(&b);
	pb_put_varint(&b, 1, in_u8(in));
	send_invoke_named(fz, &fz->prod, "NotifyDataSourceStarted", &b);
	pb_buf_free(&b);
}

/* ---- set up, run, tear down ------------------------------------------------ */

static int adopt_pair(struct fz *fz, struct fz_conn *c, bool producer)
{
	int sv[2];
	struct vp_error err;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return -1;
	int r = producer ? vp_service_adopt_producer(fz->svc, sv[1], &err)
			 : vp_service_adopt_consumer(fz->svc, sv[1], &err);
	if (r < 0) {
		close(sv[0]);
		close(sv[1]);
		return -1;
	}
	fcntl(sv[0], F_SETFL, fcntl(sv[0], F_GETFL) | O_NONBLOCK);
	c->fd = sv[0];
	c->is_producer = producer;
	vp_ipc_rx_init(&c->rx);
	return 0;
}

static void run_script(struct fz *fz, struct fz_in *in)
{
	while (in->n > 0) {
		switch (in_u8(in) % 8) {
		case 0:
			op_raw(fz, &fz->prod, in);
			break;
		case 1:
			op_raw(fz, &fz->cons, in);
			break;
		case 2:
			op_invoke(fz, &fz->prod, in);
			break;
		case 3:
			op_invoke(fz, &fz->cons, in);
			break;
		case 4:
			op_setup(fz, in);
			break;
		case 5:
			op_smb_write(fz, in);
			break;
		case 6:
			op_chunk(fz, in);
			break;
		case 7:
			op_notify(fz, in);
			break;
		}
		pump(fz);
	}
	/* Read everything out once more, as a consumer would. */
	struct pb_buf b;
	pb_buf_init(&b);
	send_invoke_named(fz, &fz->cons, "ReadBuffers", &b);
	pb_buf_free(&b);
	pump(fz);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fz fz;
	struct vp_error err;
	memset(&fz, 0, sizeof(fz));
	fz.prod.fd = fz.cons.fd = -1;
	fz.page_size = VP_SMB_DEFAULT_PAGE_SIZE;
	if (vp_loop_new(&fz.loop, &err) < 0)
		abort();
	/* FZ_VERBOSE=1: the service logs what it does (reproducing). */
	struct vp_service_opts opts = {0};
	if (getenv("FZ_VERBOSE"))
		vp_log_init("fuzz_service", VP_LOG_INFO);
	if (vp_service_new(&fz.svc, fz.loop, &opts, &err) < 0)
		abort();
	if (adopt_pair(&fz, &fz.prod, true) < 0 ||
	    adopt_pair(&fz, &fz.cons, false) < 0)
		abort();
	send_bind(&fz, &fz.prod, "ProducerPort");
	send_bind(&fz, &fz.cons, "ConsumerPort");
	pump(&fz);

	struct fz_in in = {data, size};
	run_script(&fz, &in);

	vp_service_free(fz.svc);
	vp_loop_free(fz.loop);
	conn_lost(&fz.prod);
	conn_lost(&fz.cons);
	vp_ipc_rx_free(&fz.prod.rx);
	vp_ipc_rx_free(&fz.cons.rx);
	if (fz.has_smb)
		vp_smb_unmap(&fz.smb);
	return 0;
}
