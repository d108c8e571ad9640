/*
 * trace_writer.c - crash-safe trace file writer (trace_io.h): a 1 MiB
 * buffer in front of an out_file.h output, so the destination is either
 * its old self or the complete new file, never something in between.
 */
#include "trace_io.h"
#include "out_file.h"
#include "pb_wire.h"

#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#define WRITE_BUF (1u << 20)
/* a piece trace_writer_rawv writes without the buffer */
#define DIRECT_MIN (16u << 10)
/* large pieces per writev */
#define RAWV_MAX 32

struct trace_writer {
	struct vp_out *out;
	uint64_t written;
	size_t fill;
	uint8_t buf[WRITE_BUF];
};

int trace_writer_open(struct trace_writer **out, const char *path,
		      struct vp_error *err)
{
	struct trace_writer *w = calloc(1, sizeof(*w));

	if (!w)
		return vp_errorf(err, "%s: out of memory", path);
	if (vp_out_open(&w->out, path, 0, err) < 0) {
		free(w);
		return -1;
	}
	*out = w;
	return 0;
}

void trace_writer_flush_behind(struct trace_writer *w)
{
	vp_out_flush_behind(w->out);
}

int trace_copy_piece(void *copy_out, const uint8_t *p, size_t n,
		     struct vp_error *err)
{
	struct trace_copy_out *co = copy_out;

	if (trace_writer_raw(co->w, p, n, err) < 0) {
		co->failed = true;
		return -1;
	}
	return 0;
}

static int flush(struct trace_writer *w, struct vp_error *err)
{
	int rc = vp_out_write(w->out, w->buf, w->fill, err);
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
			return vp_out_write(w->out, p, len, err);
	}
	memcpy(w->buf + w->fill, p, len);
	w->fill += len;
	return 0;
}

int trace_writer_rawv(struct trace_writer *w, const struct iovec *iov, int n,
		      struct vp_error *err)
{
	/* What goes out in one writev: stretches of the buffer and the
	 * caller's large pieces, in order.  The buffer is not reused until
	 * that call is made. */
	struct iovec out[2 * RAWV_MAX + 1];
	int n_out = 0;
	size_t from = 0; /* where the buffer's stretch not yet in out[] begins */

	for (int i = 0; i < n; i++) {
		const struct iovec *v = &iov[i];
		/* A small piece is cheaper copied into the buffer than
		 * handed to the kernel on its own. */
		if (v->iov_len < DIRECT_MIN &&
		    v->iov_len <= sizeof(w->buf) - w->fill) {
			memcpy(w->buf + w->fill, v->iov_base, v->iov_len);
			w->fill += v->iov_len;
			w->written += v->iov_len;
			continue;
		}
		if (v->iov_len < DIRECT_MIN || n_out >= 2 * RAWV_MAX - 1) {
			/* the buffer is full, or the list: write it all */
			out[n_out++] = (struct iovec){w->buf + from, w->fill - from};
			if (vp_out_writev(w->out, out, n_out, err) < 0)
				return -1;
			n_out = 0;
			w->fill = from = 0;
			if (v->iov_len < DIRECT_MIN) {
				i--; /* again, into the empty buffer */
				continue;
			}
		}
		/* a large piece goes from where it is, after what the buffer
		 * took since the last one */
		out[n_out++] = (struct iovec){w->buf + from, w->fill - from};
		out[n_out++] = *v;
		w->written += v->iov_len;
		from = w->fill;
	}
	if (!n_out) /* only buffered: it goes later, with what follows */
		return 0;
	out[n_out++] = (struct iovec){w->buf + from, w->fill - from};
	w->fill = 0;
	return vp_out_writev(w->out, out, n_out, err);
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

int trace_output_too_long(const char *path, uint64_t in_off, uint64_t len,
			  struct vp_error *err)
{
	return vp_errorf(err, "%s: byte offset %llu: this packet would come "
			 "out %llu bytes long, over the %u MiB a packet may "
			 "be (its remapped timestamps are longer); readers "
			 "of the output would refuse it",
			 path, (unsigned long long)in_off,
			 (unsigned long long)len, TRACE_MAX_PACKET >> 20);
}

const char *trace_writer_temp_path(const struct trace_writer *w)
{
	return vp_out_temp_path(w->out);
}

void trace_writer_abort(struct trace_writer *w)
{
	if (!w)
		return;
	vp_out_abort(w->out);
	free(w);
}

int trace_writer_finish(struct trace_writer *w, struct vp_out **out,
			struct vp_error *err)
{
	*out = NULL;
	if (flush(w, err) < 0) {
		trace_writer_abort(w);
		return -1;
	}
	*out = w->out;
	free(w);
	return 0;
}

int trace_writer_commit(struct trace_writer *w, struct vp_error *err)
{
	struct vp_out *o;
	if (trace_writer_finish(w, &o, err) < 0)
		return -1;
	return vp_out_commit(o, err);
}
