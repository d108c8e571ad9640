/*
 * tp_input.c - the trace file as the loader reads it (see tp_input.h).
 */
#include "tp_input.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#define CHUNK (256u << 10)

/* An unlinked file to copy a stream into: nothing is left behind, whatever
 * ends the process. */
static int spool_file(const char *path, struct vp_error *err)
{
	const char *dir = getenv("TMPDIR");
	char name[4096];

	if (!dir || dir[0] != '/')
		dir = "/tmp";
	snprintf(name, sizeof(name), "%s/vperfetto_tp.XXXXXX", dir);
	int fd = mkostemp(name, O_CLOEXEC);
	if (fd < 0)
		return vp_errorf(err, "%s: cannot make a file in %s to read "
				 "it into: %s", path, dir, strerror(errno));
	unlink(name);
	return fd;
}

static int write_all(int fd, const uint8_t *p, size_t n, const char *path,
		     struct vp_error *err)
{
	while (n) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return vp_errorf(err, "%s: copying it aside: %s", path,
					 strerror(errno));
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Reads up to n bytes; 0 at the end, -1 on an error. */
static ssize_t read_some(int fd, uint8_t *p, size_t n)
{
	for (;;) {
		ssize_t r = read(fd, p, n);
		if (r >= 0 || errno != EINTR)
			return r;
	}
}

/* Inflates the gzip stream on in (its first `have` bytes already in buf)
 * into out.  A stream that ends early or goes bad keeps what came before
 * it, with a warning, as Perfetto's reader does. */
static int inflate_stream(int in, uint8_t *buf, size_t have, int out,
			  const char *path, uint64_t max_inflate,
			  struct vp_error *warning, struct vp_error *err)
{
	uint8_t *obuf = malloc(CHUNK);
	z_stream z;
	uint64_t total = 0, consumed = 0;
	int rc = Z_OK, status = 0;

	memset(&z, 0, sizeof(z));
	if (!obuf || inflateInit2(&z, 15 + 32) != Z_OK) { /* gzip header */
		free(obuf);
		return vp_errorf(err, "%s: out of memory", path);
	}
	z.next_in = buf;
	z.avail_in = (uInt)have;
	for (;;) {
		if (z.avail_in == 0) {
			ssize_t r = read_some(in, buf, CHUNK);
			if (r < 0) {
				status = vp_errorf(err, "%s: read error: %s",
						   path, strerror(errno));
				break;
			}
			if (r == 0)
				break; /* the input ended: complete or not */
			z.next_in = buf;
			z.avail_in = (uInt)r;
		}
		consumed += z.avail_in;
		z.next_out = obuf;
		z.avail_out = CHUNK;
		rc = inflate(&z, Z_NO_FLUSH);
		consumed -= z.avail_in;
		size_t got = CHUNK - z.avail_out;
		total += got;
		if (max_inflate && total > max_inflate) {
			status = vp_errorf(err, "%s: the gzip trace inflates "
					   "to over %llu bytes; --max-inflate "
					   "sets the cap", path,
					   (unsigned long long)max_inflate);
			break;
		}
		if (got && write_all(out, obuf, got, path, err) < 0) {
			status = -1;
			break;
		}
		if (rc == Z_STREAM_END) {
			/* a gzip file may hold several members, one after
			 * another: each is inflated in turn */
			if (z.avail_in == 0) {
				ssize_t r = read_some(in, buf, CHUNK);
				if (r <= 0)
					break;
				z.next_in = buf;
				z.avail_in = (uInt)r;
			}
			inflateReset(&z);
			continue;
		}
		if (rc != Z_OK && rc != Z_BUF_ERROR) {
			snprintf(warning->msg, sizeof(warning->msg),
				 "%s: gzip byte offset %llu: %s; loading what "
				 "came before", path,
				 (unsigned long long)consumed,
				 z.msg ? z.msg : "corrupt data");
			break;
		}
	}
	if (!status && rc != Z_STREAM_END && !warning->msg[0])
		snprintf(warning->msg, sizeof(warning->msg),
			 "%s: the gzip stream ends early (after %llu bytes); "
			 "loading what came before", path,
			 (unsigned long long)consumed);
	inflateEnd(&z);
	free(obuf);
	return status;
}

/* Copies what is left of in (have bytes already in buf) into out. */
static int copy_stream(int in, uint8_t *buf, size_t have, int out,
		       const char *path, struct vp_error *err)
{
	for (;;) {
		if (have && write_all(out, buf, have, path, err) < 0)
			return -1;
		ssize_t r = read_some(in, buf, CHUNK);
		if (r < 0)
			return vp_errorf(err, "%s: read error: %s", path,
					 strerror(errno));
		if (r == 0)
			return 0;
		have = (size_t)r;
	}
}

static uint64_t fnv1a(const uint8_t *p, size_t n)
{
	uint64_t h = 14695981039346656037ull;

	for (size_t i = 0; i < n; i++) {
		h ^= p[i];
		h *= 1099511628211ull;
	}
	return h;
}

int tp_input_open(const char *path, uint64_t max_inflate, int *fd,
		  uint64_t *head_hash, struct vp_error *warning,
		  struct vp_error *err)
{
	struct stat st;
	uint8_t *buf;
	int in, out;

	warning->msg[0] = '\0';
	in = open(path, O_RDONLY | O_CLOEXEC);
	if (in < 0)
		return vp_errorf(err, "%s: cannot open: %s", path,
				 strerror(errno));
	if (fstat(in, &st) < 0 || S_ISDIR(st.st_mode)) {
		close(in);
		return vp_errorf(err, "%s: %s", path, strerror(EISDIR));
	}
	buf = malloc(CHUNK);
	if (!buf) {
		close(in);
		return vp_errorf(err, "%s: out of memory", path);
	}
	/* The first bytes say whether it is gzip (1f 8b), and give the
	 * hash. */
	ssize_t have = 0;
	while (have < TP_INPUT_HEAD_BYTES) {
		ssize_t r = read_some(in, buf + have, CHUNK - (size_t)have);
		if (r <= 0)
			break;
		have += r;
	}
	*head_hash = fnv1a(buf, (size_t)(have < TP_INPUT_HEAD_BYTES
						? have : TP_INPUT_HEAD_BYTES));
	bool gzip = have >= 2 && buf[0] == 0x1f && buf[1] == 0x8b;
	if (S_ISREG(st.st_mode) && !gzip) {
		free(buf);
		*fd = in; /* read from the start by offsets: no rewind needed */
		return 0;
	}
	out = spool_file(path, err);
	int rc = out < 0 ? -1
		 : gzip ? inflate_stream(in, buf, (size_t)(have > 0 ? have : 0),
					 out, path, max_inflate, warning, err)
			: copy_stream(in, buf, (size_t)(have > 0 ? have : 0), out,
				      path, err);
	free(buf);
	close(in);
	if (rc < 0) {
		if (out >= 0)
			close(out);
		return -1;
	}
	*fd = out;
	return 0;
}
