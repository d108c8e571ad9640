/*
 * out_file.c - outputs written aside and committed atomically (out_file.h).
 */
#include "out_file.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "vp_log.h"

#define TMP_TAG ".vperfetto-tmp."
#define MAX_SLOTS 64
/* Writeback of a file written aside is started every this many bytes, so
 * that the fsync of the commit finds little left to write. */
#define WRITEBACK_STEP (8u << 20)
/* pieces per writev (Linux takes up to 1024) */
#define OUT_IOV_MAX 64

/* ---- the table a signal handler walks ------------------------------------ */

struct slot {
	volatile sig_atomic_t used;
	char path[PATH_MAX];
};

static struct slot g_slots[MAX_SLOTS];
static pthread_mutex_t g_slots_mu = PTHREAD_MUTEX_INITIALIZER;

static volatile sig_atomic_t g_count;       /* signals seen */
static volatile sig_atomic_t g_cooperative; /* the first one is the program's */
static volatile sig_atomic_t g_committing;  /* renames under way */
static volatile sig_atomic_t g_deferred;    /* a signal that waited for them */
static volatile sig_atomic_t g_installed;

static int slot_add(const char *path)
{
	pthread_mutex_lock(&g_slots_mu);
	for (int i = 0; i < MAX_SLOTS; i++) {
		if (g_slots[i].used)
			continue;
		snprintf(g_slots[i].path, sizeof(g_slots[i].path), "%s", path);
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
		g_slots[i].used = 1;
		pthread_mutex_unlock(&g_slots_mu);
		return i;
	}
	pthread_mutex_unlock(&g_slots_mu);
	return -1; /* still written aside, only not removed on a signal */
}

static void slot_del(int i)
{
	if (i < 0)
		return;
	pthread_mutex_lock(&g_slots_mu);
	g_slots[i].used = 0;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	pthread_mutex_unlock(&g_slots_mu);
}

static bool slot_has(const char *path)
{
	bool found = false;
	pthread_mutex_lock(&g_slots_mu);
	for (int i = 0; i < MAX_SLOTS && !found; i++)
		found = g_slots[i].used && !strcmp(g_slots[i].path, path);
	pthread_mutex_unlock(&g_slots_mu);
	return found;
}

void vp_out_cleanup_all(void)
{
	for (int i = 0; i < MAX_SLOTS; i++)
		if (g_slots[i].used)
			unlink(g_slots[i].path);
}

/* "PROG: interrupted by signal N" and tail, with write(2) only. */
static void say_interrupted(int sig, const char *tail)
{
	char msg[160];
	size_t n = 0;
	const char *parts[] = {program_invocation_short_name,
			       ": interrupted by signal ", NULL,
			       tail};
	char num[4] = {0};
	int k = 0;
	if (sig >= 100)
		num[k++] = (char)('0' + sig / 100);
	if (sig >= 10)
		num[k++] = (char)('0' + sig / 10 % 10);
	num[k] = (char)('0' + sig % 10);
	parts[2] = num;
	for (size_t i = 0; i < 4; i++)
		for (const char *c = parts[i]; *c && n < sizeof(msg); c++)
			msg[n++] = *c;
	if (write(STDERR_FILENO, msg, n) < 0)
		return;
}

/* The signals that ask a program to stop: the ones counted, and the
 * first of which a cooperative program handles itself. */
static const int stop_signals[] = {SIGINT, SIGTERM, SIGHUP};
/* The other signals whose default is to end the process, without a
 * core: they end it too, but only after the temporaries are gone.
 * SIGPIPE ends it quietly (a reader that went away, as `| head`).
 * SIGXFSZ is not here: it is ignored, so that a write past the file
 * size limit fails with EFBIG and is reported as the error it is. */
static const int fatal_signals[] = {SIGPIPE, SIGALRM, SIGUSR1, SIGUSR2,
				    SIGVTALRM, SIGPROF, SIGXCPU};

static bool is_stop_signal(int sig)
{
	return sig == SIGINT || sig == SIGTERM || sig == SIGHUP;
}

static void on_signal(int sig)
{
	int e = errno;
	bool stop = is_stop_signal(sig);
	if (stop)
		g_count++;
	if (stop && g_cooperative && g_count == 1) {
		errno = e;
		return;
	}
	if (g_committing) {
		g_deferred = sig;
		errno = e;
		return;
	}
	vp_out_cleanup_all();
	if (sig != SIGPIPE)
		say_interrupted(sig, ", nothing written\n");
	_exit(128 + sig);
}

/* The set of every signal on_signal takes. */
static void handled_signals(sigset_t *set)
{
	sigemptyset(set);
	for (size_t i = 0; i < sizeof(stop_signals) / sizeof(int); i++)
		sigaddset(set, stop_signals[i]);
	for (size_t i = 0; i < sizeof(fatal_signals) / sizeof(int); i++)
		sigaddset(set, fatal_signals[i]);
}

volatile sig_atomic_t *vp_out_signals(bool cooperative)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	g_cooperative = cooperative;
	for (size_t i = 0; i < sizeof(stop_signals) / sizeof(int); i++)
		sigaction(stop_signals[i], &sa, NULL);
	for (size_t i = 0; i < sizeof(fatal_signals) / sizeof(int); i++)
		sigaction(fatal_signals[i], &sa, NULL);
	signal(SIGXFSZ, SIG_IGN);
	g_installed = 1;
	return &g_count;
}

int vp_out_signal_count(void)
{
	return g_count;
}

/* ---- paths ----------------------------------------------------------------- */

struct vp_out {
	char *path;   /* destination (through a symbolic link) */
	char *shown;  /* as the user gave it, for messages */
	char *tmp;    /* NULL when written directly */
	char *dir;
	int fd;
	int slot;
	int werr;     /* first write error (errno), poisons the commit */
	off_t written, started; /* bytes written; writeback started below */
	bool direct;
	bool created; /* direct: this run created the file */
	struct flusher *fl; /* vp_out_flush_behind's, once started */
	bool flush_behind;
};

/* ---- writeback started by a thread of its own ---------------------------- */

/* Starting writeback costs the caller the block allocation and the
 * submission of the pages (half a millisecond for 8 MiB): with
 * vp_out_flush_behind a thread of the output's own does it, and the
 * writer goes on.  That thread makes the data durable as it comes
 * (fdatasync), not only started: a disk behind a write cache (a virtual
 * disk's host, a drive's own) otherwise empties all of it at the
 * commit's fsync, a wait that grows with the file (a tenth of a second
 * for 200 MB on a virtual disk), where now it overlaps the writing.
 * It syncs whatever has come since its last sync, so on a slow disk its
 * syncs are fewer and larger, never queued.  Its first error is kept
 * for the commit: Linux reports a failed writeback to one sync only. */
struct flusher {
	pthread_t tid;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int fd;
	off_t want, done; /* synced as far as asked, below done */
	int err;          /* errno of its first failed sync, or 0 */
	bool stop;
};

static void *flusher_main(void *arg)
{
	struct flusher *f = arg;

	pthread_mutex_lock(&f->mu);
	for (;;) {
		while (f->want == f->done && !f->stop)
			pthread_cond_wait(&f->cv, &f->mu);
		if (f->want == f->done)
			break;
		off_t to = f->want;
		pthread_mutex_unlock(&f->mu);
		int rc = fdatasync(f->fd);
		int e = errno;
		pthread_mutex_lock(&f->mu);
		if (rc < 0 && !f->err)
			f->err = e;
		f->done = to;
	}
	pthread_mutex_unlock(&f->mu);
	return NULL;
}

/* A flusher for o's file, its signals blocked (they are the program's
 * threads' to take); NULL when no thread can be had. */
static struct flusher *flusher_new(int fd, off_t from)
{
	struct flusher *f = calloc(1, sizeof(*f));
	sigset_t all, old;

	if (!f)
		return NULL;
	f->fd = fd;
	f->want = f->done = from;
	pthread_mutex_init(&f->mu, NULL);
	pthread_cond_init(&f->cv, NULL);
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	int rc = pthread_create(&f->tid, NULL, flusher_main, f);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc != 0) {
		pthread_cond_destroy(&f->cv);
		pthread_mutex_destroy(&f->mu);
		free(f);
		return NULL;
	}
	return f;
}

/* Lets the flusher sync what was asked, and ends it; returns the errno
 * of its first failed sync, or 0. */
static int flusher_end(struct flusher *f)
{
	if (!f)
		return 0;
	pthread_mutex_lock(&f->mu);
	f->stop = true;
	pthread_cond_signal(&f->cv);
	pthread_mutex_unlock(&f->mu);
	pthread_join(f->tid, NULL);
	int err = f->err;
	pthread_cond_destroy(&f->cv);
	pthread_mutex_destroy(&f->mu);
	free(f);
	return err;
}

static char *dir_of(const char *path)
{
	const char *slash = strrchr(path, '/');
	if (!slash)
		return strdup(".");
	if (slash == path)
		return strdup("/");
	return strndup(path, (size_t)(slash - path));
}

static const char *base_of(const char *path)
{
	const char *slash = strrchr(path, '/');
	return slash ? slash + 1 : path;
}

/* The file a name stands for: a symbolic link is followed, so the link
 * stays and its target is replaced. */
static char *resolve(const char *path)
{
	char *cur = strdup(path);
	struct stat st;

	/* A dangling link names the file to create: follow it by hand. */
	for (int depth = 0; cur && depth < 16; depth++) {
		if (lstat(cur, &st) != 0 || !S_ISLNK(st.st_mode))
			return cur;
		char *real = realpath(cur, NULL);
		if (real) {
			free(cur);
			return real;
		}
		char target[PATH_MAX];
		ssize_t n = readlink(cur, target, sizeof(target) - 1);
		if (n <= 0)
			return cur;
		target[n] = 0;
		char *next = NULL;
		if (target[0] == '/') {
			next = strdup(target);
		} else {
			char *d = dir_of(cur);
			if (d && asprintf(&next, "%s/%s", d, target) < 0)
				next = NULL;
			free(d);
		}
		free(cur);
		cur = next;
	}
	return cur;
}

/* "DIR/NAME" with DIR made absolute, for comparing names of files that do
 * not exist yet. */
static char *canonical(const char *path)
{
	char *r = resolve(path), *d = r ? dir_of(r) : NULL, *out = NULL;
	char *rd = d ? realpath(d, NULL) : NULL;
	if (r && rd && asprintf(&out, "%s/%s", rd, base_of(r)) < 0)
		out = NULL;
	if (!out && r)
		out = strdup(r);
	free(rd);
	free(d);
	free(r);
	return out;
}

int vp_out_check_inputs(const char *what, const char *out,
			const char *const *inputs, size_t n_inputs,
			struct vp_error *err)
{
	struct stat so, si;
	if (!out || stat(out, &so) != 0)
		return 0;
	for (size_t i = 0; i < n_inputs; i++) {
		if (!inputs[i] || stat(inputs[i], &si) != 0)
			continue;
		if (si.st_dev == so.st_dev && si.st_ino == so.st_ino)
			return vp_errorf(err, "%s %s names the input %s; refusing "
					 "to overwrite an input", what, out,
					 inputs[i]);
	}
	return 0;
}

int vp_out_check_distinct(const char *what_a, const char *a,
			  const char *what_b, const char *b,
			  struct vp_error *err)
{
	struct stat sa, sb;
	bool same;
	if (!a || !b)
		return 0;
	if (stat(a, &sa) == 0 && stat(b, &sb) == 0) {
		same = sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
	} else {
		char *ca = canonical(a), *cb = canonical(b);
		same = ca && cb && !strcmp(ca, cb);
		free(ca);
		free(cb);
	}
	if (same)
		return vp_errorf(err, "%s %s and %s %s name the same file",
				 what_a, a, what_b, b);
	return 0;
}

/* Removes ".BASE.vperfetto-tmp.PID[.old]" in dir whose PID is not
 * running (or is this process, reusing a dead one's PID, and not one of
 * this run's own files). */
static void clean_stale(const char *dir, const char *base)
{
	DIR *d = opendir(dir);
	if (!d)
		return;
	size_t bl = strlen(base), tl = strlen(TMP_TAG);
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		const char *n = e->d_name;
		if (n[0] != '.' || strncmp(n + 1, base, bl) ||
		    strncmp(n + 1 + bl, TMP_TAG, tl))
			continue;
		const char *p = n + 1 + bl + tl;
		char *end;
		errno = 0;
		long pid = strtol(p, &end, 10);
		if (errno || end == p || pid <= 0 || pid > INT_MAX ||
		    (*end && strcmp(end, ".old")))
			continue;
		bool dead = kill((pid_t)pid, 0) < 0 && errno == ESRCH;
		char full[PATH_MAX];
		if (snprintf(full, sizeof(full), "%s/%s", dir, n) >=
		    (int)sizeof(full))
			continue;
		if (pid == getpid())
			dead = !slot_has(full);
		if (dead)
			unlink(full);
	}
	closedir(d);
}

static void out_free(struct vp_out *o)
{
	(void)flusher_end(o->fl);
	if (o->fd >= 0)
		close(o->fd);
	slot_del(o->slot);
	free(o->path);
	free(o->shown);
	free(o->tmp);
	free(o->dir);
	free(o);
}

int vp_out_open(struct vp_out **out, const char *path, unsigned flags,
		struct vp_error *err)
{
	struct vp_out *o = calloc(1, sizeof(*o));
	struct stat st;
	bool exists;

	*out = NULL;
	if (!o)
		return vp_errorf(err, "%s: out of memory", path);
	if (!*base_of(path)) {
		free(o);
		return vp_errorf(err, "'%s': not a file name", path);
	}
	o->fd = -1;
	o->slot = -1;
	o->shown = strdup(path);
	/* A pipe or device (also through /dev/stdout, /proc/self/fd/N) is
	 * opened by the name given: such links lead nowhere else. */
	if (stat(path, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode))
		o->path = strdup(path);
	else
		o->path = resolve(path);
	o->dir = o->path ? dir_of(o->path) : NULL;
	if (!o->shown || !o->path || !o->dir) {
		out_free(o);
		return vp_errorf(err, "%s: out of memory", path);
	}
	exists = stat(o->path, &st) == 0;
	if (exists && S_ISDIR(st.st_mode)) {
		out_free(o);
		return vp_errorf(err, "%s: cannot write: %s", path,
				 strerror(EISDIR));
	}
	/* A FIFO or a device is written as it is, never replaced. */
	if ((flags & VP_OUT_DIRECT) || (exists && !S_ISREG(st.st_mode))) {
		o->direct = true;
		o->created = !exists;
		o->fd = open(o->path,
			     O_WRONLY | O_CREAT | O_CLOEXEC |
				     (exists && !S_ISREG(st.st_mode) ? 0
								     : O_TRUNC),
			     0666);
		if (o->fd < 0) {
			int e = errno;
			out_free(o);
			return vp_errorf(err, "%s: cannot create output: %s",
					 path, strerror(e));
		}
		*out = o;
		return 0;
	}

	const char *base = base_of(o->path);
	clean_stale(o->dir, base);
	if (asprintf(&o->tmp, "%s/.%s" TMP_TAG "%ld", o->dir, base,
		     (long)getpid()) < 0) {
		o->tmp = NULL;
		out_free(o);
		return vp_errorf(err, "%s: out of memory", path);
	}
	if (slot_has(o->tmp)) {
		free(o->tmp);
		o->tmp = NULL;
		out_free(o);
		return vp_errorf(err, "%s: already an output of this run", path);
	}
	o->fd = open(o->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
	if (o->fd < 0) {
		int e = errno;
		vp_errorf(err, "%s: cannot create output: %s", path,
			  strerror(e));
		free(o->tmp);
		o->tmp = NULL;
		out_free(o);
		return -1;
	}
	o->slot = slot_add(o->tmp);
	/* The new file keeps the mode of the one it replaces: a private
	 * trace stays private. */
	if (exists)
		fchmod(o->fd, st.st_mode & 07777);
	*out = o;
	return 0;
}

int vp_out_fd(const struct vp_out *o) { return o->fd; }
const char *vp_out_path(const struct vp_out *o) { return o->shown; }
const char *vp_out_temp_path(const struct vp_out *o)
{
	return o->tmp ? o->tmp : o->path;
}

/* Starts the disk writes of what was written since the last call, when
 * that is a step's worth: they then overlap the rest of the run instead
 * of all waiting for the fsync of the commit.  Only a start (the commit's
 * fsync is what makes the data durable), and only for a file written
 * aside; an error here is left for that fsync to report. */
static void start_writeback(struct vp_out *o)
{
	if (o->direct || o->written - o->started < (off_t)WRITEBACK_STEP)
		return;
	if (o->flush_behind && !o->fl)
		o->fl = flusher_new(o->fd, o->started);
	if (o->fl) {
		pthread_mutex_lock(&o->fl->mu);
		o->fl->want = o->written;
		pthread_cond_signal(&o->fl->cv);
		pthread_mutex_unlock(&o->fl->mu);
	} else {
		(void)sync_file_range(o->fd, o->started,
				      o->written - o->started,
				      SYNC_FILE_RANGE_WRITE);
	}
	o->started = o->written;
}

void vp_out_flush_behind(struct vp_out *o)
{
	o->flush_behind = true;
}

int vp_out_write(struct vp_out *o, const void *buf, size_t len,
		 struct vp_error *err)
{
	const uint8_t *p = buf;
	if (o->werr)
		return vp_errorf(err, "%s: cannot write: %s", o->shown,
				 strerror(o->werr));
	while (len) {
		ssize_t n = write(o->fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			o->werr = n < 0 ? errno : ENOSPC;
			return vp_errorf(err, "%s: cannot write: %s", o->shown,
					 strerror(o->werr));
		}
		p += n;
		len -= (size_t)n;
		o->written += n;
	}
	start_writeback(o);
	return 0;
}

int vp_out_writev(struct vp_out *o, const struct iovec *iov, int n,
		  struct vp_error *err)
{
	struct iovec v[OUT_IOV_MAX];

	if (o->werr)
		return vp_errorf(err, "%s: cannot write: %s", o->shown,
				 strerror(o->werr));
	while (n > 0) {
		/* a copy to step through: a short write ends mid-piece */
		int k = n < OUT_IOV_MAX ? n : OUT_IOV_MAX;
		memcpy(v, iov, (size_t)k * sizeof(v[0]));
		iov += k;
		n -= k;
		struct iovec *p = v;
		for (;;) {
			while (k > 0 && p->iov_len == 0) /* nothing to write */
				p++, k--;
			if (k == 0)
				break;
			ssize_t w = writev(o->fd, p, k);
			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0) {
				o->werr = w < 0 ? errno : ENOSPC;
				return vp_errorf(err, "%s: cannot write: %s",
						 o->shown, strerror(o->werr));
			}
			o->written += w;
			size_t left = (size_t)w;
			while (k > 0 && left >= p->iov_len) {
				left -= p->iov_len;
				p++, k--;
			}
			if (k > 0) { /* a short write ended inside *p */
				p->iov_base = (uint8_t *)p->iov_base + left;
				p->iov_len -= left;
			}
		}
	}
	start_writeback(o);
	return 0;
}

void vp_out_abort(struct vp_out *o)
{
	if (!o)
		return;
	if (o->tmp)
		unlink(o->tmp);
	else if (o->direct && o->created)
		unlink(o->path);
	out_free(o);
}

/* ---- commit ------------------------------------------------------------------ */

enum step { NOT_YET, EXCHANGED, LINKED, CREATED, UNDOABLE };

static void sync_dir(const char *dir)
{
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd >= 0) {
		fsync(dfd);
		close(dfd);
	}
}

/* fsync and close; direct outputs to a pipe or device skip what they
 * cannot do. */
static int finish_data(struct vp_out *o, struct vp_error *err)
{
	if (o->werr)
		return vp_errorf(err, "%s: cannot write: %s", o->shown,
				 strerror(o->werr));
	int ferr = flusher_end(o->fl); /* its last sync first */
	o->fl = NULL;
	if (ferr)
		return vp_errorf(err, "%s: cannot sync: %s", o->shown,
				 strerror(ferr));
	if (fsync(o->fd) < 0 && !(o->direct && (errno == EINVAL ||
						errno == EROFS)))
		return vp_errorf(err, "%s: cannot sync: %s", o->shown,
				 strerror(errno));
	int fd = o->fd;
	o->fd = -1;
	if (close(fd) < 0 && errno != EINTR)
		return vp_errorf(err, "%s: cannot close: %s", o->shown,
				 strerror(errno));
	return 0;
}

/* Puts o in place, remembering how, so that it can be undone. */
static int put_in_place(struct vp_out *o, enum step *how, char **aside,
			struct vp_error *err)
{
	struct stat st;
	if (lstat(o->path, &st) != 0) {
		if (rename(o->tmp, o->path) != 0)
			return vp_errorf(err, "%s: cannot rename %s into place: "
					 "%s", o->shown, o->tmp, strerror(errno));
		*how = CREATED;
		return 0;
	}
	if (!S_ISREG(st.st_mode))
		return vp_errorf(err, "%s: no longer a regular file; not "
				 "replacing it", o->shown);
	/* The old file moves to the temporary's name, the new one into
	 * place, in one step. */
	if (renameat2(AT_FDCWD, o->tmp, AT_FDCWD, o->path,
		      RENAME_EXCHANGE) == 0) {
		*how = EXCHANGED;
		return 0;
	}
	/* Where the file system cannot exchange: a second link to the old
	 * file, then the rename over it. */
	if (asprintf(aside, "%s.old", o->tmp) < 0) {
		*aside = NULL;
		return vp_errorf(err, "%s: out of memory", o->shown);
	}
	unlink(*aside);
	if (link(o->path, *aside) == 0) {
		if (rename(o->tmp, o->path) != 0) {
			int e = errno;
			unlink(*aside);
			return vp_errorf(err, "%s: cannot rename %s into place: "
					 "%s", o->shown, o->tmp, strerror(e));
		}
		*how = LINKED;
		return 0;
	}
	free(*aside);
	*aside = NULL;
	if (rename(o->tmp, o->path) != 0)
		return vp_errorf(err, "%s: cannot rename %s into place: %s",
				 o->shown, o->tmp, strerror(errno));
	*how = UNDOABLE;
	return 0;
}

static void undo(struct vp_out *o, enum step how, const char *aside)
{
	switch (how) {
	case EXCHANGED:
		if (renameat2(AT_FDCWD, o->tmp, AT_FDCWD, o->path,
			      RENAME_EXCHANGE) != 0)
			vp_log_error("%s: cannot restore the previous file "
				     "(it is %s): %s", o->shown, o->tmp,
				     strerror(errno));
		else
			unlink(o->tmp);
		break;
	case LINKED:
		if (rename(aside, o->path) != 0)
			vp_log_error("%s: cannot restore the previous file "
				     "(it is %s): %s", o->shown, aside,
				     strerror(errno));
		break;
	case CREATED:
		unlink(o->path);
		break;
	case UNDOABLE:
		vp_log_error("%s: replaced, and the previous file cannot be "
			     "restored", o->shown);
		break;
	case NOT_YET:
		break;
	}
}

int vp_out_commit_all(struct vp_out **outs, size_t n, struct vp_error *err)
{
	enum step how[n ? n : 1];
	char *aside[n ? n : 1];
	sigset_t block, old;
	size_t i, done = 0;
	int rc = 0;

	handled_signals(&block);
	pthread_sigmask(SIG_BLOCK, &block, &old);
	g_committing = 1;

	for (i = 0; i < n; i++) {
		how[i] = NOT_YET;
		aside[i] = NULL;
	}
	/* Every file complete and on disk before any is renamed. */
	for (i = 0; i < n && rc == 0; i++)
		if (outs[i] && finish_data(outs[i], err) < 0)
			rc = -1;
	for (i = 0; i < n && rc == 0; i++, done = i) {
		if (!outs[i] || outs[i]->direct)
			continue;
		if (put_in_place(outs[i], &how[i], &aside[i], err) < 0)
			rc = -1;
	}
	if (rc < 0) {
		for (i = done; i-- > 0;)
			if (outs[i])
				undo(outs[i], how[i], aside[i]);
	}
	for (i = 0; i < n; i++) {
		struct vp_out *o = outs[i];
		if (!o)
			continue;
		if (o->tmp && (rc < 0 || how[i] == EXCHANGED || how[i] == NOT_YET))
			unlink(o->tmp); /* the new file, or the old one */
		if (aside[i]) {
			if (rc == 0)
				unlink(aside[i]);
			free(aside[i]);
		}
		if (rc < 0 && o->direct && o->created)
			unlink(o->path);
		if (rc == 0)
			sync_dir(o->dir);
		out_free(o);
		outs[i] = NULL;
	}

	g_committing = 0;
	if (g_deferred && g_installed) {
		/* A signal came while the files were being renamed: they are
		 * complete now; stop as it asked. */
		vp_out_cleanup_all();
		say_interrupted(g_deferred, " after the outputs were written\n");
		_exit(128 + g_deferred);
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return rc;
}

int vp_out_commit(struct vp_out *o, struct vp_error *err)
{
	return vp_out_commit_all(&o, 1, err);
}
