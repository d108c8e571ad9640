/*
 * vperfetto_main.c - vperfetto, the consumer command: like Perfetto's
 * `perfetto`, it sends a TraceConfig to the tracing service's ConsumerPort,
 * waits for the session to end and writes the trace file.
 *
 *   vperfetto -c CONFIG [--txt] -o OUT [-t 10s] [-b 32mb]
 *   vperfetto -o OUT [-t 10s] [-b 32mb] [--track-event CATS] [EVENTS...]
 *   vperfetto --query
 *   vperfetto -c CONFIG --detach=KEY     vperfetto --attach=KEY -o OUT
 *
 * One connection, one thread: replies are dispatched by polling the IPC
 * client in short slices, between which SIGINT/SIGTERM are noticed (the
 * first stops tracing cleanly: Flush, then DisableTracing; the second
 * aborts).  The trace is written through trace_io.h's crash-safe writer;
 * with write_into_file the service writes into the temporary file of an
 * out_file.h output, whose fd travels with EnableTracing, renamed into
 * place at the end.  On any failure no output file is left behind and a
 * file that was there stays as it was.
 *
 * -o - (or /dev/stdout) writes the trace to stdout, as Perfetto's does:
 * packets go to descriptor 1 as they are read (nothing else is ever
 * printed there; messages go to stderr), and with write_into_file the
 * service is handed descriptor 1 itself (it writes in sequence, never
 * seeks).  Nothing written to stdout can be
 * taken back: on a failure the exit status says the trace is not whole.
 * A terminal is refused: a binary trace is never wanted on one.
 *
 * -d (--background) forks once the command line and the config have been
 * checked, as Perfetto's does: the child leaves the session (setsid),
 * moves to / with its standard descriptors on /dev/null and traces; the
 * parent prints its PID and exits.  -D (--background-wait) makes the
 * parent wait until tracing has started (or failed) first.  Relative
 * paths were resolved before the move.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <libgen.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "cmd_config.h"
#include "event_loop.h"
#include "ipc_client.h"
#include "ipc_sock.h"
#include "out_file.h"
#include "pb_wire.h"
#include "perfetto/ipc/consumer_port.pb-c.h"
#include "perfetto_fields.h"
#include "trace_io.h"
#include "vp_error.h"
#include "vp_version.h"
#include "vp_log.h"

#define CONNECT_TIMEOUT_MS 5000
#define CALL_TIMEOUT_MS 10000
#define POLL_SLICE_MS 100
#define FLUSH_TIMEOUT_MS 5000
#define STDOUT_BUF (256u << 10) /* -o -: bytes gathered per write */

/* ---- command line ------------------------------------------------------- */

struct options {
	const char *config_path;
	bool txt;
	const char *out;
	const char *time;
	const char *buffer;
	const char *detach_key;
	const char *attach_key;
	bool stop; /* --stop: with --attach, stop the session at once */
	bool query;
	const char *socket;
	const char *track_event;
	char **events;
	size_t n_events;
	bool background;      /* -d, or -D */
	bool background_wait; /* -D */
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: vperfetto -c CONFIG [--txt] -o OUT [-t TIME] [-b SIZE]"
		" [-d | -D]\n"
		"       vperfetto -o OUT [-t TIME] [-b SIZE] [--track-event CATS]"
		" [-d | -D]\n"
		"                 [EVENT...]\n"
		"       vperfetto --query\n"
		"       vperfetto -c CONFIG --detach=KEY | --attach=KEY -o OUT\n"
		"\n"
		"  -c, --config FILE       TraceConfig, binary (- reads stdin)\n"
		"      --txt               the config is in protobuf text format\n"
		"  -o, --out FILE          the trace file to write; - (or "
		"/dev/stdout) writes\n"
		"                          the trace to stdout (not a "
		"terminal)\n"
		"  -t, --time TIME         duration: 10s, 500ms, 2m (overrides "
		"duration_ms)\n"
		"  -b, --buffer SIZE       buffer size: 32mb, 512kb (overrides "
		"buffers[0])\n"
		"      --track-event CATS  light mode: track_event categories, "
		"comma-separated\n"
		"  EVENT...                light mode: ftrace events, e.g. "
		"sched/sched_switch\n"
		"      --detach=KEY        start tracing, detach the session as "
		"KEY, exit\n"
		"      --attach=KEY        reattach to session KEY, wait for it "
		"to end, write OUT\n"
		"      --stop              with --attach: stop the session now "
		"(flush, then stop)\n"
		"      --query             list the service's producers and data "
		"sources\n"
		"      --consumer-socket ADDR   the service's consumer socket\n"
		"  -d, --background        trace in the background: print the "
		"PID and exit\n"
		"  -D, --background-wait   as -d, but exit once tracing has "
		"started (0), or\n"
		"                          failed to (1)\n"
		"  -h, --help              this help\n"
		"      --version           the version\n");
}

/* 0: run; 1: exit 0 (help); -1: usage error (already printed). */
static int parse_args(int argc, char **argv, struct options *o)
{
	enum { OPT_TXT = 256, OPT_DETACH, OPT_ATTACH, OPT_STOP, OPT_QUERY, OPT_SOCKET,
	       OPT_TRACK_EVENT, OPT_VERSION };
	static const struct option longopts[] = {
		{"config", required_argument, NULL, 'c'},
		{"txt", no_argument, NULL, OPT_TXT},
		{"out", required_argument, NULL, 'o'},
		{"time", required_argument, NULL, 't'},
		{"buffer", required_argument, NULL, 'b'},
		{"detach", required_argument, NULL, OPT_DETACH},
		{"attach", required_argument, NULL, OPT_ATTACH},
		{"stop", no_argument, NULL, OPT_STOP},
		{"query", no_argument, NULL, OPT_QUERY},
		{"consumer-socket", required_argument, NULL, OPT_SOCKET},
		{"track-event", required_argument, NULL, OPT_TRACK_EVENT},
		{"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, OPT_VERSION},
		{"background", no_argument, NULL, 'd'},
		{"background-wait", no_argument, NULL, 'D'},
		{NULL, 0, NULL, 0},
	};
	int c;

	opterr = 1;
	while ((c = getopt_long(argc, argv, "c:o:t:b:hdD", longopts, NULL)) != -1) {
		switch (c) {
		case 'c': o->config_path = optarg; break;
		case OPT_TXT: o->txt = true; break;
		case 'o': o->out = optarg; break;
		case 't': o->time = optarg; break;
		case 'b': o->buffer = optarg; break;
		case OPT_DETACH: o->detach_key = optarg; break;
		case OPT_ATTACH: o->attach_key = optarg; break;
		case OPT_STOP: o->stop = true; break;
		case OPT_QUERY: o->query = true; break;
		case OPT_SOCKET: o->socket = optarg; break;
		case OPT_TRACK_EVENT: o->track_event = optarg; break;
		case 'd': o->background = true; break;
		case 'D': o->background = o->background_wait = true; break;
		case 'h': usage(stdout); return 1;
		case OPT_VERSION:
			printf("vperfetto %s\n", VP_VERSION);
			return 1;
		default:
			fprintf(stderr, "Try 'vperfetto --help'.\n");
			return -1;
		}
	}
	o->events = argv + optind;
	o->n_events = (size_t)(argc - optind);
	return 0;
}

static bool out_is_stdout(const char *out);

/* Cross-option checks; prints the complaint. */
static int check_args(const struct options *o)
{
	const char *bad = NULL;

	if (o->background && o->query)
		bad = "--background does not go with --query (it prints on "
		      "stdout)";
	else if (o->background && out_is_stdout(o->out))
		bad = "--background does not go with -o - (stdout is "
		      "/dev/null in the background): give -o FILE";
	else if (o->query && (o->config_path || o->out || o->attach_key ||
			 o->detach_key || o->n_events || o->track_event))
		bad = "--query takes no other option but --consumer-socket";
	else if (o->query)
		return 0;
	else if (o->stop && !o->attach_key)
		bad = "--stop is supported only in combination with --attach";
	else if (o->attach_key && o->detach_key)
		bad = "--attach and --detach exclude each other";
	else if (o->attach_key && (o->config_path || o->time || o->buffer ||
				   o->n_events || o->track_event))
		bad = "--attach takes the config of the attached session; "
		      "give only -o";
	else if (o->config_path && (o->n_events || o->track_event))
		bad = "-c excludes the light-mode --track-event and ftrace "
		      "events (put them in the config)";
	else if (o->txt && !o->config_path)
		bad = "--txt needs -c CONFIG";
	else if (!o->out && !o->detach_key)
		bad = "no output file: give -o OUT";
	if (bad) {
		fprintf(stderr, "vperfetto: %s\nTry 'vperfetto --help'.\n", bad);
		return -1;
	}
	return 0;
}

/* ---- --background ------------------------------------------------------- */

/* The child's end of the pipe to the parent while the parent waits for
 * word (-D), else -1.  The child writes 'R' once it has left the
 * terminal's session, then (-D) 'S' once tracing has started, or 'F'
 * and the reason. */
static int bg_fd = -1;

/* Tells a waiting parent that tracing started (ok) or could not (why);
 * only the first word counts. */
static void bg_notify(bool ok, const char *why)
{
	char msg[1 + sizeof(((struct vp_error *)0)->msg)];
	size_t n;

	if (bg_fd < 0)
		return;
	n = (size_t)snprintf(msg, sizeof(msg), "%c%s", ok ? 'S' : 'F',
			     ok || !why ? "" : why);
	if (n >= sizeof(msg))
		n = sizeof(msg) - 1;
	for (size_t done = 0; done < n;) {
		ssize_t w = write(bg_fd, msg + done, n - done);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			break; /* the parent is gone: nobody to tell */
		done += (size_t)w;
	}
	close(bg_fd);
	bg_fd = -1;
}

/* path made absolute against the current directory (malloc'd), so that
 * it means the same after chdir("/").  NULL, with errno, on failure. */
static char *absolute(const char *path)
{
	char *cwd, *abs;

	if (path[0] == '/')
		return strdup(path);
	cwd = getcwd(NULL, 0);
	if (!cwd)
		return NULL;
	if (asprintf(&abs, "%s%s%s", cwd, strcmp(cwd, "/") ? "/" : "",
		     path) < 0)
		abs = NULL;
	free(cwd);
	return abs;
}

/* Reads one byte, retrying on EINTR: 1, or 0 at EOF (or on error). */
static int read_byte(int fd, char *c)
{
	ssize_t n;

	do
		n = read(fd, c, 1);
	while (n < 0 && errno == EINTR);
	return n == 1;
}

/* The parent's side: waits for the child to have left the session,
 * prints its PID, and with -D waits for its word.  The exit status. */
static int bg_parent(int fd, pid_t pid, bool wait_started)
{
	char c, why[sizeof(((struct vp_error *)0)->msg)];
	size_t n = 0;

	if (!read_byte(fd, &c) || c != 'R') {
		fprintf(stderr, "vperfetto: the background process (%ld) did "
			"not start\n", (long)pid);
		return 1;
	}
	printf("%ld\n", (long)pid);
	if (fflush(stdout) != 0) {
		fprintf(stderr, "vperfetto: cannot print the PID: %s\n",
			strerror(errno));
		return 1;
	}
	if (!wait_started)
		return 0;
	if (read_byte(fd, &c) && c == 'S')
		return 0;
	if (c == 'F')
		while (n + 1 < sizeof(why) && read_byte(fd, &why[n]))
			n++;
	why[n] = '\0';
	fprintf(stderr, "vperfetto: tracing did not start in the background "
		"(process %ld): %s\n", (long)pid,
		n ? why : "it ended without a word");
	return 1;
}

/* -d / -D: resolves the relative paths the child will use, checks that
 * the output can be created (a complaint is best shown on the terminal),
 * then forks.  Returns 0 in the child, which has left the terminal's
 * session and sits in / with stdin, stdout and stderr on /dev/null; else
 * 1 with *status the parent's exit status. */
static int go_background(struct options *o, int *status)
{
	struct vp_error e;
	struct stat st;
	int p[2];
	pid_t pid;

	*status = 1;
	if (o->out && !(stat(o->out, &st) == 0 && !S_ISREG(st.st_mode) &&
			!S_ISDIR(st.st_mode))) {
		/* A regular file (or none yet): try creating its temporary
		 * file.  A FIFO or a device is opened by the child only: a
		 * FIFO's open waits for its reader. */
		struct vp_out *probe;
		if (vp_out_open(&probe, o->out, 0, &e) < 0) {
			fprintf(stderr, "vperfetto: %s\n", e.msg);
			return 1;
		}
		vp_out_abort(probe);
	}
	/* A relative socket path too (an abstract one starts with '@'). */
	const char *addr = o->socket ? o->socket : vp_consumer_sock_name();
	bool rel_sock = vp_sock_addr_kind(addr) == VP_SOCK_UNIX &&
			addr[0] != '/' && addr[0] != '@';
	char *out = o->out ? absolute(o->out) : NULL;
	char *sock = rel_sock ? absolute(addr) : NULL;
	if ((o->out && !out) || (rel_sock && !sock)) {
		fprintf(stderr, "vperfetto: cannot resolve the relative paths "
			"for --background: %s\n", strerror(errno));
		free(out);
		free(sock);
		return 1;
	}
	if (pipe2(p, O_CLOEXEC) < 0) {
		fprintf(stderr, "vperfetto: pipe: %s\n", strerror(errno));
		free(out);
		free(sock);
		return 1;
	}
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		fprintf(stderr, "vperfetto: fork: %s\n", strerror(errno));
		close(p[0]);
		close(p[1]);
		free(out);
		free(sock);
		return 1;
	}
	if (pid > 0) {
		close(p[1]);
		*status = bg_parent(p[0], pid, o->background_wait);
		close(p[0]);
		free(out);
		free(sock);
		return 1;
	}

	/* The child.  out and sock live as long as it does. */
	close(p[0]);
	if (out)
		o->out = out;
	if (sock)
		o->socket = sock;
	int null = open("/dev/null", O_RDWR);
	if (setsid() < 0 || chdir("/") < 0 || null < 0 ||
	    dup2(null, STDIN_FILENO) < 0 || dup2(null, STDOUT_FILENO) < 0 ||
	    dup2(null, STDERR_FILENO) < 0)
		_exit(1); /* the parent says it did not start */
	if (null > STDERR_FILENO)
		close(null);
	bg_fd = p[1];
	if (write(bg_fd, "R", 1) != 1)
		_exit(1);
	if (!o->background_wait) {
		close(bg_fd);
		bg_fd = -1;
	}
	return 0;
}

/* ---- the session -------------------------------------------------------- */

struct session {
	struct vp_ipc_client *cli;
	const char *addr;
	struct vp_error err; /* first failure */
	bool failed;

	/* EnableTracing: its reply marks the end of the session. */
	bool ended;

	/* Stopping on a signal: Flush, then DisableTracing. */
	bool stopping;
	bool flush_done;
	bool disable_sent;
	uint64_t flush_deadline;

	/* ReadBuffers. */
	bool read_done;
	struct pb_buf packet; /* slices of the packet being joined */
	struct trace_writer *w;
	uint64_t packets;

	/* -o -: the trace goes to stdout, through obuf. */
	bool to_stdout;
	uint8_t *obuf;
	size_t olen;
	uint64_t obytes; /* handed to stdout or obuf so far */
	bool stdout_dirty; /* part of the trace has reached stdout */
	bool stdout_lent;  /* write_into_file: the service writes stdout */
};

static int session_fail(struct session *s, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static int session_fail(struct session *s, const char *fmt, ...)
{
	if (!s->failed) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(s->err.msg, sizeof(s->err.msg), fmt, ap);
		va_end(ap);
		s->failed = true;
	}
	return -1;
}

/* Why a reply failed, for messages. */
static const char *reply_failure(const struct vp_ipc_reply *r)
{
	return r->disconnected ? "the connection to the service was lost"
			       : "the service rejected the request";
}

static int connect_service(struct session *s)
{
	struct vp_error e;

	if (vp_ipc_client_connect(&s->cli, s->addr, CONNECT_TIMEOUT_MS, &e) < 0)
		return session_fail(s, "cannot connect to the tracing service "
				    "at %s: %s", s->addr, e.msg);
	if (vp_ipc_client_bind(s->cli, "ConsumerPort", CONNECT_TIMEOUT_MS,
			       &e) < 0)
		return session_fail(s, "%s: cannot bind ConsumerPort: %s",
				    s->addr, e.msg);
	return 0;
}

/* Packs a protobuf-c message and invokes method with it. */
static int invoke_msg(struct session *s, const char *method,
		      const ProtobufCMessage *args, int pass_fd,
		      vp_ipc_reply_cb cb, void *ctx)
{
	size_t len = protobuf_c_message_get_packed_size(args);
	uint8_t *buf = malloc(len ? len : 1);
	struct vp_error e;

	if (!buf)
		return session_fail(s, "out of memory");
	protobuf_c_message_pack(args, buf);
	int r = vp_ipc_client_invoke(s->cli, method, buf, len, pass_fd, cb, ctx,
				     &e);
	free(buf);
	if (r < 0)
		return session_fail(s, "%s: %s failed: %s", s->addr, method,
				    e.msg);
	return 0;
}

/* Invokes method and waits for its single reply. */
static int call_msg(struct session *s, const char *method,
		    const ProtobufCMessage *args, uint8_t **reply,
		    size_t *reply_len)
{
	size_t len = protobuf_c_message_get_packed_size(args);
	uint8_t *buf = malloc(len ? len : 1);
	struct vp_error e;
	int fd = -1;

	if (!buf)
		return session_fail(s, "out of memory");
	protobuf_c_message_pack(args, buf);
	int r = vp_ipc_client_call(s->cli, method, buf, len, reply, reply_len,
				   &fd, CALL_TIMEOUT_MS, &e);
	free(buf);
	if (fd >= 0)
		close(fd);
	if (r < 0)
		return session_fail(s, "%s: %s failed: %s", s->addr, method,
				    e.msg);
	return 0;
}

static void on_enable_reply(void *ctx, const struct vp_ipc_reply *r)
{
	struct session *s = ctx;

	if (r->fd >= 0)
		close(r->fd);
	s->ended = true;
	if (!r->success) {
		session_fail(s, "%s: EnableTracing: %s", s->addr,
			     reply_failure(r));
		return;
	}
	Perfetto__Protos__EnableTracingResponse *resp =
		perfetto__protos__enable_tracing_response__unpack(NULL, r->len,
								  r->data);
	if (!resp) {
		session_fail(s, "%s: EnableTracing: malformed reply", s->addr);
		return;
	}
	if (resp->error && resp->error[0])
		session_fail(s, "tracing failed: %s", resp->error);
	perfetto__protos__enable_tracing_response__free_unpacked(resp, NULL);
	/* -D: a session that ended well had started (whether or not its
	 * event was seen). */
	bg_notify(!s->failed, s->err.msg);
}

/* -D: ObserveEvents(ALL_DATA_SOURCES_STARTED), as Perfetto's does: the
 * waiting parent is told when the event comes.  If the service cannot
 * observe, the parent is told when the session ends instead. */
static void on_observe_reply(void *ctx, const struct vp_ipc_reply *r)
{
	(void)ctx;
	if (r->fd >= 0)
		close(r->fd);
	if (!r->success || !r->len)
		return;
	Perfetto__Protos__ObserveEventsResponse *resp =
		perfetto__protos__observe_events_response__unpack(NULL, r->len,
								  r->data);
	if (!resp)
		return;
	if (resp->events && resp->events->has_all_data_sources_started &&
	    resp->events->all_data_sources_started)
		bg_notify(true, NULL);
	perfetto__protos__observe_events_response__free_unpacked(resp, NULL);
}

static int observe_started(struct session *s)
{
	Perfetto__Protos__ObserveEventsRequest rq =
		PERFETTO__PROTOS__OBSERVE_EVENTS_REQUEST__INIT;
	Perfetto__Protos__ObservableEvents__Type ev =
		PERFETTO__PROTOS__OBSERVABLE_EVENTS__TYPE__TYPE_ALL_DATA_SOURCES_STARTED;

	rq.n_events_to_observe = 1;
	rq.events_to_observe = &ev;
	return invoke_msg(s, "ObserveEvents", &rq.base, -1, on_observe_reply,
			  NULL);
}

static void on_flush_reply(void *ctx, const struct vp_ipc_reply *r)
{
	struct session *s = ctx;

	if (r->fd >= 0)
		close(r->fd);
	if (!r->success && !r->disconnected)
		vp_log_warn("flush failed; stopping anyway");
	s->flush_done = true;
}

static void on_ignored_reply(void *ctx, const struct vp_ipc_reply *r)
{
	(void)ctx;
	if (r->fd >= 0)
		close(r->fd);
}

/* First signal: Flush; once it is answered (or late), DisableTracing. */
static int advance_stop(struct session *s)
{
	if (!s->stopping) {
		Perfetto__Protos__FlushRequest fr =
			PERFETTO__PROTOS__FLUSH_REQUEST__INIT;
		fr.has_timeout_ms = 1;
		fr.timeout_ms = FLUSH_TIMEOUT_MS;
		vp_log_warn("stopping (again to abort)");
		s->stopping = true;
		s->flush_deadline = vp_loop_now_ms() + FLUSH_TIMEOUT_MS + 1000;
		if (invoke_msg(s, "Flush", &fr.base, -1, on_flush_reply, s) < 0)
			return -1;
	}
	if (!s->disable_sent &&
	    (s->flush_done || vp_loop_now_ms() >= s->flush_deadline)) {
		Perfetto__Protos__DisableTracingRequest dr =
			PERFETTO__PROTOS__DISABLE_TRACING_REQUEST__INIT;
		s->disable_sent = true;
		return invoke_msg(s, "DisableTracing", &dr.base, -1,
				  on_ignored_reply, NULL);
	}
	return 0;
}

/* Polls until *done.  While tracing (stoppable), the first signal stops
 * the session cleanly and the second aborts; afterwards (reading the
 * buffers) only a second signal aborts; for one-shot commands (query) the
 * first does. */
static int wait_for(struct session *s, const bool *done, bool stoppable,
		    int abort_at)
{
	struct vp_error e;

	while (!*done && !s->failed) {
		int sigs = vp_out_signal_count();
		if (sigs >= abort_at)
			return session_fail(s, "aborted by signal");
		if (stoppable && (sigs > 0 || s->stopping) &&
		    advance_stop(s) < 0)
			return -1;
		if (vp_ipc_client_poll(s->cli, POLL_SLICE_MS, &e) < 0 && !*done)
			return session_fail(s, "%s: %s", s->addr, e.msg);
	}
	return s->failed ? -1 : 0;
}

/* ---- the trace on stdout (-o -) ------------------------------------------ */

/* -o names stdout: "-", as in Perfetto, or one of its device names (those
 * are written the same way: appended to what stdout is, never replaced
 * through a rename, and never a terminal). */
static bool out_is_stdout(const char *out)
{
	return out && (!strcmp(out, "-") || !strcmp(out, "/dev/stdout") ||
		       !strcmp(out, "/dev/fd/1") ||
		       !strcmp(out, "/proc/self/fd/1"));
}

/* stdout can take the trace: open, and not a terminal.  out: how -o
 * named it, for the message. */
static int check_stdout(const char *out, struct vp_error *e)
{
	struct stat st;

	if (fstat(STDOUT_FILENO, &st) < 0)
		return vp_errorf(e, "-o %s: stdout is not open (%s)", out,
				 strerror(errno));
	if (isatty(STDOUT_FILENO))
		return vp_errorf(e, "-o %s: stdout is a terminal; refusing to "
				 "write a binary trace to it (redirect it: "
				 "-o - > FILE, or -o - | PROGRAM)", out);
	return 0;
}

/* Writes all of p to stdout, waiting where it is non-blocking. */
static int stdout_write(struct session *s, const uint8_t *p, size_t n,
			struct vp_error *e)
{
	if (n > 0)
		s->stdout_dirty = true;
	while (n > 0) {
		ssize_t w = write(STDOUT_FILENO, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			struct pollfd pfd = {.fd = STDOUT_FILENO,
					     .events = POLLOUT};
			if (poll(&pfd, 1, -1) < 0 && errno != EINTR)
				return vp_errorf(e, "stdout: cannot write the "
						 "trace: %s", strerror(errno));
			continue;
		}
		if (w < 0 && errno == EPIPE)
			return vp_errorf(e, "stdout: cannot write the trace: "
					 "its reader has gone away (%s)",
					 strerror(EPIPE));
		if (w <= 0)
			return vp_errorf(e, "stdout: cannot write the trace: %s",
					 strerror(w < 0 ? errno : ENOSPC));
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

static int stdout_open(struct session *s, const char *out,
		       struct vp_error *e)
{
	if (check_stdout(out, e) < 0)
		return -1;
	s->obuf = malloc(STDOUT_BUF);
	if (!s->obuf)
		return vp_errorf(e, "out of memory");
	s->to_stdout = true;
	return 0;
}

static int stdout_flush(struct session *s, struct vp_error *e)
{
	size_t n = s->olen;

	s->olen = 0;
	return stdout_write(s, s->obuf, n, e);
}

/* Appends `0x0A varint(len) packet`, as trace_writer_packet does. */
static int stdout_packet(struct session *s, const uint8_t *p, size_t len,
			 struct vp_error *e)
{
	uint8_t hdr[1 + PB_MAX_VARINT_LEN];
	size_t hl;

	hdr[0] = 0x0a;
	hl = 1 + pb_encode_varint(hdr + 1, len);
	if (s->olen + hl + len > STDOUT_BUF && stdout_flush(s, e) < 0)
		return -1;
	s->obytes += hl + len;
	if (hl + len > STDOUT_BUF)
		return stdout_write(s, hdr, hl, e) < 0
			       ? -1 : stdout_write(s, p, len, e);
	memcpy(s->obuf + s->olen, hdr, hl);
	memcpy(s->obuf + s->olen + hl, p, len);
	s->olen += hl + len;
	return 0;
}

/* ---- reading the buffers ------------------------------------------------ */

static int write_packet(struct session *s)
{
	struct vp_error e;

	if (s->to_stdout ? stdout_packet(s, s->packet.data, s->packet.len,
					 &e) < 0
			 : trace_writer_packet(s->w, s->packet.data,
					       s->packet.len, &e) < 0)
		return session_fail(s, "%s", e.msg);
	s->packets++;
	pb_buf_reset(&s->packet);
	return 0;
}

/* One ReadBuffersResponse: its slices, each data and, on a packet's last,
 * last_slice_for_packet. */
static int take_slices(struct session *s, const uint8_t *buf, size_t len)
{
	struct pb_reader rd;
	struct pb_field f;

	pb_reader_init(&rd, buf, len);
	while (pb_next(&rd, &f)) {
		if (f.num != RBR_SLICES || f.wt != PB_WT_LEN)
			continue;
		struct pb_reader sr;
		struct pb_field sf;
		bool last = false;
		pb_reader_init(&sr, f.data, f.len);
		while (pb_next(&sr, &sf)) {
			if (sf.num == RBR_SLICE_DATA && sf.wt == PB_WT_LEN) {
				if (s->packet.len + sf.len > TRACE_MAX_PACKET)
					return session_fail(
						s, "%s: ReadBuffers: packet "
						"larger than %u bytes", s->addr,
						TRACE_MAX_PACKET);
				pb_put_raw(&s->packet, sf.data, sf.len);
			} else if (sf.num == RBR_SLICE_LAST_SLICE_FOR_PACKET &&
				   sf.wt == PB_WT_VARINT) {
				last = sf.val != 0;
			}
		}
		if (sr.err != PB_OK)
			break;
		if (last && write_packet(s) < 0)
			return -1;
	}
	if (rd.err != PB_OK)
		return session_fail(s, "%s: ReadBuffers: malformed reply (%s)",
				    s->addr, pb_err_str(rd.err));
	return 0;
}

static void on_read_reply(void *ctx, const struct vp_ipc_reply *r)
{
	struct session *s = ctx;

	if (r->fd >= 0)
		close(r->fd);
	if (!r->success) {
		s->read_done = true;
		session_fail(s, "%s: ReadBuffers: %s", s->addr, reply_failure(r));
		return;
	}
	if (!s->failed)
		take_slices(s, r->data, r->len);
	if (!r->has_more)
		s->read_done = true;
}

static int read_buffers(struct session *s)
{
	Perfetto__Protos__ReadBuffersRequest rq =
		PERFETTO__PROTOS__READ_BUFFERS_REQUEST__INIT;

	if (invoke_msg(s, "ReadBuffers", &rq.base, -1, on_read_reply, s) < 0)
		return -1;
	if (wait_for(s, &s->read_done, false, 2) < 0)
		return -1;
	if (s->packet.len > 0)
		vp_log_warn("dropped an incomplete packet of %zu bytes at the "
			    "end of the buffers", s->packet.len);
	return 0;
}

static void free_buffers(struct session *s)
{
	Perfetto__Protos__FreeBuffersRequest rq =
		PERFETTO__PROTOS__FREE_BUFFERS_REQUEST__INIT;
	uint8_t *reply = NULL;
	size_t len;

	/* The trace is already safe; a failure here only costs memory in
	 * the service until the session is dropped with the connection. */
	if (call_msg(s, "FreeBuffers", &rq.base, &reply, &len) < 0) {
		vp_log_warn("%s", s->err.msg);
		s->failed = false;
	}
	free(reply);
}

/* ---- write_into_file ------------------------------------------------------ */

/* The service writes into an out_file.h output through the descriptor
 * passed with EnableTracing; it is committed when the session ends well.
 * With --detach the consumer is gone before that, so the destination is
 * written directly. */

/* ---- commands ----------------------------------------------------------- */

static uint64_t file_size(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 ? (uint64_t)st.st_size : 0;
}

/* Waits for the end of the session (EnableTracing answered), then reads
 * the buffers into OUT, unless the service wrote the file itself. */
static int finish_session(struct session *s, const char *out, bool into_file,
			  struct vp_out **of)
{
	struct vp_error e;

	if (wait_for(s, &s->ended, true, 2) < 0)
		return -1;
	if (into_file && s->to_stdout) {
		free_buffers(s);
		fprintf(stderr, "vperfetto: the service wrote the trace to "
			"stdout\n");
		return 0;
	}
	if (into_file) {
		free_buffers(s);
		struct vp_out *o = *of;
		*of = NULL;
		if (vp_out_commit(o, &e) < 0)
			return session_fail(s, "%s", e.msg);
		fprintf(stderr, "vperfetto: wrote %llu bytes to %s\n",
			(unsigned long long)file_size(out), out);
		return 0;
	}
	if (read_buffers(s) < 0)
		return -1;
	free_buffers(s);
	if (s->to_stdout) {
		if (stdout_flush(s, &e) < 0)
			return session_fail(s, "%s", e.msg);
		fprintf(stderr, "vperfetto: wrote %llu packets (%llu bytes) "
			"to stdout\n", (unsigned long long)s->packets,
			(unsigned long long)s->obytes);
		return 0;
	}
	uint64_t bytes = trace_writer_bytes(s->w);
	struct trace_writer *w = s->w;
	s->w = NULL;
	if (trace_writer_commit(w, &e) < 0)
		return session_fail(s, "%s", e.msg);
	fprintf(stderr, "vperfetto: wrote %llu packets (%llu bytes) to %s\n",
		(unsigned long long)s->packets, (unsigned long long)bytes, out);
	return 0;
}

static int cmd_trace(struct session *s, const struct options *o,
		     vp_trace_config *tc)
{
	bool into_file = tc->has_write_into_file && tc->write_into_file;
	bool std = out_is_stdout(o->out);
	struct vp_out *of = NULL;
	struct vp_error e;
	int rc = -1;

	if (into_file && !o->out)
		return session_fail(s, "write_into_file needs -o OUT");
	/* The output first: a bad path fails before the service is asked. */
	if (into_file && std) {
		/* The service writes stdout itself, in sequence (it never
		 * seeks), through the descriptor passed with EnableTracing. */
		if (check_stdout(o->out, &e) < 0)
			return session_fail(s, "%s", e.msg);
		s->to_stdout = true;
	} else if (into_file) {
		if (vp_out_open(&of, o->out,
				o->detach_key ? VP_OUT_DIRECT : 0, &e) < 0)
			return session_fail(s, "%s", e.msg);
	} else if (!o->detach_key) {
		if (std ? stdout_open(s, o->out, &e) < 0
			: trace_writer_open(&s->w, o->out, &e) < 0)
			return session_fail(s, "%s", e.msg);
	}
	if (connect_service(s) < 0)
		goto out;
	if (bg_fd >= 0 && observe_started(s) < 0)
		goto out;

	Perfetto__Protos__EnableTracingRequest rq =
		PERFETTO__PROTOS__ENABLE_TRACING_REQUEST__INIT;
	rq.trace_config = tc;
	int pass_fd = !into_file ? -1 : std ? STDOUT_FILENO : vp_out_fd(of);
	if (into_file && std)
		s->stdout_lent = true;
	if (invoke_msg(s, "EnableTracing", &rq.base, pass_fd, on_enable_reply,
		       s) < 0)
		goto out;

	if (o->detach_key) {
		Perfetto__Protos__DetachRequest dr =
			PERFETTO__PROTOS__DETACH_REQUEST__INIT;
		uint8_t *reply = NULL;
		size_t len;
		dr.key = (char *)o->detach_key;
		if (call_msg(s, "Detach", &dr.base, &reply, &len) < 0)
			goto out;
		free(reply);
		if (into_file && !std) {
			/* The service has its own descriptor now. */
			if (vp_out_commit(of, &e) < 0) {
				of = NULL;
				session_fail(s, "%s", e.msg);
				goto out;
			}
			of = NULL;
		}
		fprintf(stderr, "vperfetto: session detached as '%s'\n",
			o->detach_key);
		bg_notify(true, NULL); /* the service traces on */
		return 0;
	}
	rc = finish_session(s, o->out, into_file, &of);
out:
	if (rc < 0 && into_file && strstr(s->err.msg, "output file") &&
	    !strstr(s->err.msg, std ? "stdout" : o->out)) {
		char m[sizeof(s->err.msg)];
		snprintf(m, sizeof(m), "%s", s->err.msg);
		vp_errorf(&s->err, "%s: %s", std ? "stdout" : o->out, m);
	}
	if (rc < 0) {
		if (s->w) {
			trace_writer_abort(s->w);
			s->w = NULL;
		}
		vp_out_abort(of);
	}
	return rc;
}

static int cmd_attach(struct session *s, const struct options *o)
{
	Perfetto__Protos__AttachRequest ar = PERFETTO__PROTOS__ATTACH_REQUEST__INIT;
	uint8_t *reply = NULL;
	size_t len = 0;
	struct vp_error e;

	if (out_is_stdout(o->out) ? stdout_open(s, o->out, &e) < 0
				  : trace_writer_open(&s->w, o->out, &e) < 0)
		return session_fail(s, "%s", e.msg);
	ar.key = (char *)o->attach_key;
	if (connect_service(s) < 0 ||
	    call_msg(s, "Attach", &ar.base, &reply, &len) < 0)
		goto fail;
	Perfetto__Protos__AttachResponse *resp =
		perfetto__protos__attach_response__unpack(NULL, len, reply);
	free(reply);
	if (!resp) {
		session_fail(s, "%s: Attach: malformed reply", s->addr);
		goto fail;
	}
	bool into_file = resp->trace_config &&
			 resp->trace_config->has_write_into_file &&
			 resp->trace_config->write_into_file;
	perfetto__protos__attach_response__free_unpacked(resp, NULL);
	bg_notify(true, NULL); /* -D: attached to a session that traces */

	/* Wait for the end of the session, as its first consumer would. */
	Perfetto__Protos__EnableTracingRequest rq =
		PERFETTO__PROTOS__ENABLE_TRACING_REQUEST__INIT;
	rq.has_attach_notification_only = 1;
	rq.attach_notification_only = 1;
	if (invoke_msg(s, "EnableTracing", &rq.base, -1, on_enable_reply, s) < 0)
		goto fail;
	/* --stop: as a first Ctrl-C would, flush and then stop it */
	if (o->stop && advance_stop(s) < 0)
		goto fail;
	if (into_file) {
		/* The service writes the detached session's own file. */
		if (s->w)
			trace_writer_abort(s->w);
		s->w = NULL;
		if (wait_for(s, &s->ended, true, 2) < 0)
			return -1;
		free_buffers(s);
		fprintf(stderr, "vperfetto: session '%s' ended (it wrote its "
			"own output file)\n", o->attach_key);
		return 0;
	}
	if (finish_session(s, o->out, false, NULL) == 0)
		return 0;
fail:
	if (s->w) {
		trace_writer_abort(s->w);
		s->w = NULL;
	}
	return -1;
}

/* QueryServiceState: replies merged as they stream in. */
struct query {
	struct session *s;
	Perfetto__Protos__QueryServiceStateResponse **parts;
	size_t n_parts;
	bool done;
};

static void on_query_reply(void *ctx, const struct vp_ipc_reply *r)
{
	struct query *q = ctx;

	if (r->fd >= 0)
		close(r->fd);
	if (!r->success) {
		q->done = true;
		session_fail(q->s, "%s: QueryServiceState: %s", q->s->addr,
			     reply_failure(r));
		return;
	}
	if (!r->has_more)
		q->done = true;
	Perfetto__Protos__QueryServiceStateResponse *part =
		perfetto__protos__query_service_state_response__unpack(
			NULL, r->len, r->data);
	Perfetto__Protos__QueryServiceStateResponse **grown =
		part ? realloc(q->parts, (q->n_parts + 1) * sizeof(*grown)) : NULL;
	if (!grown) {
		if (part)
			perfetto__protos__query_service_state_response__free_unpacked(
				part, NULL);
		session_fail(q->s, "%s: QueryServiceState: malformed reply",
			     q->s->addr);
		return;
	}
	q->parts = grown;
	q->parts[q->n_parts++] = part;
}

static const char *producer_name(const struct query *q, int32_t id)
{
	for (size_t i = 0; i < q->n_parts; i++) {
		Perfetto__Protos__TracingServiceState *st = q->parts[i]->service_state;
		for (size_t k = 0; st && k < st->n_producers; k++)
			if (st->producers[k]->id == id && st->producers[k]->name)
				return st->producers[k]->name;
	}
	return "?";
}

static void print_state(const struct query *q)
{
	const char *version = NULL;
	int32_t sessions = -1, started = -1;

	printf("Producers:\n  %-6s %-8s %-8s %s\n", "ID", "PID", "UID", "NAME");
	for (size_t i = 0; i < q->n_parts; i++) {
		Perfetto__Protos__TracingServiceState *st = q->parts[i]->service_state;
		if (!st)
			continue;
		if (st->tracing_service_version)
			version = st->tracing_service_version;
		if (st->has_num_sessions)
			sessions = st->num_sessions;
		if (st->has_num_sessions_started)
			started = st->num_sessions_started;
		for (size_t k = 0; k < st->n_producers; k++) {
			Perfetto__Protos__TracingServiceState__Producer *p =
				st->producers[k];
			printf("  %-6d %-8d %-8d %s\n", p->id, p->pid, p->uid,
			       p->name ? p->name : "");
		}
	}
	printf("\nData sources:\n  %-32s %s\n", "NAME", "PRODUCER");
	for (size_t i = 0; i < q->n_parts; i++) {
		Perfetto__Protos__TracingServiceState *st = q->parts[i]->service_state;
		for (size_t k = 0; st && k < st->n_data_sources; k++) {
			Perfetto__Protos__TracingServiceState__DataSource *d =
				st->data_sources[k];
			const char *name = d->ds_descriptor && d->ds_descriptor->name
						   ? d->ds_descriptor->name : "";
			printf("  %-32s %d (%s)\n", name, d->producer_id,
			       producer_name(q, d->producer_id));
		}
	}
	printf("\nService: %s", version ? version : "version unknown");
	if (sessions >= 0)
		printf(", %d sessions (%d started)", sessions,
		       started >= 0 ? started : 0);
	printf("\n");
}

static int cmd_query(struct session *s)
{
	Perfetto__Protos__QueryServiceStateRequest rq =
		PERFETTO__PROTOS__QUERY_SERVICE_STATE_REQUEST__INIT;
	struct query q = {.s = s};
	int rc = -1;

	if (connect_service(s) < 0)
		return -1;
	if (invoke_msg(s, "QueryServiceState", &rq.base, -1, on_query_reply,
		       &q) < 0)
		return -1;
	if (wait_for(s, &q.done, false, 1) == 0) {
		print_state(&q);
		rc = 0;
	}
	/* A late reply must not reach q once it is gone. */
	vp_ipc_client_close(s->cli);
	s->cli = NULL;
	for (size_t i = 0; i < q.n_parts; i++)
		perfetto__protos__query_service_state_response__free_unpacked(
			q.parts[i], NULL);
	free(q.parts);
	return rc;
}

/* ---- main --------------------------------------------------------------- */

static int build_config(const struct options *o, vp_trace_config **tc)
{
	uint32_t ms = 0, kb = 0;
	struct vp_error e;

	if ((o->time && vp_cmd_parse_duration(o->time, &ms, &e) < 0) ||
	    (o->buffer && vp_cmd_parse_size(o->buffer, &kb, &e) < 0))
		goto fail;
	if (o->config_path) {
		if (vp_cmd_load_config(o->config_path, o->txt, tc, &e) < 0)
			goto fail;
	} else if (vp_cmd_light_config(o->track_event, o->events, o->n_events,
				       tc, &e) < 0) {
		goto fail;
	}
	if (vp_cmd_override(*tc, o->time != NULL, ms, o->buffer != NULL, kb,
			    &e) < 0) {
		perfetto__protos__trace_config__free_unpacked(*tc, NULL);
		*tc = NULL;
		goto fail;
	}
	return 0;
fail:
	fprintf(stderr, "vperfetto: %s\n", e.msg);
	return -1;
}

/* The first SIGINT/SIGTERM stops the session cleanly (the trace is
 * written); the second removes the temporary output and exits 128 + N. */
static void install_signals(void)
{
	vp_out_signals(true);
	signal(SIGPIPE, SIG_IGN);
}

/* -o must not be the config it reads (-o -: stdout must not be that
 * file, e.g. appended to with >>). */
static int check_output(const struct options *o)
{
	struct vp_error e;
	const char *in = o->config_path && strcmp(o->config_path, "-")
				 ? o->config_path : NULL;
	const char *out = out_is_stdout(o->out) ? "/dev/stdout" : o->out;

	if (vp_out_check_inputs("-o", out, &in, 1, &e) < 0) {
		fprintf(stderr, "vperfetto: %s\n", e.msg);
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	vp_log_init("vperfetto", VP_LOG_WARN);
	struct options o = {0};
	vp_trace_config *tc = NULL;
	int r = parse_args(argc, argv, &o);

	if (r != 0)
		return r > 0 ? 0 : 1;
	if (check_args(&o) < 0 || check_output(&o) < 0)
		return 1;
	if (!o.query && !o.attach_key && build_config(&o, &tc) < 0)
		return 1;
	/* Before connecting, as Perfetto's does; the parent exits here. */
	if (o.background && go_background(&o, &r) != 0) {
		if (tc)
			perfetto__protos__trace_config__free_unpacked(tc, NULL);
		return r;
	}
	install_signals();

	struct session s = {
		.addr = o.socket ? o.socket : vp_consumer_sock_name(),
	};
	pb_buf_init(&s.packet);
	if (o.query)
		r = cmd_query(&s);
	else if (o.attach_key)
		r = cmd_attach(&s, &o);
	else
		r = cmd_trace(&s, &o, tc);
	if (r < 0)
		fprintf(stderr, "vperfetto: %s\n", s.err.msg);
	bg_notify(r == 0, s.err.msg); /* -D: if not told yet */
	if (r < 0 && s.stdout_dirty)
		fprintf(stderr, "vperfetto: the trace written to stdout is "
			"incomplete\n");
	else if (r < 0 && s.stdout_lent)
		fprintf(stderr, "vperfetto: what the service wrote to stdout, "
			"if anything, is not a whole trace\n");
	free(s.obuf);
	if (s.cli)
		vp_ipc_client_close(s.cli);
	pb_buf_free(&s.packet);
	if (tc)
		perfetto__protos__trace_config__free_unpacked(tc, NULL);
	return r < 0 ? 1 : 0;
}
