/*
 * ctl_client_tool.c - drives vperfetto_guest_ctl through the host's client
 * library (host/guest_ctl_client.h), for the end-to-end tests.
 *
 * Usage: ctl_client_tool ADDR STEP...
 *
 * ADDR: a socket address or device path (vp_guest_ctl_connect), or
 * pty:FILE: make a pseudo-terminal, write its slave's path to FILE (the
 * daemon is then started on it) and talk over the master.
 *
 * Steps, run in order on one connection:
 *   garbage            write junk (random bytes, a corrupted frame, a
 *                      header claiming an oversize payload, a PONG as an
 *                      echo would bring back) on the link
 *   hello              HELLO (retried for up to 30 s)
 *   start=TXT[:NAME]   START with a text TraceConfig (compiled to binary)
 *   startraw=FILE      START with FILE's bytes as the binary config
 *   stop  ping         STOP, PING
 *   pull=PATH          PULL the trace into PATH
 *   pullslow=PATH:MARK PULL in 16 KiB chunks, 20 ms apart; MARK is created
 *                      when the first chunk arrives
 *   mark=FILE          create FILE
 *   wait=FILE          wait (up to 60 s) until FILE exists
 *   sleep=MS
 * A step written !step must fail.  Each step prints "ok STEP ..." or
 * "failed STEP: message"; the exit status is 1 as soon as a step does not
 * do what was expected.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>

#include "cmd_config.h"
#include "ctl_proto.h"
#include "guest_ctl_client.h"
#include "ipc_sock.h"

#define TIMEOUT_MS 30000

static int slave_fd = -1; /* the pty's slave, kept open (no hang-ups) */

/* pty:FILE - a pseudo-terminal pair; returns the master. */
static int open_pty(const char *file, struct vp_error *err)
{
	int m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (m < 0 || grantpt(m) < 0 || unlockpt(m) < 0)
		return vp_errorf(err, "posix_openpt: %s", strerror(errno));
	const char *name = ptsname(m);
	slave_fd = name ? open(name, O_RDWR | O_NOCTTY | O_CLOEXEC) : -1;
	struct termios t;
	if (slave_fd < 0 || tcgetattr(slave_fd, &t) < 0)
		return vp_errorf(err, "pty slave: %s", strerror(errno));
	cfmakeraw(&t); /* until the daemon opens it: no echo, no lines */
	tcsetattr(slave_fd, TCSANOW, &t);
	tcgetattr(m, &t);
	cfmakeraw(&t);
	tcsetattr(m, TCSANOW, &t);
	char tmp[4096];
	snprintf(tmp, sizeof(tmp), "%s.tmp", file);
	FILE *f = fopen(tmp, "w");
	if (!f || fprintf(f, "%s\n", name) < 0 || fclose(f) != 0 ||
	    rename(tmp, file) < 0)
		return vp_errorf(err, "%s: %s", file, strerror(errno));
	return m;
}

static int write_all(int fd, const void *buf, size_t len)
{
	const uint8_t *p = buf;
	while (len > 0) {
		ssize_t w = write(fd, p, len);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		len -= (size_t)w;
	}
	return 0;
}

/* Junk a confused or stale link could carry, none of it a valid frame. */
static int send_garbage(int fd)
{
	uint8_t junk[3000];
	struct vp_ctl_msg m = {.type = VP_CTL_PING, .id = 7};
	uint8_t *frame;
	size_t len;

	srand(12345);
	for (size_t i = 0; i < sizeof(junk); i++)
		junk[i] = (uint8_t)rand();
	memcpy(junk + 100, "VPCT", 4);  /* a magic with nonsense after it */
	memcpy(junk + 2990, "VPC", 3);  /* a magic cut short */
	if (write_all(fd, junk, sizeof(junk)) < 0)
		return -1;
	if (vp_ctl_encode(&m, &frame, &len, NULL) < 0)
		return -1;
	frame[len - 1] ^= 0x55; /* payload CRC broken */
	int r = write_all(fd, frame, len);
	frame[len - 1] ^= 0x55;
	/* A header that claims 16 MiB: refused for its length. */
	frame[12] = 0;
	frame[13] = 0;
	frame[14] = 0;
	frame[15] = 1;
	if (r == 0)
		r = write_all(fd, frame, 20);
	free(frame);
	/* A valid frame of a reply type, as an echoing line would return:
	 * the daemon must not answer it. */
	m.type = VP_CTL_PONG;
	if (r == 0 && vp_ctl_encode(&m, &frame, &len, NULL) == 0) {
		r = write_all(fd, frame, len);
		free(frame);
	}
	return r;
}

static int load_text_config(const char *path, uint8_t **buf, size_t *len,
			    struct vp_error *err)
{
	vp_trace_config *tc;
	if (vp_cmd_load_config(path, true, &tc, err) < 0)
		return -1;
	int r = vp_cmd_pack_config(tc, buf, len, err);
	perfetto__protos__trace_config__free_unpacked(tc, NULL);
	return r;
}

static int read_file(const char *path, uint8_t **buf, size_t *len,
		     struct vp_error *err)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return vp_errorf(err, "%s: %s", path, strerror(errno));
	*buf = malloc(1 << 20);
	*len = *buf ? fread(*buf, 1, 1 << 20, f) : 0;
	fclose(f);
	return *buf ? 0 : vp_errorf(err, "out of memory");
}

struct slow {
	const char *marker;
	bool marked;
};

static void on_progress(void *ctx, uint64_t received)
{
	struct slow *s = ctx;
	(void)received;
	if (!s->marked) {
		FILE *f = fopen(s->marker, "w");
		if (f)
			fclose(f);
		s->marked = true;
	}
	usleep(20000);
}

/* One step; 0 or -1 with err. */
static int run_step(struct vp_guest_ctl *c, int fd, const char *step,
		    char *note, size_t notelen, struct vp_error *err)
{
	const char *eq = strchr(step, '=');
	const char *arg = eq ? eq + 1 : "";
	size_t nlen = eq ? (size_t)(eq - step) : strlen(step);
	char name[32], a1[4096];
	char *a2;

	note[0] = '\0';
	snprintf(name, sizeof(name), "%.*s", (int)nlen, step);
	snprintf(a1, sizeof(a1), "%s", arg);
	a2 = strchr(a1, ':');
	if (a2)
		*a2++ = '\0';

	if (!strcmp(name, "garbage"))
		return send_garbage(fd) < 0
			       ? vp_errorf(err, "write: %s", strerror(errno))
			       : 0;
	if (!strcmp(name, "hello")) {
		struct vp_guest_info gi;
		if (vp_guest_ctl_hello(c, TIMEOUT_MS, &gi, err) < 0)
			return -1;
		snprintf(note, notelen, "machine=%s state=%s consumer_ok=%d "
			 "uname=%s", gi.machine, vp_ctl_state_name(gi.state),
			 gi.consumer_ok, gi.uname);
		return 0;
	}
	if (!strcmp(name, "start") || !strcmp(name, "startraw")) {
		uint8_t *cfg = NULL;
		size_t len = 0;
		uint32_t pid = 0;
		int r = name[5] ? read_file(a1, &cfg, &len, err)
				: load_text_config(a1, &cfg, &len, err);
		if (r == 0)
			r = vp_guest_ctl_start(c, cfg, len, a2, TIMEOUT_MS,
					       &pid, err);
		free(cfg);
		if (r == 0)
			snprintf(note, notelen, "consumer pid %u", pid);
		return r;
	}
	if (!strcmp(name, "stop")) {
		uint64_t size = 0;
		if (vp_guest_ctl_stop(c, 60000, &size, err) < 0)
			return -1;
		snprintf(note, notelen, "trace %llu bytes",
			 (unsigned long long)size);
		return 0;
	}
	if (!strcmp(name, "ping")) {
		struct vp_guest_status st;
		int r = vp_guest_ctl_ping(c, TIMEOUT_MS, &st, err);
		if (r == 0)
			snprintf(note, notelen, "state=%s session=%s",
				 vp_ctl_state_name(st.state), st.session);
		return r;
	}
	if (!strcmp(name, "pull") || !strcmp(name, "pullslow")) {
		struct slow s = {.marker = a2};
		uint64_t size = 0;
		bool slow = name[4] != '\0';
		if (vp_guest_ctl_pull(c, a1, slow ? 16384 : 0, TIMEOUT_MS,
				      slow ? on_progress : NULL, &s, &size,
				      err) < 0)
			return -1;
		snprintf(note, notelen, "%llu bytes", (unsigned long long)size);
		return 0;
	}
	if (!strcmp(name, "mark")) {
		FILE *f = fopen(a1, "w");
		return f && fclose(f) == 0
			       ? 0 : vp_errorf(err, "%s: %s", a1,
					       strerror(errno));
	}
	if (!strcmp(name, "wait")) {
		for (int i = 0; i < 6000; i++) {
			if (access(a1, F_OK) == 0)
				return 0;
			usleep(10000);
		}
		return vp_errorf(err, "%s did not appear within 60 s", a1);
	}
	if (!strcmp(name, "sleep")) {
		usleep((useconds_t)atoi(a1) * 1000u);
		return 0;
	}
	return vp_errorf(err, "unknown step \"%s\"", step);
}

int main(int argc, char **argv)
{
	struct vp_guest_ctl *c = NULL;
	struct vp_error err;
	int fd;

	if (argc < 3) {
		fprintf(stderr, "usage: ctl_client_tool ADDR STEP...\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	const char *addr = argv[1];
	bool garbage = false;
	for (int i = 2; i < argc; i++)
		garbage |= strstr(argv[i], "garbage") != NULL;
	if (strncmp(addr, "pty:", 4) == 0 || garbage) {
		/* Our own fd, so that junk can be written under the
		 * library. */
		if (strncmp(addr, "pty:", 4) == 0)
			fd = open_pty(addr + 4, &err);
		else
			fd = vp_sock_connect(strncmp(addr, "unix:", 5)
						     ? addr : addr + 5,
					     TIMEOUT_MS, &err);
		if (fd >= 0 && vp_guest_ctl_from_fd(fd, addr, &c, &err) < 0)
			fd = -1;
	} else {
		fd = vp_guest_ctl_connect(addr, TIMEOUT_MS, &c, &err) < 0
			     ? -1 : 0;
	}
	if (fd < 0) {
		printf("failed connect: %s\n", err.msg);
		return 1;
	}
	for (int i = 2; i < argc; i++) {
		const char *step = argv[i];
		bool must_fail = step[0] == '!';
		char note[1200];
		if (must_fail)
			step++;
		/* The library owns fd; garbage writes under it. */
		int r = run_step(c, fd, step, note, sizeof(note), &err);
		if (r == 0)
			printf("ok %s %s\n", step, note);
		else
			printf("failed %s: %s\n", step, err.msg);
		if ((r == 0) == must_fail) {
			printf("unexpected: %s %s\n", step,
			       must_fail ? "succeeded" : "failed");
			vp_guest_ctl_close(c);
			return 1;
		}
	}
	vp_guest_ctl_close(c);
	if (slave_fd >= 0)
		close(slave_fd);
	return 0;
}
