/*
 * sdk_in_process.c - the in-process backend: no service, the SDK plays its
 * part.
 *
 * Tracing starts at vp_init() with the track_event categories given there.
 * Every chunk a writer finishes is copied into a vp_trace_buffer (the
 * service's own buffer, ring policy, shm/trace_buffer.h) under
 * tb_mu.  vp_flush() and vp_shutdown() drain the buffer into the trace
 * file: packets as the writer wrote them plus the fields the service
 * would stamp (trusted_packet_sequence_id, trusted_pid, and
 * previous_packet_dropped where the buffer lost data).  The file is
 * rewritten through trace_io.h's writer each time (old contents, then the
 * new packets, into a temporary that is renamed into place), so a reader
 * never sees half a file.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "perfetto_fields.h"
#include "sdk_data_source.h"
#include "sdk_in_process.h"
#include "sdk_state.h"
#include "sdk_track_event.h"
#include "trace_io.h"
#include "vp_log.h"

#define VP_INPROC_DEFAULT_BUFFER_KB 4096u

/* A DataSourceConfig for track_event from a category list.  False when
 * out of memory. */
static bool build_te_config(struct pb_buf *b, const char *categories)
{
	struct vp_te_config *c = vp_te_config_from_list(categories);

	if (!c)
		return false;
	pb_put_string(b, DSC_NAME, "track_event");
	pb_put_varint(b, DSC_TARGET_BUFFER, 0);
	size_t te = pb_begin_nested(b, DSC_TRACK_EVENT_CONFIG);
	for (size_t i = 0; c && i < c->n_disabled; i++)
		pb_put_string(b, TEC_DISABLED_CATEGORIES, c->disabled[i]);
	for (size_t i = 0; c && i < c->n_enabled; i++)
		pb_put_string(b, TEC_ENABLED_CATEGORIES, c->enabled[i]);
	pb_end_nested(b, te);
	vp_te_config_free(c);
	return !pb_buf_failed(b);
}

int vp_inproc_start(const struct vp_init_args *args)
{
	struct vp_error err;
	struct trace_writer *tw;

	if (!args->output_path || !args->output_path[0]) {
		vp_log_error("in-process backend: output_path "
				"is required");
		return -1;
	}
	if (trace_writer_open(&tw, args->output_path, &err) < 0) {
		vp_log_error("in-process backend: %s", err.msg);
		return -1;
	}
	trace_writer_abort(tw);

	size_t kb = args->buffer_size_kb ? args->buffer_size_kb
					 : VP_INPROC_DEFAULT_BUFFER_KB;
	if (vp_trace_buffer_new(&vp_g.tb, (size_t)kb * 1024,
				VP_FILL_RING_BUFFER, &err) < 0) {
		vp_log_error("in-process backend: %s", err.msg);
		return -1;
	}
	vp_g.output_path = strdup(args->output_path);
	if (!vp_g.output_path) {
		vp_log_error("in-process backend: out of memory");
		vp_trace_buffer_free(vp_g.tb);
		vp_g.tb = NULL;
		return -1;
	}
	vp_g.file_written = false;
	atomic_store(&vp_g.mode, VP_MODE_INPROC);
	atomic_store(&vp_g.connected, true);

	struct pb_buf cfg;
	pb_buf_init_soft(&cfg);
	struct vp_ds_instance *inst = NULL;
	if (build_te_config(&cfg, args->categories))
		inst = vp_instance_setup(&vp_g.track_event_ds, vp_next_gen(),
					 cfg.data, cfg.len);
	else
		vp_log_error("in-process backend: out of memory for the "
			     "track_event config");
	pb_buf_free(&cfg);
	if (inst)
		vp_instance_start(inst);
	return 0;
}

/* Copies the current file's bytes to the new one. */
static int copy_old_file(struct trace_writer *tw, const char *path,
			 struct vp_error *err)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0; /* gone: start over */
	uint8_t buf[65536];
	for (;;) {
		ssize_t n = read(fd, buf, sizeof(buf));
		if (n < 0) {
			close(fd);
			return vp_errorf(err, "%s: read failed", path);
		}
		if (n == 0)
			break;
		if (trace_writer_raw(tw, buf, (size_t)n, err) < 0) {
			close(fd);
			return -1;
		}
	}
	close(fd);
	return 0;
}

/* Drains the trace buffer into the file (tb_mu held). */
static int drain_to_file(struct vp_error *err)
{
	struct trace_writer *tw;
	struct pb_buf pkt;
	struct vp_tb_packet_info info;

	if (trace_writer_open(&tw, vp_g.output_path, err) < 0)
		return -1;
	if (vp_g.file_written && copy_old_file(tw, vp_g.output_path, err) < 0)
		goto fail;
	pb_buf_init_soft(&pkt);
	vp_trace_buffer_begin_read(vp_g.tb);
	for (;;) {
		pb_buf_reset(&pkt);
		if (vp_trace_buffer_read_packet(vp_g.tb, &pkt, &info) != 1)
			break;
		pb_put_varint(&pkt, TP_TRUSTED_PACKET_SEQUENCE_ID,
			      info.meta.sequence_id);
		pb_put_varint(&pkt, TP_TRUSTED_UID,
			      (uint64_t)(int64_t)info.meta.uid);
		pb_put_varint(&pkt, TP_TRUSTED_PID,
			      (uint64_t)(int64_t)info.meta.pid);
		if (info.previous_packet_dropped)
			pb_put_varint(&pkt, TP_PREVIOUS_PACKET_DROPPED, 1);
		if (pb_buf_failed(&pkt)) {
			pb_buf_free(&pkt);
			vp_errorf(err, "out of memory");
			goto fail;
		}
		if (trace_writer_packet(tw, pkt.data, pkt.len, err) < 0) {
			pb_buf_free(&pkt);
			goto fail;
		}
	}
	pb_buf_free(&pkt);
	if (trace_writer_commit(tw, err) < 0)
		return -1;
	vp_g.file_written = true;
	return 0;
fail:
	trace_writer_abort(tw);
	return -1;
}

int vp_inproc_write_file(void)
{
	struct vp_error err;
	int rc = 0;

	pthread_mutex_lock(&vp_g.tb_mu);
	if (vp_g.tb && vp_g.output_path && drain_to_file(&err) < 0) {
		vp_log_error("writing the trace: %s", err.msg);
		rc = -1;
	}
	pthread_mutex_unlock(&vp_g.tb_mu);
	return rc;
}

void vp_inproc_stop(void)
{
	vp_stop_all_instances();
	vp_inproc_write_file();
	pthread_mutex_lock(&vp_g.tb_mu);
	vp_trace_buffer_free(vp_g.tb);
	vp_g.tb = NULL;
	free(vp_g.output_path);
	vp_g.output_path = NULL;
	pthread_mutex_unlock(&vp_g.tb_mu);
	atomic_store(&vp_g.connected, false);
}
