/*
 * guest_ctl.c - the session side of vperfetto_guest_ctl: START / STOP /
 * PULL / PING / HELLO and the consumer process (see guest_ctl.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "event_loop.h"
#include "guest_ctl.h"
#include "vp_log.h"

#define LOG_TAIL 600u

int gc_session_init(struct gc_session *s, const struct gc_options *opt,
		    struct vp_error *err)
{
	struct stat st;

	memset(s, 0, sizeof(*s));
	s->opt = *opt;
	if (s->opt.stop_timeout_ms <= 0)
		s->opt.stop_timeout_ms = GC_STOP_TIMEOUT_MS;
	if (s->opt.start_grace_ms < 0)
		s->opt.start_grace_ms = GC_START_GRACE_MS;
	if (stat(opt->out_dir, &st) < 0)
		return vp_errorf(err, "--out-dir %s: %s", opt->out_dir,
				 strerror(errno));
	if (!S_ISDIR(st.st_mode))
		return vp_errorf(err, "--out-dir %s: not a directory",
				 opt->out_dir);
	if (access(opt->out_dir, W_OK) < 0)
		return vp_errorf(err, "--out-dir %s: not writable: %s",
				 opt->out_dir, strerror(errno));
	if (snprintf(s->cfg_path, sizeof(s->cfg_path), "%s/guest.cfg",
		     opt->out_dir) >= (int)sizeof(s->cfg_path))
		return vp_errorf(err, "--out-dir %s: path too long",
				 opt->out_dir);
	snprintf(s->trace_path, sizeof(s->trace_path), "%s/guest.pb",
		 opt->out_dir);
	snprintf(s->log_path, sizeof(s->log_path), "%s/consumer.log",
		 opt->out_dir);
	s->state = VP_CTL_IDLE;
	s->pid = -1;
	return 0;
}

/* ---- replies ------------------------------------------------------------ */

static void reply_error(const struct vp_ctl_msg *req, gc_send_fn send,
			void *ctx, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static void reply_error(const struct vp_ctl_msg *req, gc_send_fn send,
			void *ctx, const char *fmt, ...)
{
	struct vp_ctl_msg m = {.type = VP_CTL_ERROR, .id = req->id};
	va_list ap;

	m.request_type = req->type;
	va_start(ap, fmt);
	vsnprintf(m.text, sizeof(m.text), fmt, ap);
	va_end(ap);
	vp_log_info("%s (id %u): ERROR: %s", vp_ctl_type_name(req->type),
		    req->id, m.text);
	send(ctx, &m);
}

static uint64_t file_size(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 ? (uint64_t)st.st_size : 0;
}

/* The last lines the consumer wrote, on one line ("" when none). */
static void log_tail(const struct gc_session *s, char *out, size_t cap)
{
	char buf[LOG_TAIL + 1];
	int fd = open(s->log_path, O_RDONLY | O_CLOEXEC);
	size_t n = 0;

	out[0] = '\0';
	if (fd < 0)
		return;
	off_t end = lseek(fd, 0, SEEK_END);
	if (end > 0) {
		off_t from = end > (off_t)LOG_TAIL ? end - (off_t)LOG_TAIL : 0;
		ssize_t r = pread(fd, buf, LOG_TAIL, from);
		n = r > 0 ? (size_t)r : 0;
	}
	close(fd);
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
		n--;
	buf[n] = '\0';
	size_t j = 0;
	for (size_t i = 0; i < n && j + 4 < cap; i++) {
		if (buf[i] == '\n') {
			memcpy(out + j, " | ", 3);
			j += 3;
		} else {
			out[j++] = (buf[i] >= 0x20 && buf[i] < 0x7f) ? buf[i]
								       : '?';
		}
	}
	out[j] = '\0';
}

/* A wait status as the shell reports it, and as words. */
static int32_t status_code(int status)
{
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return -1;
}

static void status_text(int status, char *buf, size_t len)
{
	if (WIFEXITED(status))
		snprintf(buf, len, "exit status %d", WEXITSTATUS(status));
	else if (WIFSIGNALED(status))
		snprintf(buf, len, "killed by signal %d (%s)", WTERMSIG(status),
			 strsignal(WTERMSIG(status)));
	else
		snprintf(buf, len, "wait status 0x%x", status);
}

/* The consumer has exited with status: the session ends or fails. */
static void consumer_exited(struct gc_session *s, int status)
{
	char how[96], tail[VP_CTL_MAX_TEXT / 2];

	s->pid = -1;
	s->exit_status = status_code(status);
	status_text(status, how, sizeof(how));
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0 &&
	    access(s->trace_path, R_OK) == 0) {
		s->state = VP_CTL_ENDED;
		s->message[0] = '\0';
		vp_log_info("consumer ended; %s: %llu bytes", s->trace_path,
			    (unsigned long long)file_size(s->trace_path));
		return;
	}
	log_tail(s, tail, sizeof(tail));
	s->state = VP_CTL_FAILED;
	snprintf(s->message, sizeof(s->message), "guest consumer %s (%s)%s%s",
		 WIFEXITED(status) && WEXITSTATUS(status) == 0
			 ? "wrote no trace" : "failed", how,
		 tail[0] ? ": " : "", tail);
	vp_log_error("%s", s->message);
}

/* ---- START -------------------------------------------------------------- */

static int write_config(const struct gc_session *s, const uint8_t *p,
			size_t n, char *why, size_t whylen)
{
	int fd = open(s->cfg_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
		      0644);
	if (fd < 0) {
		snprintf(why, whylen, "%.300s: %s", s->cfg_path, strerror(errno));
		return -1;
	}
	while (n > 0) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			snprintf(why, whylen, "%.300s: write: %s", s->cfg_path,
				 strerror(errno));
			close(fd);
			return -1;
		}
		p += w;
		n -= (size_t)w;
	}
	close(fd);
	return 0;
}

/* Forks the consumer with stdout and stderr in consumer.log. */
static pid_t spawn_consumer(const struct gc_session *s, char *why,
			    size_t whylen)
{
	int logfd = open(s->log_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
			 0644);
	if (logfd < 0) {
		snprintf(why, whylen, "%.300s: %s", s->log_path, strerror(errno));
		return -1;
	}
	pid_t pid = fork();
	if (pid < 0) {
		snprintf(why, whylen, "fork: %s", strerror(errno));
		close(logfd);
		return -1;
	}
	if (pid == 0) {
		int nul = open("/dev/null", O_RDONLY);
		if (nul >= 0)
			dup2(nul, 0);
		dup2(logfd, 1);
		dup2(logfd, 2);
		/* Its own process group: a terminal's Ctrl-C is ours to
		 * pass on; if we die it still writes its trace. */
		setpgid(0, 0);
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		signal(SIGPIPE, SIG_DFL);
		execl(s->opt.consumer, s->opt.consumer, "-c", s->cfg_path, "-o",
		      s->trace_path, (char *)NULL);
		dprintf(2, "vperfetto_guest_ctl: exec %s: %s\n",
			s->opt.consumer, strerror(errno));
		_exit(127);
	}
	close(logfd);
	return pid;
}

/* A START the host sent again (same key: its first copy or our answer
 * was slow or lost) gets the answer the first got, not a second
 * session. */
static void answer_repeated_start(struct gc_session *s,
				  const struct vp_ctl_msg *req,
				  gc_send_fn send, void *ctx)
{
	vp_log_info("START (id %u) repeats the one that started session "
		    "\"%s\"; answered as it was", req->id, s->session);
	if (s->state == VP_CTL_FAILED) {
		reply_error(req, send, ctx, "%s", s->message);
		return;
	}
	struct vp_ctl_msg m = {.type = VP_CTL_STARTED, .id = req->id};
	m.pid = s->start_pid > 0 ? (uint32_t)s->start_pid : 0;
	send(ctx, &m);
}

static void handle_start(struct gc_session *s, const struct vp_ctl_msg *req,
			 gc_send_fn send, void *ctx)
{
	char why[VP_CTL_MAX_TEXT / 2];
	int status;

	if (req->start_key && req->start_key == s->start_key) {
		answer_repeated_start(s, req, send, ctx);
		return;
	}
	if (s->state == VP_CTL_RUNNING || s->state == VP_CTL_STOPPING) {
		reply_error(req, send, ctx, "session running (\"%s\", "
			    "consumer pid %d); STOP it first", s->session,
			    (int)s->pid);
		return;
	}
	if (req->bytes_len == 0) {
		reply_error(req, send, ctx, "START without a TraceConfig");
		return;
	}
	if (access(s->opt.consumer, X_OK) < 0) {
		reply_error(req, send, ctx, "guest consumer %s: %s",
			    s->opt.consumer, strerror(errno));
		return;
	}
	unlink(s->trace_path);
	if (write_config(s, req->bytes, req->bytes_len, why, sizeof(why)) < 0 ||
	    (s->pid = spawn_consumer(s, why, sizeof(why))) < 0) {
		s->pid = -1;
		reply_error(req, send, ctx, "cannot start the guest "
			    "consumer: %s", why);
		return;
	}
	snprintf(s->session, sizeof(s->session), "%s", req->session);
	s->start_key = req->start_key;
	s->start_pid = s->pid;
	s->state = VP_CTL_RUNNING;
	s->message[0] = '\0';
	s->exit_status = 0;
	s->stop_pending = false;
	vp_log_info("START (id %u) session \"%s\": %s pid %d, config %zu "
		    "bytes",
		    req->id, s->session, s->opt.consumer, (int)s->pid,
		    req->bytes_len);

	/* A consumer that cannot run (bad config, no service) mostly says
	 * so at once: wait a little before calling it started. */
	uint64_t until = vp_loop_now_ms() + (uint64_t)s->opt.start_grace_ms;
	for (;;) {
		pid_t r = waitpid(s->pid, &status, WNOHANG);
		if (r == s->pid) {
			consumer_exited(s, status);
			if (s->state == VP_CTL_FAILED) {
				reply_error(req, send, ctx, "%s", s->message);
				return;
			}
			break; /* ended already: a very short session */
		}
		if (vp_loop_now_ms() >= until)
			break;
		usleep(20000);
	}
	struct vp_ctl_msg m = {.type = VP_CTL_STARTED, .id = req->id};
	m.pid = s->pid > 0 ? (uint32_t)s->pid : 0;
	send(ctx, &m);
}

/* ---- STOP --------------------------------------------------------------- */

/* The reply to a STOP once the consumer is gone. */
static void stop_reply(struct gc_session *s, uint32_t id, gc_send_fn send,
		       void *ctx)
{
	if (s->state == VP_CTL_ENDED) {
		struct vp_ctl_msg m = {.type = VP_CTL_STOPPED, .id = id};
		m.trace_size = file_size(s->trace_path);
		m.exit_status = s->exit_status;
		vp_log_info("STOP (id %u): STOPPED, %llu bytes", id,
			    (unsigned long long)m.trace_size);
		send(ctx, &m);
	} else {
		struct vp_ctl_msg req = {.type = VP_CTL_STOP, .id = id};
		reply_error(&req, send, ctx, "%s", s->message);
	}
}

static void handle_stop(struct gc_session *s, const struct vp_ctl_msg *req,
			gc_send_fn send, void *ctx)
{
	gc_session_tick(s, send, ctx); /* notice a consumer gone already */
	switch (s->state) {
	case VP_CTL_IDLE:
		reply_error(req, send, ctx, "no session to stop");
		return;
	case VP_CTL_ENDED:
	case VP_CTL_FAILED:
		stop_reply(s, req->id, send, ctx);
		return;
	case VP_CTL_RUNNING:
		vp_log_info("STOP (id %u): SIGINT to consumer pid %d", req->id,
			    (int)s->pid);
		kill(s->pid, SIGINT);
		s->state = VP_CTL_STOPPING;
		s->stop_deadline_ms = vp_loop_now_ms() +
				      (uint64_t)s->opt.stop_timeout_ms;
		break;
	default: /* STOPPING: answer the newest STOP */
		break;
	}
	s->stop_pending = true;
	s->stop_id = req->id;
}

void gc_session_tick(struct gc_session *s, gc_send_fn send, void *ctx)
{
	int status;

	if (s->pid <= 0)
		return;
	pid_t r = waitpid(s->pid, &status, WNOHANG);
	if (r == s->pid) {
		consumer_exited(s, status);
	} else if (s->state == VP_CTL_STOPPING &&
		   vp_loop_now_ms() >= s->stop_deadline_ms) {
		char tail[VP_CTL_MAX_TEXT / 2];
		kill(s->pid, SIGKILL);
		waitpid(s->pid, &status, 0);
		s->pid = -1;
		s->exit_status = status_code(status);
		s->state = VP_CTL_FAILED;
		log_tail(s, tail, sizeof(tail));
		snprintf(s->message, sizeof(s->message),
			 "guest consumer did not stop within %d ms of SIGINT; "
			 "killed%s%s", s->opt.stop_timeout_ms,
			 tail[0] ? ": " : "", tail);
		unlink(s->trace_path);
		vp_log_error("%s", s->message);
	} else {
		return;
	}
	if (s->stop_pending) {
		s->stop_pending = false;
		stop_reply(s, s->stop_id, send, ctx);
	}
}

/* ---- PULL --------------------------------------------------------------- */

static void handle_pull(struct gc_session *s, const struct vp_ctl_msg *req,
			gc_send_fn send, void *ctx)
{
	static uint8_t buf[VP_CTL_MAX_CHUNK];
	uint32_t chunk = req->chunk ? req->chunk : VP_CTL_DEFAULT_CHUNK;

	gc_session_tick(s, send, ctx);
	if (s->state == VP_CTL_RUNNING || s->state == VP_CTL_STOPPING) {
		reply_error(req, send, ctx, "no trace to pull: the session "
			    "is %s; STOP it first", vp_ctl_state_name(s->state));
		return;
	}
	if (s->state != VP_CTL_ENDED) {
		reply_error(req, send, ctx, "no trace to pull: %s",
			    s->state == VP_CTL_IDLE ? "no session has run"
						    : s->message);
		return;
	}
	if (chunk > VP_CTL_MAX_CHUNK)
		chunk = VP_CTL_MAX_CHUNK;
	int fd = open(s->trace_path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0) {
		reply_error(req, send, ctx, "%s: %s", s->trace_path,
			    strerror(errno));
		if (fd >= 0)
			close(fd);
		return;
	}
	if (req->offset > (uint64_t)st.st_size) {
		reply_error(req, send, ctx, "PULL offset %llu is past the "
			    "end of %s (%llu bytes)",
			    (unsigned long long)req->offset, s->trace_path,
			    (unsigned long long)st.st_size);
		close(fd);
		return;
	}
	vp_log_info("PULL (id %u): %s from %llu, %llu bytes, chunks of %u",
		    req->id, s->trace_path, (unsigned long long)req->offset,
		    (unsigned long long)st.st_size, chunk);

	/* One pass: the CRC covers the whole file, DATA only what follows
	 * the offset. */
	uLong crc = crc32(0L, Z_NULL, 0);
	uint64_t pos = 0;
	for (;;) {
		ssize_t n = read(fd, buf, chunk);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			reply_error(req, send, ctx, "%s: read at %llu: %s",
				    s->trace_path, (unsigned long long)pos,
				    strerror(errno));
			close(fd);
			return;
		}
		if (n == 0)
			break;
		crc = crc32(crc, buf, (uInt)n);
		uint64_t end = pos + (uint64_t)n;
		if (end > req->offset) {
			size_t skip = pos < req->offset
					      ? (size_t)(req->offset - pos) : 0;
			struct vp_ctl_msg m = {.type = VP_CTL_DATA,
					       .id = req->id};
			m.offset = pos + skip;
			m.bytes = buf + skip;
			m.bytes_len = (size_t)n - skip;
			if (send(ctx, &m) < 0) {
				vp_log_info("PULL (id %u): link failed at "
					    "%llu",
					    req->id,
					    (unsigned long long)m.offset);
				close(fd);
				return;
			}
		}
		pos = end;
	}
	close(fd);
	struct vp_ctl_msg m = {.type = VP_CTL_END, .id = req->id};
	m.total = pos;
	m.crc = (uint32_t)crc;
	send(ctx, &m);
}

/* ---- HELLO, PING -------------------------------------------------------- */

static void handle_hello(struct gc_session *s, const struct vp_ctl_msg *req,
			 gc_send_fn send, void *ctx)
{
	struct vp_ctl_msg m = {.type = VP_CTL_HELLO_REPLY, .id = req->id};
	struct utsname u;

	gc_session_tick(s, send, ctx);
	m.version = VP_CTL_VERSION;
	if (uname(&u) == 0) {
		snprintf(m.machine, sizeof(m.machine), "%s", u.nodename);
		snprintf(m.uname, sizeof(m.uname), "%.60s %.60s %.60s %.60s",
			 u.sysname, u.release, u.version, u.machine);
	}
	snprintf(m.consumer, sizeof(m.consumer), "%s", s->opt.consumer);
	m.consumer_ok = access(s->opt.consumer, X_OK) == 0;
	m.state = s->state;
	m.trace_size = s->state == VP_CTL_ENDED ? file_size(s->trace_path) : 0;
	vp_log_info("HELLO (id %u) from \"%s\", version %u", req->id,
		    req->machine, req->version);
	send(ctx, &m);
}

static void handle_ping(struct gc_session *s, const struct vp_ctl_msg *req,
			gc_send_fn send, void *ctx)
{
	struct vp_ctl_msg m = {.type = VP_CTL_PONG, .id = req->id};

	gc_session_tick(s, send, ctx);
	m.state = s->state;
	m.trace_size = s->state == VP_CTL_ENDED ? file_size(s->trace_path) : 0;
	m.exit_status = s->exit_status;
	snprintf(m.session, sizeof(m.session), "%s", s->session);
	snprintf(m.text, sizeof(m.text), "%s", s->message);
	send(ctx, &m);
}

void gc_session_handle(struct gc_session *s, const struct vp_ctl_msg *req,
		       gc_send_fn send, void *ctx)
{
	switch (req->type) {
	case VP_CTL_HELLO: handle_hello(s, req, send, ctx); break;
	case VP_CTL_START: handle_start(s, req, send, ctx); break;
	case VP_CTL_STOP: handle_stop(s, req, send, ctx); break;
	case VP_CTL_PULL: handle_pull(s, req, send, ctx); break;
	case VP_CTL_PING: handle_ping(s, req, send, ctx); break;
	default:
		/* A reply coming our way is our own frame echoed back (a
		 * serial line with echo on) or a confused peer: answering it
		 * could loop, so it is only logged. */
		vp_log_info("ignored %s (id %u): not a request",
			    vp_ctl_type_name(req->type), req->id);
		break;
	}
}

void gc_session_shutdown(struct gc_session *s, int timeout_ms)
{
	int status;

	if (s->pid <= 0)
		return;
	kill(s->pid, SIGTERM);
	uint64_t until = vp_loop_now_ms() + (uint64_t)timeout_ms;
	while (waitpid(s->pid, &status, WNOHANG) == 0) {
		if (vp_loop_now_ms() >= until) {
			kill(s->pid, SIGKILL);
			waitpid(s->pid, &status, 0);
			break;
		}
		usleep(20000);
	}
	s->pid = -1;
}
