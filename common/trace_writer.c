/*
 * trace_writer.c - crash-safe trace file writer (trace_io.h).
 *
 * Output goes to "<dir>/.<name>.XXXXXX" beside the destination, through a
 * 1 MiB buffer.  Commit flushes, fsyncs, renames over the destination and
 * fsyncs the directory, so the destination is either its old self or the
 * complete new file, never something in between.
 */
#include "trace_io.h"
#include "pb_wire.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define WRITE_BUF (1u << 20)

struct trace_writer {
	int fd;
	char *path;   /* destination */
	char *tmp;    /* temporary file being written */
	uint64_t written;
	size_t fill;
	uint8_t buf[WRITE_BUF];
};

/* Splits path into its directory (a new string). */
static char *dir_of(const char *path)
{
	char *copy = strdup(path);
	if (!copy)
		return NULL;
	char *d = strdup(dirname(copy));
	free(copy);
	return d;
}

int trace_writer_open(struct trace_writer **out, const char *path,
		      struct vp_error *err)
{
	struct trace_writer *w = calloc(1, sizeof(*w));
	char *copy = strdup(path);
	char *dir = dir_of(path);

	if (!w || !copy || !dir) {
		free(w);
		free(copy);
		free(dir);
		return vp_errorf(err, "%s: out of memory", path);
	}
	const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
	size_t n = strlen(dir) + strlen(base) + 16;
	w->tmp = malloc(n);
	if (!w->tmp) {
		free(w);
		free(copy);
		free(dir);
		return vp_errorf(err, "%s: out of memory", path);
	}
	snprintf(w->tmp, n, "%s/.%s.XXXXXX", dir, base);
	free(dir);
	w->path = copy;
	w->fd = mkostemp(w->tmp, O_CLOEXEC);
	if (w->fd < 0) {
		int e = errno;
		free(w->tmp);
		free(w->path);
		free(w);
		return vp_errorf(err, "%s: cannot create output: %s", path,
				 strerror(e));
	}
	/* mkstemp creates 0600; give the file the usual umask-based mode. */
	mode_t um = umask(0);
	umask(um);
	fchmod(w->fd, 0666 & ~um);
	*out = w;
	return 0;
}

static int write_all(struct trace_writer *w, const uint8_t *p, size_t len,
		     struct vp_error *err)
{
	while (len) {
		ssize_t n = write(w->fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return vp_errorf(err, "%s: write error: %s", w->path,
					 strerror(errno));
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static int flush(struct trace_writer *w, struct vp_error *err)
{
	int rc = write_all(w, w->buf, w->fill, err);
	w->fill = 0;
	return rc;
}

int trace_writer_raw(struct trace_writer *w, const void *p, size_t len,
		     struct vp_error *err)
{
	w->written += len;
	if (len > sizeof(w->buf) - w->fill) {
		if (flush(w, err) < 0)
			return -1;
		if (len >= sizeof(w->buf))
			return write_all(w, p, len, err);
	}
	memcpy(w->buf + w->fill, p, len);
	w->fill += len;
	return 0;
}

int trace_writer_packet(struct trace_writer *w, const void *packet, size_t len,
			struct vp_error *err)
{
	uint8_t hdr[1 + PB_MAX_VARINT_LEN];
	hdr[0] = (TRACE_PACKET_FIELD << 3) | PB_WT_LEN;
	size_t n = 1 + pb_encode_varint(hdr + 1, len);
	if (trace_writer_raw(w, hdr, n, err) < 0)
		return -1;
	return trace_writer_raw(w, packet, len, err);
}

uint64_t trace_writer_bytes(const struct trace_writer *w) { return w->written; }
const char *trace_writer_temp_path(const struct trace_writer *w) { return w->tmp; }

static void writer_free(struct trace_writer *w)
{
	free(w->tmp);
	free(w->path);
	free(w);
}

void trace_writer_abort(struct trace_writer *w)
{
	if (!w)
		return;
	close(w->fd);
	unlink(w->tmp);
	writer_free(w);
}

int trace_writer_commit(struct trace_writer *w, struct vp_error *err)
{
	if (flush(w, err) < 0) {
		trace_writer_abort(w);
		return -1;
	}
	if (fsync(w->fd) < 0) {
		vp_errorf(err, "%s: cannot sync output: %s", w->path,
			  strerror(errno));
		trace_writer_abort(w);
		return -1;
	}
	if (close(w->fd) < 0) {
		w->fd = -1;
		vp_errorf(err, "%s: cannot close output: %s", w->path,
			  strerror(errno));
		unlink(w->tmp);
		writer_free(w);
		return -1;
	}
	if (rename(w->tmp, w->path) < 0) {
		vp_errorf(err, "%s: cannot rename %s into place: %s", w->path,
			  w->tmp, strerror(errno));
		unlink(w->tmp);
		writer_free(w);
		return -1;
	}
	/* Make the rename itself durable. */
	char *dir = dir_of(w->path);
	if (dir) {
		int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (dfd >= 0) {
			fsync(dfd);
			close(dfd);
		}
		free(dir);
	}
	writer_free(w);
	return 0;
}
