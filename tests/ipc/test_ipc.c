/*
 * test_ipc.c - unit tests of the event loop and Perfetto's IPC (framing,
 * sockets, client, host).
 *
 * A host runs on its own loop thread on a UNIX socket in a fresh temporary
 * directory; the tests drive it with vp_ipc_client and with raw sockets that
 * send what a well-behaved client would not.  State the loop thread and the
 * test thread share goes through a mutex.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "event_loop.h"
#include "ipc_client.h"
#include "ipc_frame.h"
#include "ipc_host.h"
#include "ipc_sock.h"

#define T_MS 5000 /* every wait in these tests */

/* ---- the test service ---------------------------------------------------- */

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static int g_dropped_calls;   /* "Count" invocations */
static char g_connect_name[64]; /* machine_name seen in on_connect */
static int g_connects, g_disconnects;

static void m_echo(void *ctx, struct vp_ipc_conn *c, uint64_t id,
		   const uint8_t *args, size_t len)
{
	(void)ctx;
	vp_ipc_conn_reply(c, id, true, false, args, len, -1);
}

/* Replies args[0] times: "0", "1", ... with has_more on all but the last. */
static void m_stream(void *ctx, struct vp_ipc_conn *c, uint64_t id,
		     const uint8_t *args, size_t len)
{
	(void)ctx;
	int n = len > 0 ? args[0] : 0;
	for (int i = 0; i < n; i++) {
		char b[16];
		int l = snprintf(b, sizeof(b), "%d", i);
		vp_ipc_conn_reply(c, id, true, i + 1 < n, b, (size_t)l, -1);
	}
}

static void m_count(void *ctx, struct vp_ipc_conn *c, uint64_t id,
		    const uint8_t *args, size_t len)
{
	(void)ctx;
	pthread_mutex_lock(&g_mu);
	g_dropped_calls++;
	pthread_mutex_unlock(&g_mu);
	/* The client asked for no reply: the host must swallow this. */
	vp_ipc_conn_reply(c, id, true, false, args, len, -1);
}

static void m_get_count(void *ctx, struct vp_ipc_conn *c, uint64_t id,
			const uint8_t *args, size_t len)
{
	(void)ctx, (void)args, (void)len;
	pthread_mutex_lock(&g_mu);
	int n = g_dropped_calls;
	pthread_mutex_unlock(&g_mu);
	vp_ipc_conn_reply(c, id, true, false, &n, sizeof(n), -1);
}

/* Reads the passed fd (a memfd) from offset 0 and echoes its content. */
static void m_fd_in(void *ctx, struct vp_ipc_conn *c, uint64_t id,
		    const uint8_t *args, size_t len)
{
	(void)ctx, (void)args, (void)len;
	int fd = vp_ipc_conn_take_fd(c);
	if (fd < 0) {
		vp_ipc_conn_reply(c, id, false, false, NULL, 0, -1);
		return;
	}
	char buf[64];
	ssize_t n = pread(fd, buf, sizeof(buf), 0);
	close(fd);
	vp_ipc_conn_reply(c, id, n > 0, false, buf, n > 0 ? (size_t)n : 0, -1);
}

static int make_memfd(const char *content)
{
	int fd = memfd_create("test_ipc", MFD_CLOEXEC);
	if (fd < 0)
		return -1;
	size_t n = strlen(content);
	if (write(fd, content, n) != (ssize_t)n) {
		close(fd);
		return -1;
	}
	return fd;
}

static void m_fd_out(void *ctx, struct vp_ipc_conn *c, uint64_t id,
		     const uint8_t *args, size_t len)
{
	(void)ctx, (void)args, (void)len;
	int fd = make_memfd("from the host");
	vp_ipc_conn_reply(c, id, fd >= 0, false, "x", 1, fd);
	close(fd); /* the caller keeps ownership: closing is allowed */
}

static void m_peer(void *ctx, struct vp_ipc_conn *c, uint64_t id,
		   const uint8_t *args, size_t len)
{
	(void)ctx, (void)args, (void)len;
	const struct vp_ipc_peer *p = vp_ipc_conn_peer(c);
	char b[256];
	int l = snprintf(b, sizeof(b), "pid=%d uid=%u remote=%d name=%s hint=%s",
			 (int)p->pid, (unsigned)p->uid, p->remote,
			 p->machine_name, p->machine_id_hint);
	vp_ipc_conn_reply(c, id, true, false, b, (size_t)l, -1);
}

static void m_close_me(void *ctx, struct vp_ipc_conn *c, uint64_t id,
		       const uint8_t *args, size_t len)
{
	(void)ctx, (void)args, (void)len;
	vp_ipc_conn_reply(c, id, true, false, "bye", 3, -1);
	vp_ipc_conn_close(c);
	/* Closing is deferred: the connection is still valid here. */
	assert_int_equal(vp_ipc_conn_reply(c, id, true, false, NULL, 0, -1),
			 -1);
}

static void m_stats(void *ctx, struct vp_ipc_conn *c, uint64_t id,
		    const uint8_t *args, size_t len)
{
	struct vp_ipc_host **hp = ctx;
	(void)args, (void)len;
	const struct vp_ipc_host_stats *s = vp_ipc_host_stats(*hp);
	vp_ipc_conn_reply(c, id, true, false, s, sizeof(*s), -1);
}

/* Replies 64 frames of 64 KiB without waiting for the reader, a memfd
 * naming the frame with every 8th; registers a drain callback. */
static size_t g_flood_queued;
static int g_drained;

static void on_drained(void *ctx)
{
	(void)ctx;
	pthread_mutex_lock(&g_mu);
	g_drained++;
	pthread_mutex_unlock(&g_mu);
}

static void m_flood(void *ctx, struct vp_ipc_conn *c, uint64_t id,
		    const uint8_t *args, size_t len)
{
	(void)ctx, (void)args, (void)len;
	static uint8_t chunk[64 << 10];
	for (int i = 0; i < 64; i++) {
		memset(chunk, i, sizeof(chunk));
		int fd = -1;
		if (i % 8 == 0) {
			char name[32];
			snprintf(name, sizeof(name), "frame %d", i);
			fd = make_memfd(name);
		}
		vp_ipc_conn_reply(c, id, true, i < 63, chunk, sizeof(chunk), fd);
		if (fd >= 0)
			close(fd); /* queued fds must survive this */
	}
	pthread_mutex_lock(&g_mu);
	g_flood_queued = vp_ipc_conn_tx_queued(c);
	g_drained = 0;
	pthread_mutex_unlock(&g_mu);
	vp_ipc_conn_on_drain(c, 1, on_drained, NULL);
}

static const struct vp_ipc_method g_methods[] = {
	{"Echo", m_echo},     {"Stream", m_stream}, {"Count", m_count},
	{"GetCount", m_get_count}, {"FdIn", m_fd_in},  {"FdOut", m_fd_out},
	{"Peer", m_peer},     {"CloseMe", m_close_me}, {"Stats", m_stats},
	{"Flood", m_flood},
};

static void on_connect(void *ctx, struct vp_ipc_conn *c)
{
	(void)ctx;
	pthread_mutex_lock(&g_mu);
	g_connects++;
	snprintf(g_connect_name, sizeof(g_connect_name), "%s",
		 vp_ipc_conn_peer(c)->machine_name);
	pthread_mutex_unlock(&g_mu);
}

static void on_disconnect(void *ctx, struct vp_ipc_conn *c)
{
	(void)ctx, (void)c;
	pthread_mutex_lock(&g_mu);
	g_disconnects++;
	pthread_mutex_unlock(&g_mu);
}

/* ---- fixture: a host on a loop thread ------------------------------------ */

struct fx {
	char dir[64];
	char addr[128];
	struct vp_loop *loop;
	struct vp_ipc_host *host;
	struct vp_ipc_service svc;
	pthread_t thread;
	const struct vp_ipc_limits *lim; /* with it: a group of limits */
	struct vp_ipc_group *group;
};

static void *loop_main(void *arg)
{
	struct fx *f = arg;
	vp_loop_run(f->loop);
	return NULL;
}

static void fx_start(struct fx *f, const char *listen_addr)
{
	struct vp_error err;
	f->svc = (struct vp_ipc_service){
		.name = "TestPort",
		.methods = g_methods,
		.n_methods = sizeof(g_methods) / sizeof(g_methods[0]),
		.ctx = &f->host,
		.on_connect = on_connect,
		.on_disconnect = on_disconnect,
	};
	assert_int_equal(vp_loop_new(&f->loop, &err), 0);
	assert_int_equal(vp_ipc_host_new(&f->host, f->loop, &f->svc, &err), 0);
	if (f->lim) {
		assert_int_equal(
			vp_ipc_group_new(&f->group, f->loop, f->lim, &err), 0);
		assert_int_equal(vp_ipc_host_set_group(f->host, f->group), 0);
	}
	if (listen_addr) {
		snprintf(f->addr, sizeof(f->addr), "%s", listen_addr);
	} else {
		strcpy(f->dir, "/tmp/vp_test_ipc_XXXXXX");
		assert_non_null(mkdtemp(f->dir));
		snprintf(f->addr, sizeof(f->addr), "%s/test.sock", f->dir);
	}
	if (vp_ipc_host_listen(f->host, f->addr, &err) < 0)
		fail_msg("listen: %s", err.msg);
	assert_int_equal(pthread_create(&f->thread, NULL, loop_main, f), 0);
}

static void fx_stop(struct fx *f)
{
	vp_loop_quit(f->loop);
	pthread_join(f->thread, NULL);
	vp_ipc_host_free(f->host);
	vp_ipc_group_free(f->group);
	vp_loop_free(f->loop);
	if (f->dir[0]) {
		struct stat st;
		/* host_free unlinks the socket file */
		assert_int_not_equal(stat(f->addr, &st), 0);
		rmdir(f->dir);
	}
}

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	fx_start(f, NULL);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	fx_stop(*state);
	free(*state);
	return 0;
}

static struct vp_ipc_client *connect_bound(struct fx *f)
{
	struct vp_error err;
	struct vp_ipc_client *c;
	if (vp_ipc_client_connect(&c, f->addr, T_MS, &err) < 0)
		fail_msg("connect: %s", err.msg);
	if (vp_ipc_client_bind(c, "TestPort", T_MS, &err) < 0)
		fail_msg("bind: %s", err.msg);
	return c;
}

/* Calls method and returns the reply as a NUL-terminated string. */
static char *call_str(struct vp_ipc_client *c, const char *method,
		      const void *args, size_t len)
{
	struct vp_error err;
	uint8_t *r;
	size_t rl;
	if (vp_ipc_client_call(c, method, args, len, &r, &rl, NULL, T_MS,
			       &err) < 0)
		fail_msg("call %s: %s", method, err.msg);
	char *s = malloc(rl + 1);
	memcpy(s, r, rl);
	s[rl] = '\0';
	free(r);
	return s;
}

static struct vp_ipc_host_stats get_stats(struct vp_ipc_client *c)
{
	struct vp_error err;
	struct vp_ipc_host_stats s;
	uint8_t *r;
	size_t rl;
	if (vp_ipc_client_call(c, "Stats", NULL, 0, &r, &rl, NULL, T_MS,
			       &err) < 0)
		fail_msg("Stats: %s", err.msg);
	assert_int_equal(rl, sizeof(s));
	memcpy(&s, r, sizeof(s));
	free(r);
	return s;
}

/* ---- frame codec --------------------------------------------------------- */

static void test_frame_roundtrip(void **state)
{
	(void)state;
	struct pb_buf b;
	struct vp_ipc_frame f;
	struct vp_error err;
	pb_buf_init(&b);

	size_t m = vp_ipc_frame_begin(&b, 7);
	size_t body = vp_ipc_put_bind_reply_begin(&b, true, 3);
	vp_ipc_put_bind_reply_method(&b, 1, "Alpha");
	vp_ipc_put_bind_reply_method(&b, 2, "Beta");
	vp_ipc_put_bind_reply_end(&b, body);
	vp_ipc_frame_end(&b, m);
	uint32_t len = (uint32_t)b.data[0] | (uint32_t)b.data[1] << 8;
	assert_int_equal(len + 4, b.len);
	assert_int_equal(vp_ipc_frame_decode(b.data + 4, len, &f, &err), 0);
	assert_int_equal(f.request_id, 7);
	assert_int_equal(f.msg, VP_IPC_MSG_BIND_SERVICE_REPLY);
	assert_true(f.bind_reply.success);
	assert_int_equal(f.bind_reply.service_id, 3);
	assert_int_equal(f.bind_reply.n_methods, 2);
	struct vp_ipc_method_iter it;
	uint32_t id;
	struct vp_ipc_bytes name;
	vp_ipc_methods_begin(&f, &it);
	assert_true(vp_ipc_methods_next(&it, &id, &name));
	assert_int_equal(id, 1);
	assert_true(vp_ipc_bytes_eq(name, "Alpha"));
	assert_true(vp_ipc_methods_next(&it, &id, &name));
	assert_int_equal(id, 2);
	assert_true(vp_ipc_bytes_eq(name, "Beta"));
	assert_false(vp_ipc_methods_next(&it, &id, &name));

	/* Two frames in one buffer, fed to the reassembler a byte at a time. */
	pb_buf_reset(&b);
	m = vp_ipc_frame_begin(&b, 9);
	vp_ipc_put_invoke(&b, 1, 4, "args", 4, true);
	vp_ipc_frame_end(&b, m);
	m = vp_ipc_frame_begin(&b, 10);
	vp_ipc_put_peer_identity(&b, -5, 1000, "hint", "vm");
	vp_ipc_frame_end(&b, m);
	struct vp_ipc_rx rx;
	struct vp_ipc_rx_frame rf;
	vp_ipc_rx_init(&rx);
	int got = 0;
	for (size_t i = 0; i < b.len; i++) {
		vp_ipc_rx_feed(&rx, b.data + i, 1);
		int rc;
		while ((rc = vp_ipc_rx_next(&rx, &rf, &err)) == 1) {
			assert_int_equal(
				vp_ipc_frame_decode(rf.data, rf.len, &f, &err),
				0);
			if (got == 0) {
				assert_int_equal(f.msg,
						 VP_IPC_MSG_INVOKE_METHOD);
				assert_int_equal(f.request_id, 9);
				assert_int_equal(f.invoke.service_id, 1);
				assert_int_equal(f.invoke.method_id, 4);
				assert_true(f.invoke.drop_reply);
				assert_true(vp_ipc_bytes_eq(f.invoke.args,
							    "args"));
			} else {
				assert_int_equal(f.msg,
						 VP_IPC_MSG_SET_PEER_IDENTITY);
				assert_int_equal(f.peer.pid, -5);
				assert_int_equal(f.peer.uid, 1000);
				assert_true(vp_ipc_bytes_eq(
					f.peer.machine_id_hint, "hint"));
				assert_true(vp_ipc_bytes_eq(f.peer.machine_name,
							    "vm"));
			}
			got++;
		}
		assert_int_equal(rc, 0);
	}
	assert_int_equal(got, 2);
	assert_int_equal(vp_ipc_rx_pending(&rx), 0);

	/* An oversized length is an error that names the stream offset. */
	const uint8_t big[4] = {0xff, 0xff, 0xff, 0x7f};
	vp_ipc_rx_feed(&rx, big, 4);
	assert_int_equal(vp_ipc_rx_next(&rx, &rf, &err), -1);
	char want[64];
	snprintf(want, sizeof(want), "stream offset %zu", b.len);
	assert_non_null(strstr(err.msg, want));
	assert_int_equal(vp_ipc_rx_next(&rx, &rf, &err), -1);
	vp_ipc_rx_free(&rx);

	/* Malformed protobuf inside a message names the byte. */
	const uint8_t bad[] = {0x10, 0x01, 0x2a, 0x03, 0x08, 0xff, 0xff};
	assert_int_equal(vp_ipc_frame_decode(bad, sizeof(bad), &f, &err), -1);
	assert_non_null(strstr(err.msg, "IPCFrame byte 4"));
	assert_non_null(strstr(err.msg, "InvokeMethod"));
	pb_buf_free(&b);
}

/* ---- addresses ----------------------------------------------------------- */

static void test_sock_addresses(void **state)
{
	(void)state;
	struct vp_error err;
	assert_int_equal(vp_sock_addr_kind("/tmp/x.sock"), VP_SOCK_UNIX);
	assert_int_equal(vp_sock_addr_kind("@abstract"), VP_SOCK_UNIX);
	assert_int_equal(vp_sock_addr_kind("vsock://2:1000"), VP_SOCK_VSOCK);
	assert_int_equal(vp_sock_addr_kind("127.0.0.1:80"), VP_SOCK_TCP);
	assert_int_equal(vp_sock_addr_kind("[::1]:80"), VP_SOCK_TCP);
	assert_int_equal(vp_sock_addr_kind("relative"), VP_SOCK_UNIX);

	setenv("PERFETTO_PRODUCER_SOCK_NAME", "/x/p.sock", 1);
	setenv("PERFETTO_CONSUMER_SOCK_NAME", "@c", 1);
	assert_string_equal(vp_producer_sock_name(), "/x/p.sock");
	assert_string_equal(vp_consumer_sock_name(), "@c");
	unsetenv("PERFETTO_PRODUCER_SOCK_NAME");
	unsetenv("PERFETTO_CONSUMER_SOCK_NAME");
	struct stat st;
	bool run = stat("/run/perfetto", &st) == 0 && S_ISDIR(st.st_mode);
	assert_string_equal(vp_producer_sock_name(),
			    run ? "/run/perfetto/traced-producer.sock"
				: "/tmp/perfetto-producer");
	assert_string_equal(vp_consumer_sock_name(),
			    run ? "/run/perfetto/traced-consumer.sock"
				: "/tmp/perfetto-consumer");

	/* Malformed addresses fail with the address in the message. */
	assert_int_equal(vp_sock_connect("vsock://x:1", 100, &err), -1);
	assert_non_null(strstr(err.msg, "vsock://x:1"));
	assert_int_equal(vp_sock_connect("host:99999", 100, &err), -1);
	assert_non_null(strstr(err.msg, "host:99999"));
	/* No vsock here (or nobody listening): a clear error, no hang. */
	assert_int_equal(vp_sock_connect("vsock://-1:5555", 500, &err), -1);
	assert_non_null(strstr(err.msg, "vsock"));
	/* Nothing listening on a fresh path. */
	assert_int_equal(vp_sock_connect("/nonexistent/vp.sock", 100, &err),
			 -1);

	/* Abstract socket: listen and connect. */
	char name[64];
	snprintf(name, sizeof(name), "@vp_test_ipc_%d", (int)getpid());
	int l = vp_sock_listen(name, &err);
	assert_true(l >= 0);
	int c = vp_sock_connect(name, T_MS, &err);
	assert_true(c >= 0);
	close(c);
	close(l);

	/* A stale socket file is replaced; a regular file is not touched;
	 * the socket file is 0666. */
	char dir[] = "/tmp/vp_test_sock_XXXXXX";
	assert_non_null(mkdtemp(dir));
	char path[128];
	snprintf(path, sizeof(path), "%s/s.sock", dir);
	l = vp_sock_listen(path, &err);
	assert_true(l >= 0);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0666);
	assert_int_equal(vp_sock_listen(path, &err), -1); /* live */
	close(l);
	l = vp_sock_listen(path, &err); /* stale now */
	assert_true(l >= 0);
	close(l);
	vp_sock_unlink(path);
	int rf = open(path, O_CREAT | O_WRONLY, 0600);
	close(rf);
	assert_int_equal(vp_sock_listen(path, &err), -1);
	assert_non_null(strstr(err.msg, "not a socket"));
	unlink(path);
	rmdir(dir);
}

/* ---- client and host ----------------------------------------------------- */

static void test_bind(void **state)
{
	struct fx *f = *state;
	struct vp_error err;
	struct vp_ipc_client *c = connect_bound(f);
	assert_true(vp_ipc_client_has_method(c, "Echo"));
	assert_true(vp_ipc_client_has_method(c, "Stats"));
	assert_false(vp_ipc_client_has_method(c, "Nope"));
	/* Not a method of the service: fails locally. */
	assert_int_equal(vp_ipc_client_invoke(c, "Nope", NULL, 0, -1, NULL,
					      NULL, &err),
			 -1);
	assert_non_null(strstr(err.msg, "Nope"));
	vp_ipc_client_close(c);

	struct vp_ipc_client *u;
	assert_int_equal(vp_ipc_client_connect(&u, f->addr, T_MS, &err), 0);
	assert_int_equal(vp_ipc_client_bind(u, "NoSuchPort", T_MS, &err), -1);
	assert_non_null(strstr(err.msg, "NoSuchPort"));
	/* The connection survives a failed bind. */
	assert_int_equal(vp_ipc_client_bind(u, "TestPort", T_MS, &err), 0);
	char *s = call_str(u, "Echo", "ok", 2);
	assert_string_equal(s, "ok");
	free(s);
	vp_ipc_client_close(u);
}

static void test_invoke_and_peer(void **state)
{
	struct fx *f = *state;
	struct vp_ipc_client *c = connect_bound(f);
	char *s = call_str(c, "Echo", "hello", 5);
	assert_string_equal(s, "hello");
	free(s);

	/* A large argument crosses several socket buffers both ways. */
	size_t big = 3u << 20;
	uint8_t *a = malloc(big);
	for (size_t i = 0; i < big; i++)
		a[i] = (uint8_t)(i * 7);
	struct vp_error err;
	uint8_t *r;
	size_t rl;
	assert_int_equal(vp_ipc_client_call(c, "Echo", a, big, &r, &rl, NULL,
					    T_MS, &err),
			 0);
	assert_int_equal(rl, big);
	assert_memory_equal(r, a, big);
	free(r);
	free(a);

	s = call_str(c, "Peer", NULL, 0);
	char want[128];
	snprintf(want, sizeof(want), "pid=%d uid=%u remote=0 name= hint=",
		 (int)getpid(), (unsigned)getuid());
	assert_string_equal(s, want);
	free(s);
	vp_ipc_client_close(c);
}

struct stream_state {
	int replies;
	int finals;
	char seen[64];
};

static void stream_cb(void *ctx, const struct vp_ipc_reply *r)
{
	struct stream_state *st = ctx;
	assert_true(r->success);
	assert_false(r->disconnected);
	assert_int_equal(r->fd, -1);
	size_t l = strlen(st->seen);
	snprintf(st->seen + l, sizeof(st->seen) - l, "%.*s%s", (int)r->len,
		 (const char *)r->data, r->has_more ? "," : ".");
	st->replies++;
	if (!r->has_more)
		st->finals++;
}

static void poll_until(struct vp_ipc_client *c, const int *flag, int want)
{
	struct vp_error err;
	uint64_t end = vp_loop_now_ms() + T_MS;
	while (*flag < want) {
		assert_true(vp_loop_now_ms() < end);
		if (vp_ipc_client_poll(c, 100, &err) < 0)
			fail_msg("poll: %s", err.msg);
	}
}

static void test_streaming(void **state)
{
	struct fx *f = *state;
	struct vp_error err;
	struct vp_ipc_client *c = connect_bound(f);
	struct stream_state st = {0};
	uint8_t n = 5;
	assert_int_equal(vp_ipc_client_invoke(c, "Stream", &n, 1, -1,
					      stream_cb, &st, &err),
			 0);
	poll_until(c, &st.finals, 1);
	assert_int_equal(st.replies, 5);
	assert_string_equal(st.seen, "0,1,2,3,4.");
	vp_ipc_client_close(c);
}

static void test_drop_reply(void **state)
{
	struct fx *f = *state;
	struct vp_error err;
	struct vp_ipc_client *c = connect_bound(f);
	uint8_t *r;
	size_t rl;
	assert_int_equal(vp_ipc_client_call(c, "GetCount", NULL, 0, &r, &rl,
					    NULL, T_MS, &err),
			 0);
	int before;
	memcpy(&before, r, sizeof(before));
	free(r);
	for (int i = 0; i < 3; i++)
		assert_int_equal(vp_ipc_client_invoke(c, "Count", "z", 1, -1,
						      NULL, NULL, &err),
				 0);
	/* The handlers ran (that no reply goes out is checked on the raw
	 * stream in test_unknown_ids_and_drop). */
	assert_int_equal(vp_ipc_client_call(c, "GetCount", NULL, 0, &r, &rl,
					    NULL, T_MS, &err),
			 0);
	int after;
	memcpy(&after, r, sizeof(after));
	free(r);
	assert_int_equal(after, before + 3);
	vp_ipc_client_close(c);
}

/* ---- raw sockets: what vp_ipc_client would never send ---------------------
 */

static void raw_send(int fd, struct pb_buf *b)
{
	assert_int_equal(vp_sock_send_all(fd, b->data, b->len, -1), 0);
	pb_buf_reset(b);
}

/* Reads one frame from a blocking raw socket (with a timeout). */
static void raw_read_frame(int fd, struct vp_ipc_rx *rx,
			   struct vp_ipc_frame *f, struct vp_ipc_rx_frame *rf)
{
	struct vp_error err;
	for (;;) {
		int rc = vp_ipc_rx_next(rx, rf, &err);
		assert_int_not_equal(rc, -1);
		if (rc == 1)
			break;
		struct pollfd p = {.fd = fd, .events = POLLIN};
		assert_int_equal(poll(&p, 1, T_MS), 1);
		size_t avail;
		uint8_t *sp = vp_ipc_rx_space(rx, &avail);
		ssize_t n = read(fd, sp, avail);
		assert_true(n > 0);
		vp_ipc_rx_commit(rx, (size_t)n);
	}
	assert_int_equal(vp_ipc_frame_decode(rf->data, rf->len, f, &err), 0);
}

/* True when the peer closes fd within the timeout. */
static bool raw_sees_eof(int fd)
{
	uint64_t end = vp_loop_now_ms() + T_MS;
	char buf[4096];
	while (vp_loop_now_ms() < end) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		if (poll(&p, 1, 200) <= 0)
			continue;
		ssize_t n = read(fd, buf, sizeof(buf));
		if (n == 0 || (n < 0 && errno == ECONNRESET))
			return true;
	}
	return false;
}

static void test_unknown_ids_and_drop(void **state)
{
	struct fx *f = *state;
	struct vp_error err;
	int fd = vp_sock_connect(f->addr, T_MS, &err);
	assert_true(fd >= 0);
	struct pb_buf b;
	struct vp_ipc_rx rx;
	struct vp_ipc_frame fr;
	struct vp_ipc_rx_frame rf;
	pb_buf_init(&b);
	vp_ipc_rx_init(&rx);

	size_t m = vp_ipc_frame_begin(&b, 1);
	vp_ipc_put_bind(&b, "TestPort");
	vp_ipc_frame_end(&b, m);
	raw_send(fd, &b);
	raw_read_frame(fd, &rx, &fr, &rf);
	assert_int_equal(fr.msg, VP_IPC_MSG_BIND_SERVICE_REPLY);
	assert_int_equal(fr.request_id, 1);
	assert_true(fr.bind_reply.success);
	uint32_t sid = fr.bind_reply.service_id;
	/* Method ids are 1..n in table order. */
	struct vp_ipc_method_iter it;
	uint32_t id;
	struct vp_ipc_bytes name;
	uint32_t n = 0;
	vp_ipc_methods_begin(&fr, &it);
	while (vp_ipc_methods_next(&it, &id, &name)) {
		assert_int_equal(id, n + 1);
		assert_true(vp_ipc_bytes_eq(name, g_methods[n].name));
		n++;
	}
	assert_int_equal(n, sizeof(g_methods) / sizeof(g_methods[0]));

	/* Unknown method id, unknown service id: a failed reply. */
	m = vp_ipc_frame_begin(&b, 2);
	vp_ipc_put_invoke(&b, sid, 99, NULL, 0, false);
	vp_ipc_frame_end(&b, m);
	m = vp_ipc_frame_begin(&b, 3);
	vp_ipc_put_invoke(&b, sid + 5, 1, NULL, 0, false);
	vp_ipc_frame_end(&b, m);
	/* drop_reply: Echo (id 1) must not answer; the next Echo must. */
	m = vp_ipc_frame_begin(&b, 4);
	vp_ipc_put_invoke(&b, sid, 1, "dropped", 7, true);
	vp_ipc_frame_end(&b, m);
	m = vp_ipc_frame_begin(&b, 5);
	vp_ipc_put_invoke(&b, sid, 1, "kept", 4, false);
	vp_ipc_frame_end(&b, m);
	raw_send(fd, &b);

	/* As Perfetto's host: a reply with success false and nothing else,
	 * which Perfetto's client hands to the caller (a RequestError frame
	 * it would drop, and wait for ever). */
	raw_read_frame(fd, &rx, &fr, &rf);
	assert_int_equal(fr.msg, VP_IPC_MSG_INVOKE_METHOD_REPLY);
	assert_int_equal(fr.request_id, 2);
	assert_false(fr.reply.success);
	assert_false(fr.reply.has_more);
	assert_int_equal(fr.reply.reply.len, 0);
	raw_read_frame(fd, &rx, &fr, &rf);
	assert_int_equal(fr.msg, VP_IPC_MSG_INVOKE_METHOD_REPLY);
	assert_int_equal(fr.request_id, 3);
	assert_false(fr.reply.success);
	raw_read_frame(fd, &rx, &fr, &rf);
	assert_int_equal(fr.msg, VP_IPC_MSG_INVOKE_METHOD_REPLY);
	assert_int_equal(fr.request_id, 5);
	assert_true(vp_ipc_bytes_eq(fr.reply.reply, "kept"));

	struct vp_ipc_client *c = connect_bound(f);
	struct vp_ipc_host_stats s = get_stats(c);
	assert_true(s.unknown_methods >= 2);
	vp_ipc_client_close(c);
	vp_ipc_rx_free(&rx);
	pb_buf_free(&b);
	close(fd);
}

struct disc_state {
	int calls;
	bool disconnected;
};

static void disc_cb(void *ctx, const struct vp_ipc_reply *r)
{
	struct disc_state *d = ctx;
	d->calls++;
	d->disconnected = r->disconnected && !r->success;
}

/* A RequestError reaches the client's callback as a failed reply, and
 * vp_ipc_client_call() reports it. */
static void test_request_error_to_client(void **state)
{
	(void)state;
	struct vp_error err;
	int sv[2];
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	struct vp_ipc_client *c = vp_ipc_client_from_fd(sv[0]);
	/* Play the host on sv[1]. */
	struct pb_buf b;
	pb_buf_init(&b);
	size_t m = vp_ipc_frame_begin(&b, 1);
	size_t body = vp_ipc_put_bind_reply_begin(&b, true, 1);
	vp_ipc_put_bind_reply_method(&b, 1, "M");
	vp_ipc_put_bind_reply_end(&b, body);
	vp_ipc_frame_end(&b, m);
	raw_send(sv[1], &b);
	assert_int_equal(vp_ipc_client_bind(c, "S", T_MS, &err), 0);

	struct disc_state d = {0};
	assert_int_equal(vp_ipc_client_invoke(c, "M", NULL, 0, -1, disc_cb,
					      &d, &err),
			 0); /* request 2 */
	m = vp_ipc_frame_begin(&b, 2);
	vp_ipc_put_request_error(&b, "unknown method");
	vp_ipc_frame_end(&b, m);
	/* A reply for a request nobody made is ignored. */
	m = vp_ipc_frame_begin(&b, 77);
	vp_ipc_put_invoke_reply(&b, true, false, "x", 1);
	vp_ipc_frame_end(&b, m);
	raw_send(sv[1], &b);
	poll_until(c, &d.calls, 1);
	assert_false(d.disconnected);
	assert_int_equal(vp_ipc_client_poll(c, 50, &err), 0);
	assert_int_equal(d.calls, 1);

	/* call(): request 3 gets a RequestError within the timeout. */
	m = vp_ipc_frame_begin(&b, 3);
	vp_ipc_put_request_error(&b, "unknown method");
	vp_ipc_frame_end(&b, m);
	raw_send(sv[1], &b);
	uint64_t t0 = vp_loop_now_ms();
	uint8_t *r;
	size_t rl;
	assert_int_equal(vp_ipc_client_call(c, "M", NULL, 0, &r, &rl, NULL,
					    T_MS, &err),
			 -1);
	assert_true(vp_loop_now_ms() - t0 < T_MS / 2);
	assert_non_null(strstr(err.msg, "S.M"));
	assert_non_null(strstr(err.msg, "failed"));

	/* Then the peer goes away. */
	close(sv[1]);
	assert_int_equal(vp_ipc_client_poll(c, T_MS, &err), -1);
	assert_non_null(strstr(err.msg, "IPC receive"));
	vp_ipc_client_close(c);
	pb_buf_free(&b);
}

static void test_client_disconnect_callbacks(void **state)
{
	(void)state;
	struct vp_error err;
	int sv[2];
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	struct vp_ipc_client *c = vp_ipc_client_from_fd(sv[0]);
	struct pb_buf b;
	pb_buf_init(&b);
	size_t m = vp_ipc_frame_begin(&b, 1);
	size_t body = vp_ipc_put_bind_reply_begin(&b, true, 1);
	vp_ipc_put_bind_reply_method(&b, 1, "M");
	vp_ipc_put_bind_reply_end(&b, body);
	vp_ipc_frame_end(&b, m);
	raw_send(sv[1], &b);
	assert_int_equal(vp_ipc_client_bind(c, "S", T_MS, &err), 0);
	struct disc_state d1 = {0}, d2 = {0};
	assert_int_equal(vp_ipc_client_invoke(c, "M", NULL, 0, -1, disc_cb,
					      &d1, &err),
			 0);
	assert_int_equal(vp_ipc_client_invoke(c, "M", NULL, 0, -1, disc_cb,
					      &d2, &err),
			 0);
	close(sv[1]);
	assert_int_equal(vp_ipc_client_poll(c, T_MS, &err), -1);
	assert_int_equal(d1.calls, 1);
	assert_true(d1.disconnected);
	assert_int_equal(d2.calls, 1);
	assert_true(d2.disconnected);
	assert_int_equal(vp_ipc_client_poll(c, 0, &err), -1);
	assert_int_equal(d1.calls, 1);
	vp_ipc_client_close(c);
	pb_buf_free(&b);
}

static void test_fd_passing(void **state)
{
	struct fx *f = *state;
	struct vp_error err;
	struct vp_ipc_client *c = connect_bound(f);

	/* client -> host */
	int mfd = make_memfd("to the host");
	assert_true(mfd >= 0);
	struct stream_state st = {0};
	assert_int_equal(vp_ipc_client_invoke(c, "FdIn", NULL, 0, mfd,
					      stream_cb, &st, &err),
			 0);
	close(mfd);
	poll_until(c, &st.finals, 1);
	assert_string_equal(st.seen, "to the host.");

	/* host -> client, several times (the fd stays with its frame) */
	for (int i = 0; i < 3; i++) {
		uint8_t *r;
		size_t rl;
		int got = -1;
		assert_int_equal(vp_ipc_client_call(c, "FdOut", NULL, 0, &r,
						    &rl, &got, T_MS, &err),
				 0);
		free(r);
		assert_true(got >= 0);
		char buf[32] = {0};
		assert_int_equal(pread(got, buf, sizeof(buf) - 1, 0), 13);
		assert_string_equal(buf, "from the host");
		close(got);
	}
	/* An Echo reply carries no fd. */
	uint8_t *r;
	size_t rl;
	int got = 7;
	assert_int_equal(vp_ipc_client_call(c, "Echo", "e", 1, &r, &rl, &got,
					    T_MS, &err),
			 0);
	free(r);
	assert_int_equal(got, -1);
	vp_ipc_client_close(c);
}

struct flood_state {
	int replies, finals, bad;
};

static void flood_cb(void *ctx, const struct vp_ipc_reply *r)
{
	struct flood_state *st = ctx;
	int i = st->replies++;
	if (!r->success || r->len != (64u << 10) || r->data[0] != (uint8_t)i ||
	    r->data[r->len - 1] != (uint8_t)i || r->has_more != (i < 63))
		st->bad++;
	if (i % 8 == 0) {
		char want[32], got[32] = {0};
		snprintf(want, sizeof(want), "frame %d", i);
		if (r->fd < 0 || pread(r->fd, got, sizeof(got) - 1, 0) <= 0 ||
		    strcmp(got, want) != 0)
			st->bad++;
	} else if (r->fd >= 0) {
		st->bad++;
	}
	if (r->fd >= 0)
		close(r->fd);
	if (!r->has_more)
		st->finals++;
}

static void test_backpressure_and_drain(void **state)
{
	struct fx *f = *state;
	struct vp_error err;
	struct vp_ipc_client *c = connect_bound(f);
	struct flood_state st = {0};
	assert_int_equal(vp_ipc_client_invoke(c, "Flood", NULL, 0, -1,
					      flood_cb, &st, &err),
			 0);
	usleep(100 * 1000); /* let the host fill the socket and queue */
	poll_until(c, &st.finals, 1);
	assert_int_equal(st.replies, 64);
	assert_int_equal(st.bad, 0);
	/* The drain callback ran once the reader caught up. */
	char *s = call_str(c, "Echo", "x", 1);
	free(s);
	pthread_mutex_lock(&g_mu);
	size_t queued = g_flood_queued;
	int drained = g_drained;
	pthread_mutex_unlock(&g_mu);
	assert_true(queued > 0); /* 4 MiB does not fit a socket buffer */
	assert_int_equal(drained, 1);
	vp_ipc_client_close(c);
}

static void test_close_from_handler(void **state)
{
	struct fx *f = *state;
	struct vp_error err;
	struct vp_ipc_client *c = connect_bound(f);
	char *s = call_str(c, "CloseMe", NULL, 0);
	assert_string_equal(s, "bye");
	free(s);
	/* Then the host hangs up. */
	uint64_t end = vp_loop_now_ms() + T_MS;
	int rc = 0;
	while (rc == 0 && vp_loop_now_ms() < end)
		rc = vp_ipc_client_poll(c, 100, &err);
	assert_int_equal(rc, -1);
	vp_ipc_client_close(c);
	/* And keeps serving others. */
	c = connect_bound(f);
	s = call_str(c, "Echo", "still", 5);
	assert_string_equal(s, "still");
	free(s);
	vp_ipc_client_close(c);
}

/* Sends one byte with `n` fds (more than a client may). */
static void send_many_fds(int fd, int n)
{
	int fds[8];
	union {
		char buf[CMSG_SPACE(sizeof(fds))];
		struct cmsghdr align;
	} ctl;
	for (int i = 0; i < n; i++)
		fds[i] = make_memfd("x");
	char byte = 0;
	struct iovec iov = {.iov_base = &byte, .iov_len = 1};
	struct msghdr msg = {.msg_iov = &iov,
			     .msg_iovlen = 1,
			     .msg_control = ctl.buf,
			     .msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)n)};
	struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)n);
	memcpy(CMSG_DATA(cm), fds, sizeof(int) * (size_t)n);
	assert_int_equal(sendmsg(fd, &msg, MSG_NOSIGNAL), 1);
	for (int i = 0; i < n; i++)
		close(fds[i]);
}

static void test_bad_clients(void **state)
{
	struct fx *f = *state;
	struct vp_error err;
	struct vp_ipc_client *good = connect_bound(f);
	struct vp_ipc_host_stats s0 = get_stats(good);

	/* Garbage protobuf inside a well-formed length. */
	int g = vp_sock_connect(f->addr, T_MS, &err);
	assert_true(g >= 0);
	const uint8_t garbage[] = {5, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff};
	assert_int_equal(vp_sock_send_all(g, garbage, sizeof(garbage), -1), 0);
	/* An oversized length. */
	int o = vp_sock_connect(f->addr, T_MS, &err);
	assert_true(o >= 0);
	const uint8_t huge[] = {0xf0, 0xff, 0xff, 0xff, 1, 2, 3};
	assert_int_equal(vp_sock_send_all(o, huge, sizeof(huge), -1), 0);
	/* Too many fds. */
	int m = vp_sock_connect(f->addr, T_MS, &err);
	assert_true(m >= 0);
	send_many_fds(m, 6);
	/* A half frame, then a hang-up. */
	int h = vp_sock_connect(f->addr, T_MS, &err);
	const uint8_t half[] = {100, 0, 0, 0, 0x10};
	assert_int_equal(vp_sock_send_all(h, half, sizeof(half), -1), 0);
	close(h);

	assert_true(raw_sees_eof(g));
	assert_true(raw_sees_eof(o));
	assert_true(raw_sees_eof(m));
	close(g);
	close(o);
	close(m);

	char *str = call_str(good, "Echo", "alive", 5);
	assert_string_equal(str, "alive");
	free(str);
	struct vp_ipc_host_stats s1 = get_stats(good);
	assert_int_equal(s1.bad_frames - s0.bad_frames, 2);
	assert_int_equal(s1.dropped_conns - s0.dropped_conns, 3);
	assert_int_equal(s1.connections - s0.connections, 4);
	vp_ipc_client_close(good);
}

static void test_many_clients(void **state)
{
	struct fx *f = *state;
	struct vp_ipc_client *cs[20];
	for (int i = 0; i < 20; i++)
		cs[i] = connect_bound(f);
	for (int round = 0; round < 3; round++) {
		for (int i = 0; i < 20; i++) {
			char in[16];
			snprintf(in, sizeof(in), "c%d-%d", i, round);
			char *s = call_str(cs[i], "Echo", in, strlen(in));
			assert_string_equal(s, in);
			free(s);
		}
	}
	for (int i = 0; i < 20; i++)
		vp_ipc_client_close(cs[i]);
}

/* ---- TCP with set_peer_identity ------------------------------------------ */

static void test_tcp_peer_identity(void **state)
{
	(void)state;
	struct fx f = {0};
	struct vp_error err;
	/* Find a free port: listen on a few candidates. */
	char addr[64] = "";
	int port = 20000 + (int)(getpid() % 20000);
	for (int i = 0; i < 50; i++, port++) {
		snprintf(addr, sizeof(addr), "127.0.0.1:%d", port);
		int l = vp_sock_listen(addr, &err);
		if (l >= 0) {
			close(l);
			break;
		}
	}
	fx_start(&f, addr);

	struct vp_ipc_client *c;
	if (vp_ipc_client_connect(&c, addr, T_MS, &err) < 0)
		fail_msg("connect: %s", err.msg);
	assert_int_equal(vp_ipc_client_set_peer_identity(c, 4321, 1005,
							 "hint-42", "guest-vm",
							 &err),
			 0);
	assert_int_equal(vp_ipc_client_bind(c, "TestPort", T_MS, &err), 0);
	char *s = call_str(c, "Peer", NULL, 0);
	assert_string_equal(s,
			    "pid=4321 uid=1005 remote=1 name=guest-vm hint=hint-42");
	free(s);
	pthread_mutex_lock(&g_mu);
	/* on_connect ran after the identity arrived. */
	assert_string_equal(g_connect_name, "guest-vm");
	pthread_mutex_unlock(&g_mu);
	/* A second identity is ignored. */
	assert_int_equal(vp_ipc_client_set_peer_identity(c, 1, 1, "x", "evil",
							 &err),
			 0);
	s = call_str(c, "Peer", NULL, 0);
	assert_string_equal(s,
			    "pid=4321 uid=1005 remote=1 name=guest-vm hint=hint-42");
	free(s);
	vp_ipc_client_close(c);

	/* Without identity: remote, pid/uid -1. */
	assert_int_equal(vp_ipc_client_connect(&c, addr, T_MS, &err), 0);
	assert_int_equal(vp_ipc_client_bind(c, "TestPort", T_MS, &err), 0);
	s = call_str(c, "Peer", NULL, 0);
	char want[96];
	snprintf(want, sizeof(want), "pid=-1 uid=%u remote=1 name= hint=",
		 (unsigned)(uid_t)-1);
	assert_string_equal(s, want);
	free(s);
	vp_ipc_client_close(c);
	fx_stop(&f);
}

static void test_unix_ignores_identity(void **state)
{
	struct fx *f = *state;
	struct vp_error err;
	struct vp_ipc_client *c;
	assert_int_equal(vp_ipc_client_connect(&c, f->addr, T_MS, &err), 0);
	assert_int_equal(vp_ipc_client_set_peer_identity(c, 1, 2, "h", "n",
							 &err),
			 0);
	assert_int_equal(vp_ipc_client_bind(c, "TestPort", T_MS, &err), 0);
	char *s = call_str(c, "Peer", NULL, 0);
	char want[128];
	snprintf(want, sizeof(want), "pid=%d uid=%u remote=0 name= hint=",
		 (int)getpid(), (unsigned)getuid());
	assert_string_equal(s, want);
	free(s);
	vp_ipc_client_close(c);
}

/* ---- capture ------------------------------------------------------------- */

static void test_capture(void **state)
{
	struct fx *f = *state;
	struct vp_error err;
	char dir[] = "/tmp/vp_test_cap_XXXXXX";
	assert_non_null(mkdtemp(dir));
	setenv("VPERFETTO_IPC_CAPTURE", dir, 1);
	struct vp_ipc_client *c = connect_bound(f);
	unsetenv("VPERFETTO_IPC_CAPTURE");
	char *s = call_str(c, "Echo", "cap", 3);
	free(s);
	vp_ipc_client_close(c);

	const char *names[] = {"000000-tx.bin", "000001-rx.bin",
			       "000002-tx.bin", "000003-rx.bin"};
	const enum vp_ipc_msg msgs[] = {
		VP_IPC_MSG_BIND_SERVICE, VP_IPC_MSG_BIND_SERVICE_REPLY,
		VP_IPC_MSG_INVOKE_METHOD, VP_IPC_MSG_INVOKE_METHOD_REPLY};
	for (int i = 0; i < 4; i++) {
		char path[256];
		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		int fd = open(path, O_RDONLY);
		assert_true(fd >= 0);
		uint8_t buf[1024];
		ssize_t n = read(fd, buf, sizeof(buf));
		close(fd);
		assert_true(n > 0);
		struct vp_ipc_frame fr;
		assert_int_equal(vp_ipc_frame_decode(buf, (size_t)n, &fr, &err),
				 0);
		assert_int_equal(fr.msg, msgs[i]);
		if (i == 0)
			assert_true(vp_ipc_bytes_eq(fr.bind.service_name,
						    "TestPort"));
		if (i == 3)
			assert_true(vp_ipc_bytes_eq(fr.reply.reply, "cap"));
		unlink(path);
	}
	assert_int_equal(rmdir(dir), 0); /* nothing else was written */
}

/* ---- event loop ---------------------------------------------------------- */

struct loop_state {
	struct vp_loop *loop;
	int oneshot, periodic, cancelled, posted, remote;
	uint64_t periodic_id, victim_id;
	int pipes[2][2];
	int fd_calls[2];
	int replaced_calls;
	int replacement[2];
};

static void ls_oneshot(void *ctx)
{
	struct loop_state *s = ctx;
	s->oneshot++;
	vp_loop_cancel(s->loop, s->victim_id); /* cancel another timer */
}

static void ls_victim(void *ctx)
{
	struct loop_state *s = ctx;
	s->cancelled++;
}

static void ls_quit(void *ctx)
{
	struct loop_state *s = ctx;
	vp_loop_quit(s->loop);
}

static void ls_periodic(void *ctx)
{
	struct loop_state *s = ctx;
	if (++s->periodic == 3) {
		vp_loop_cancel(s->loop, s->periodic_id); /* itself */
		vp_loop_timer(s->loop, 30, 0, ls_quit, s);
	}
}

static void ls_posted(void *ctx)
{
	struct loop_state *s = ctx;
	s->posted++;
}

static void *remote_poster(void *arg)
{
	struct loop_state *s = arg;
	usleep(10000);
	vp_loop_post_threadsafe(s->loop, ls_posted, s);
	return NULL;
}

static void *remote_quitter(void *arg)
{
	struct loop_state *s = arg;
	usleep(20000);
	vp_loop_quit(s->loop);
	return NULL;
}

static void test_loop_timers_posts(void **state)
{
	(void)state;
	struct vp_error err;
	struct loop_state s = {0};
	assert_int_equal(vp_loop_new(&s.loop, &err), 0);
	uint64_t t0 = vp_loop_now_ms();
	vp_loop_timer(s.loop, 20, 0, ls_oneshot, &s);
	s.victim_id = vp_loop_timer(s.loop, 60, 0, ls_victim, &s);
	s.periodic_id = vp_loop_timer(s.loop, 5, 10, ls_periodic, &s);
	assert_true(s.victim_id > 0 && s.periodic_id > s.victim_id);
	vp_loop_post(s.loop, ls_posted, &s);
	pthread_t th;
	pthread_create(&th, NULL, remote_poster, &s);
	assert_int_equal(vp_loop_run(s.loop), 0);
	pthread_join(th, NULL);
	uint64_t dt = vp_loop_now_ms() - t0;
	assert_int_equal(s.oneshot, 1);
	assert_int_equal(s.cancelled, 0);
	assert_int_equal(s.periodic, 3);
	assert_int_equal(s.posted, 2);
	/* 5 + 10 + 10 ms to the third tick, then 30 ms. */
	assert_true(dt >= 50);
	/* Quit from another thread while the loop sleeps. */
	vp_loop_timer(s.loop, 60000, 0, ls_victim, &s);
	t0 = vp_loop_now_ms();
	pthread_create(&th, NULL, remote_quitter, &s);
	assert_int_equal(vp_loop_run(s.loop), 0);
	pthread_join(th, NULL);
	assert_true(vp_loop_now_ms() - t0 < T_MS);
	assert_int_equal(s.cancelled, 0);
	vp_loop_free(s.loop);
}

static void ls_fd_cb(void *ctx, int fd, uint32_t events);

static void ls_replacement_cb(void *ctx, int fd, uint32_t events)
{
	struct loop_state *s = ctx;
	(void)fd, (void)events;
	s->replaced_calls++;
}

/* Whichever pipe fires first removes the other (closing it, and watching a
 * new pipe that may get the same fd number) and itself. */
static void ls_fd_cb(void *ctx, int fd, uint32_t events)
{
	struct loop_state *s = ctx;
	assert_true(events & VP_EV_IN);
	int me = fd == s->pipes[0][0] ? 0 : 1;
	int other = 1 - me;
	s->fd_calls[me]++;
	vp_loop_unwatch(s->loop, fd);
	vp_loop_unwatch(s->loop, s->pipes[other][0]);
	close(s->pipes[other][0]);
	close(s->pipes[other][1]);
	/* Likely reuses the closed fd numbers; not readable. */
	assert_int_equal(pipe2(s->replacement, O_CLOEXEC), 0);
	assert_int_equal(vp_loop_watch(s->loop, s->replacement[0], VP_EV_IN,
				       ls_replacement_cb, s, NULL),
			 0);
	s->pipes[other][0] = s->pipes[other][1] = -1;
	vp_loop_timer(s->loop, 50, 0, ls_quit, s);
}

static void test_loop_unwatch_in_callback(void **state)
{
	(void)state;
	struct vp_error err;
	struct loop_state s = {0};
	assert_int_equal(vp_loop_new(&s.loop, &err), 0);
	for (int i = 0; i < 2; i++) {
		assert_int_equal(pipe2(s.pipes[i], O_CLOEXEC), 0);
		assert_int_equal(write(s.pipes[i][1], "x", 1), 1);
		assert_int_equal(vp_loop_watch(s.loop, s.pipes[i][0], VP_EV_IN,
					       ls_fd_cb, &s, &err),
				 0);
	}
	/* One watch per fd. */
	assert_int_equal(vp_loop_watch(s.loop, s.pipes[0][0], VP_EV_IN,
				       ls_fd_cb, &s, &err),
			 -1);
	assert_int_equal(vp_loop_run(s.loop), 0);
	assert_int_equal(s.fd_calls[0] + s.fd_calls[1], 1);
	assert_int_equal(s.replaced_calls, 0);
	for (int i = 0; i < 2; i++) {
		if (s.pipes[i][0] >= 0) {
			close(s.pipes[i][0]);
			close(s.pipes[i][1]);
		}
	}
	vp_loop_unwatch(s.loop, s.replacement[0]);
	close(s.replacement[0]);
	close(s.replacement[1]);
	vp_loop_free(s.loop);
}

/* ---- connection limits ---------------------------------------------------- */

/* A connection that sends nothing. */
static int silent_connect(const struct fx *f)
{
	struct vp_error err;
	int fd = vp_sock_connect(f->addr, T_MS, &err);
	if (fd < 0)
		fail_msg("connect: %s", err.msg);
	return fd;
}

/* Whether the host closed fd within ms. */
static bool closed_by_host(int fd, int ms)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	if (poll(&p, 1, ms) != 1)
		return false;
	char c;
	return recv(fd, &c, 1, MSG_DONTWAIT) <= 0;
}

/* A connection that never makes a call is closed after the init timeout;
 * one that did make a call stays. */
static void test_init_timeout(void **state)
{
	(void)state;
	struct fx f = {0};
	const struct vp_ipc_limits lim = {.init_timeout_ms = 300};
	f.lim = &lim;
	fx_start(&f, NULL);
	struct vp_ipc_client *c = connect_bound(&f);
	free(call_str(c, "Echo", "hi", 2));
	int s1 = silent_connect(&f);
	uint64_t t0 = vp_loop_now_ms();
	assert_true(closed_by_host(s1, T_MS));
	assert_true(vp_loop_now_ms() - t0 >= 250);
	usleep(400 * 1000);
	char *r = call_str(c, "Echo", "again", 5);
	assert_string_equal(r, "again");
	free(r);
	struct vp_ipc_host_stats st = get_stats(c);
	assert_int_equal(st.idle_closed, 1);
	close(s1);
	vp_ipc_client_close(c);
	fx_stop(&f);
}

/* At the per-uid cap, a new connection takes the place of the oldest one
 * that never made a call; when all have made calls, it is refused. */
static void test_uid_cap(void **state)
{
	(void)state;
	struct fx f = {0};
	const struct vp_ipc_limits lim = {.max_conns_per_uid = 3};
	f.lim = &lim;
	fx_start(&f, NULL);
	struct vp_ipc_client *c[3];
	c[0] = connect_bound(&f);
	free(call_str(c[0], "Echo", "x", 1));
	int s[4];
	for (int i = 0; i < 4; i++) {
		s[i] = silent_connect(&f);
		usleep(50 * 1000); /* accepted in this order */
	}
	assert_true(closed_by_host(s[0], T_MS));
	assert_true(closed_by_host(s[1], T_MS));
	assert_false(closed_by_host(s[2], 100));
	assert_false(closed_by_host(s[3], 100));
	/* Two clients that make calls push out the other two. */
	for (int i = 1; i < 3; i++) {
		c[i] = connect_bound(&f);
		free(call_str(c[i], "Echo", "y", 1));
	}
	assert_true(closed_by_host(s[2], T_MS));
	assert_true(closed_by_host(s[3], T_MS));
	/* Three in use: the next one is refused. */
	struct vp_error err;
	struct vp_ipc_client *x;
	if (vp_ipc_client_connect(&x, f.addr, T_MS, &err) == 0) {
		assert_int_not_equal(vp_ipc_client_bind(x, "TestPort", T_MS,
							&err),
				     0);
		vp_ipc_client_close(x);
	}
	struct vp_ipc_host_stats st = get_stats(c[0]);
	assert_int_equal(st.idle_closed, 4);
	assert_int_equal(st.refused_conns, 1);
	for (int i = 0; i < 4; i++)
		close(s[i]);
	for (int i = 0; i < 3; i++)
		vp_ipc_client_close(c[i]);
	fx_stop(&f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_frame_roundtrip),
		cmocka_unit_test(test_sock_addresses),
		cmocka_unit_test(test_loop_timers_posts),
		cmocka_unit_test(test_loop_unwatch_in_callback),
		cmocka_unit_test(test_client_disconnect_callbacks),
		cmocka_unit_test(test_request_error_to_client),
		cmocka_unit_test(test_tcp_peer_identity),
		cmocka_unit_test_setup_teardown(test_bind, setup, teardown),
		cmocka_unit_test_setup_teardown(test_invoke_and_peer, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_streaming, setup, teardown),
		cmocka_unit_test_setup_teardown(test_drop_reply, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_unknown_ids_and_drop, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_fd_passing, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_backpressure_and_drain,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_close_from_handler, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_bad_clients, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_many_clients, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_unix_ignores_identity,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_capture, setup, teardown),
		cmocka_unit_test(test_init_timeout),
		cmocka_unit_test(test_uid_cap),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
