/*
 * agent_main.c - vperfetto_guest_agent: the guest's half of clock sync.
 *
 * A producer (libvperfetto, system backend) with the track_event category
 * "cros".  While a session enables it the agent writes:
 *   - guest_clock_sync instants every --period-ms: one sandwich sample of
 *     BOOTTIME and MONOTONIC against the CPU counter (uint annotations
 *     clock_sync_boottime, clock_sync_monotonic, clock_sync_cputime); the
 *     event's timestamp is the BOOTTIME value;
 *   - guest_clock_sync_exchange instants every --exchange-period-ms: an
 *     exchange with the host's sync endpoint (sync_seq, guest_cputime_send,
 *     guest_cputime_recv, host_cputime).
 * The ticks and the exchanges run on threads of their own, so a host that
 * is slow, gone or unreachable never delays a tick; the exchange thread
 * reconnects with exponential backoff (100 ms doubling to 5 s).
 *
 * The main thread waits for SIGINT / SIGTERM (or --count), stops both
 * threads through a pipe they poll, flushes, and prints a summary.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agent_exchange.h"
#include "agent_link.h"
#include "vp_clock.h"
#include "vp_version.h"
#include "vperfetto/vperfetto.h"
#include "vp_log.h"

VP_CATEGORY(cros, "cros", "clock sync between the guest and the host");

#define BACKOFF_INITIAL_MS 100u
#define BACKOFF_MAX_MS 5000u
#define CONNECT_TIMEOUT_MS 1000
#define REPLY_TIMEOUT_MS 500
/* Timeouts in a row after which the link is reopened. */
#define TIMEOUTS_BEFORE_REOPEN 3

struct options {
	const char *producer_socket;
	struct ga_host_addr host;
	bool exchange;
	uint32_t period_ms;
	uint32_t exchange_period_ms;
	uint64_t count; /* 0: run until a signal */
};

/* What both threads count; read by the main thread. */
struct stats {
	atomic_uint_fast64_t ticks, ticks_traced;
	atomic_uint_fast64_t ex_ok, ex_failed, connect_failures;
	atomic_uint_fast64_t reconnects, stale_replies, garbage_bytes;
	atomic_int threads_done;
};

struct agent {
	struct options o;
	struct stats st;
	int stop_rd, stop_wr; /* readable once the agent stops */
};

static const char *prog = "vperfetto_guest_agent";

static void usage(FILE *f)
{
	fprintf(f,
		"usage: %s [options]\n"
		"\n"
		"Writes the guest's clock-sync data (track_event category "
		"\"cros\") into\n"
		"the tracing service: guest_clock_sync samples and sync "
		"exchanges with the\n"
		"host's clock producer.\n"
		"\n"
		"options:\n"
		"  --producer-socket ADDR   the tracing service (default: "
		"$PERFETTO_PRODUCER_SOCK_NAME\n"
		"                           or Perfetto's default)\n"
		"  --host ADDR              the host sync endpoint: "
		"vsock://CID:PORT (default\n"
		"                           %s), unix:PATH, or a "
		"virtio-serial port /\n"
		"                           character device / socket path\n"
		"  --no-exchange            samples only, no exchanges\n"
		"  --period-ms N            sample period (default 100)\n"
		"  --exchange-period-ms N   exchange period (default 100)\n"
		"  --count N                stop after N samples and N exchange "
		"attempts\n"
		"  -v, --verbose            log every failure and reconnect\n"
		"  -h, --help               this text\n"
		"  --version                the version\n",
		prog, GA_DEFAULT_HOST);
}

/* A whole decimal number in [min, max]. */
static int parse_num(const char *opt, const char *s, uint64_t min,
		     uint64_t max, uint64_t *out)
{
	char *end;
	errno = 0;
	if (!*s || *s == '-' || *s == '+')
		goto bad;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || *end || v < min || v > max)
		goto bad;
	*out = v;
	return 0;
bad:
	fprintf(stderr, "%s: %s \"%s\": want a number in [%llu, %llu]\n",
		prog, opt, s, (unsigned long long)min,
		(unsigned long long)max);
	return -1;
}

static int parse_options(int argc, char **argv, struct options *o)
{
	enum { O_PRODUCER = 256, O_HOST, O_NO_EX, O_PERIOD, O_EX_PERIOD,
	       O_COUNT, O_VERSION };
	static const struct option longopts[] = {
		{"producer-socket", required_argument, NULL, O_PRODUCER},
		{"host", required_argument, NULL, O_HOST},
		{"no-exchange", no_argument, NULL, O_NO_EX},
		{"period-ms", required_argument, NULL, O_PERIOD},
		{"exchange-period-ms", required_argument, NULL, O_EX_PERIOD},
		{"count", required_argument, NULL, O_COUNT},
		{"verbose", no_argument, NULL, 'v'},
		{"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, O_VERSION},
		{NULL, 0, NULL, 0},
	};
	const char *host = GA_DEFAULT_HOST;
	uint64_t v;
	int c;

	*o = (struct options){.exchange = true, .period_ms = 100,
			      .exchange_period_ms = 100};
	opterr = 0;
	while ((c = getopt_long(argc, argv, "vh", longopts, NULL)) != -1) {
		switch (c) {
		case O_PRODUCER:
			o->producer_socket = optarg;
			break;
		case O_HOST:
			host = optarg;
			break;
		case O_NO_EX:
			o->exchange = false;
			break;
		case O_PERIOD:
			if (parse_num("--period-ms", optarg, 1, 3600000, &v))
				return -1;
			o->period_ms = (uint32_t)v;
			break;
		case O_EX_PERIOD:
			if (parse_num("--exchange-period-ms", optarg, 1,
				      3600000, &v))
				return -1;
			o->exchange_period_ms = (uint32_t)v;
			break;
		case O_COUNT:
			if (parse_num("--count", optarg, 1, UINT32_MAX,
				      &o->count))
				return -1;
			break;
		case 'v':
			vp_log_verbose();
			break;
		case 'h':
			usage(stdout);
			exit(0);
		case O_VERSION:
			printf("vperfetto_guest_agent %s\n", VP_VERSION);
			exit(0);
		default:
			if (optopt)
				fprintf(stderr, "%s: bad option or missing "
						"value: -%c\n", prog, optopt);
			else
				fprintf(stderr, "%s: bad option or missing "
						"value: %s\n", prog,
					argv[optind - 1]);
			return -1;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "%s: unexpected argument \"%s\"\n", prog,
			argv[optind]);
		return -1;
	}
	if (o->exchange) {
		struct vp_error err;
		if (ga_parse_host(host, &o->host, &err) < 0) {
			fprintf(stderr, "%s: %s\n", prog, err.msg);
			return -1;
		}
	}
	return 0;
}

/* Sleeps until CLOCK_MONOTONIC reaches `until` (ns) or the agent stops.
 * Returns true if it stopped. */
static bool sleep_until(struct agent *a, uint64_t until)
{
	for (;;) {
		uint64_t now = vp_clock_now_ns(CLOCK_MONOTONIC);
		struct pollfd p = {.fd = a->stop_rd, .events = POLLIN};
		uint64_t left = until > now ? until - now : 0;
		struct timespec ts = {.tv_sec = (time_t)(left / 1000000000u),
				      .tv_nsec = (long)(left % 1000000000u)};
		int r = ppoll(&p, 1, &ts, NULL);
		if (r > 0)
			return true;
		if (r == 0)
			return false;
		if (errno != EINTR)
			return false;
	}
}

static bool stopping(struct agent *a)
{
	struct pollfd p = {.fd = a->stop_rd, .events = POLLIN};
	return poll(&p, 1, 0) > 0;
}

/* One sample: BOOTTIME and MONOTONIC between two counter reads. */
static void tick(struct agent *a)
{
	static const clockid_t clocks[2] = {CLOCK_BOOTTIME, CLOCK_MONOTONIC};
	struct vp_clock_sample s;

	if (vp_clock_sample(clocks, 2, VP_CLOCK_SAMPLE_TRIES, &s) < 0) {
		vp_log_info("clock sample: %s", strerror(errno));
		return;
	}
	atomic_fetch_add(&a->st.ticks, 1);
	if (!VP_CATEGORY_ENABLED(cros))
		return;
	TRACE_EVENT_INSTANT_AT(cros, "guest_clock_sync", s.clock_ns[0],
			       VP_ARG_UINT("clock_sync_boottime", s.clock_ns[0]),
			       VP_ARG_UINT("clock_sync_monotonic",
					   s.clock_ns[1]),
			       VP_ARG_UINT("clock_sync_cputime", s.counter));
	atomic_fetch_add(&a->st.ticks_traced, 1);
}

/* The sample thread: a tick every period, on an absolute schedule. */
static void *tick_thread(void *arg)
{
	struct agent *a = arg;
	uint64_t period = (uint64_t)a->o.period_ms * 1000000u;
	uint64_t next = vp_clock_now_ns(CLOCK_MONOTONIC);

	while (!stopping(a)) {
		tick(a);
		if (a->o.count && atomic_load(&a->st.ticks) >= a->o.count)
			break;
		next += period;
		uint64_t now = vp_clock_now_ns(CLOCK_MONOTONIC);
		if (next + period < now) /* fell far behind: skip, not burst */
			next = now;
		if (sleep_until(a, next))
			break;
	}
	atomic_fetch_add(&a->st.threads_done, 1);
	return NULL;
}

static uint64_t exchange_attempts(struct agent *a)
{
	return atomic_load(&a->st.ex_ok) + atomic_load(&a->st.ex_failed) +
	       atomic_load(&a->st.connect_failures);
}

static bool exchanges_done(struct agent *a)
{
	return a->o.count && exchange_attempts(a) >= a->o.count;
}

/* Exchanges on an open link until it fails, the agent stops (true) or
 * --count is reached (true).  *last_seq carries seqs across links. */
static bool run_link(struct agent *a, struct ga_link *l, uint64_t *last_seq,
		     struct ga_backoff *bo)
{
	struct ga_exchange x;
	uint64_t period = (uint64_t)a->o.exchange_period_ms * 1000000u;
	uint64_t next = vp_clock_now_ns(CLOCK_MONOTONIC);
	unsigned timeouts = 0;
	bool stop = false;

	ga_exchange_init(&x, l->fd, l->is_socket, *last_seq);
	for (;;) {
		struct ga_exchange_record rec;
		struct vp_error err = {{0}};
		enum ga_exchange_result r =
			ga_exchange_run(&x, a->stop_rd, REPLY_TIMEOUT_MS, &rec,
					&err);
		if (r == GA_EXCHANGE_STOPPED) {
			stop = true;
			break;
		}
		if (r == GA_EXCHANGE_OK) {
			timeouts = 0;
			ga_backoff_reset(bo);
			atomic_fetch_add(&a->st.ex_ok, 1);
			TRACE_EVENT_INSTANT(
				cros, "guest_clock_sync_exchange",
				VP_ARG_UINT("sync_seq", rec.seq),
				VP_ARG_UINT("guest_cputime_send",
					    rec.guest_send),
				VP_ARG_UINT("guest_cputime_recv",
					    rec.guest_recv),
				VP_ARG_UINT("host_cputime", rec.host));
		} else {
			atomic_fetch_add(&a->st.ex_failed, 1);
			vp_log_info("exchange: %s", err.msg);
		}
		if (exchanges_done(a)) {
			stop = true;
			break;
		}
		if (r == GA_EXCHANGE_CLOSED)
			break;
		if (r == GA_EXCHANGE_TIMEOUT &&
		    ++timeouts >= TIMEOUTS_BEFORE_REOPEN) {
			vp_log_info("%u timeouts in a row; reopening the "
				    "link",
				    timeouts);
			break;
		}
		next += period;
		uint64_t now = vp_clock_now_ns(CLOCK_MONOTONIC);
		if (next < now)
			next = now;
		if (sleep_until(a, next)) {
			stop = true;
			break;
		}
	}
	*last_seq = x.seq;
	atomic_fetch_add(&a->st.stale_replies, x.stale_replies);
	atomic_fetch_add(&a->st.garbage_bytes, x.dec.skipped_bytes);
	return stop;
}

/* The exchange thread: connect, exchange, and on failure back off and
 * connect again, until the agent stops. */
static void *exchange_thread(void *arg)
{
	struct agent *a = arg;
	struct ga_backoff bo;
	uint64_t last_seq = 0;
	bool connected_before = false, logged_down = false;
	char name[GA_PATH_MAX + 32];

	ga_host_str(&a->o.host, name, sizeof(name));
	ga_backoff_init(&bo, BACKOFF_INITIAL_MS, BACKOFF_MAX_MS);
	while (!stopping(a)) {
		struct ga_link l;
		struct vp_error err = {{0}};
		if (ga_link_open(&a->o.host, CONNECT_TIMEOUT_MS, &l, &err) < 0) {
			atomic_fetch_add(&a->st.connect_failures, 1);
			/* The first failure of an outage is a warning, the
			 * retries are info. */
			vp_log(logged_down ? VP_LOG_INFO : VP_LOG_WARN,
			       "host %s: %s (retrying)", name, err.msg);
			logged_down = true;
			if (exchanges_done(a))
				break;
			if (sleep_until(a, vp_clock_now_ns(CLOCK_MONOTONIC) + (uint64_t)ga_backoff_next(
							       &bo) * 1000000u))
				break;
			continue;
		}
		if (connected_before)
			atomic_fetch_add(&a->st.reconnects, 1);
		/* After a warning, at its level: the outage is over. */
		vp_log(logged_down ? VP_LOG_WARN : VP_LOG_INFO,
		       "host %s: connected%s", name,
		       logged_down ? " again" : "");
		connected_before = true;
		logged_down = false;
		bool stop = run_link(a, &l, &last_seq, &bo);
		ga_link_close(&l);
		if (stop)
			break;
		vp_log_warn("host %s: link lost (reconnecting)", name);
		logged_down = true;
		if (sleep_until(a, vp_clock_now_ns(CLOCK_MONOTONIC) +
					   (uint64_t)ga_backoff_next(&bo) * 1000000u))
			break;
	}
	atomic_fetch_add(&a->st.threads_done, 1);
	return NULL;
}

/* Waits for SIGINT / SIGTERM (blocked in every thread) or for all threads
 * to finish their --count. */
static void wait_for_end(struct agent *a, const sigset_t *sigs, int n_threads)
{
	struct timespec ts = {.tv_sec = 0, .tv_nsec = 50 * 1000000};
	while (atomic_load(&a->st.threads_done) < n_threads) {
		int s = sigtimedwait(sigs, NULL, &ts);
		if (s == SIGINT || s == SIGTERM)
			return;
	}
}

static void print_summary(struct agent *a)
{
	struct stats *s = &a->st;
	printf("%s: ticks %llu (traced %llu), exchanges ok %llu failed %llu, "
	       "connect failures %llu, reconnects %llu, stale replies %llu, "
	       "garbage bytes %llu\n",
	       prog, (unsigned long long)atomic_load(&s->ticks),
	       (unsigned long long)atomic_load(&s->ticks_traced),
	       (unsigned long long)atomic_load(&s->ex_ok),
	       (unsigned long long)atomic_load(&s->ex_failed),
	       (unsigned long long)atomic_load(&s->connect_failures),
	       (unsigned long long)atomic_load(&s->reconnects),
	       (unsigned long long)atomic_load(&s->stale_replies),
	       (unsigned long long)atomic_load(&s->garbage_bytes));
	fflush(stdout);
}

int main(int argc, char **argv)
{
	vp_log_init("vperfetto_guest_agent", VP_LOG_WARN);
	static struct agent a;
	sigset_t sigs;
	pthread_t th[2];
	int n_threads = 0, fds[2];

	if (parse_options(argc, argv, &a.o) < 0) {
		fprintf(stderr, "usage: %s [options]; see %s --help\n", prog,
			prog);
		return 1;
	}
	if (!VP_HAVE_CPU_COUNTER || !vp_cpu_counter_name()) {
		fprintf(stderr, "%s: no CPU counter on this architecture; "
				"clock sync needs one\n", prog);
		return 1;
	}
	/* The signals are taken by sigtimedwait in the main thread only;
	 * block them before any thread (the SDK's too) starts. */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	signal(SIGPIPE, SIG_IGN);
	if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) < 0) {
		fprintf(stderr, "%s: pipe: %s\n", prog, strerror(errno));
		return 1;
	}
	a.stop_rd = fds[0];
	a.stop_wr = fds[1];

	struct vp_init_args ia = {
		.backend = VP_BACKEND_SYSTEM,
		.producer_name = prog,
		.producer_socket = a.o.producer_socket,
	};
	if (vp_init(&ia) < 0) {
		fprintf(stderr, "%s: cannot start libvperfetto\n", prog);
		return 1;
	}

	if (pthread_create(&th[n_threads], NULL, tick_thread, &a) == 0)
		n_threads++;
	if (a.o.exchange &&
	    pthread_create(&th[n_threads], NULL, exchange_thread, &a) == 0)
		n_threads++;
	if (n_threads < (a.o.exchange ? 2 : 1))
		fprintf(stderr, "%s: cannot start threads\n", prog);
	else
		wait_for_end(&a, &sigs, n_threads);

	/* Stop: the threads poll the pipe in every wait. */
	if (write(a.stop_wr, "x", 1) < 0)
		vp_log_error("stop pipe: %s", strerror(errno));
	for (int i = 0; i < n_threads; i++)
		pthread_join(th[i], NULL);
	vp_flush();
	vp_shutdown();
	print_summary(&a);
	close(a.stop_rd);
	close(a.stop_wr);
	return n_threads < (a.o.exchange ? 2 : 1) ? 1 : 0;
}
