/*
 * packets.c - the packets vtraced writes itself into a session: the trace
 * config, system info, clock snapshots, the trace UUID, TracingServiceEvents,
 * the triggers a session received and TraceStats.  All on the service's own
 * sequence (trusted_packet_sequence_id 1) with the service's uid and pid, as
 * traced writes them.  Built with pb_wire; field numbers as Perfetto's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/sysinfo.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "perfetto_fields.h"
#include "packets.h"
#include "svc_state.h"
#include "vp_alloc.h"
#include "vp_version.h"

#include "perfetto/trace/trace.pb-c.h"

static void append_service_trusted(struct vp_service *s, struct pb_buf *b)
{
	pb_put_varint(b, TP_TRUSTED_UID, (uint64_t)s->uid);
	pb_put_varint(b, TP_TRUSTED_PID, (uint64_t)s->pid);
	pb_put_varint(b, TP_TRUSTED_PACKET_SEQUENCE_ID, SVC_SERVICE_SEQ_ID);
}

/* Starts a service packet of time boot_ns (BOOTTIME; marked as such when
 * the session's trace clock is another one). */
static void begin_at(struct vp_session *sess, struct pb_buf *out,
		     uint64_t boot_ns)
{
	pb_buf_reset(out);
	pb_put_varint(out, TP_TIMESTAMP, boot_ns);
	if (sess->primary_clock &&
	    sess->primary_clock != BUILTIN_CLOCK_BOOTTIME)
		pb_put_varint(out, TP_TIMESTAMP_CLOCK_ID,
			      BUILTIN_CLOCK_BOOTTIME);
}

/* Starts a service packet of now. */
static void begin(struct vp_session *sess, struct pb_buf *out)
{
	begin_at(sess, out, vp_svc_clock_ns(CLOCK_BOOTTIME));
}

static void end(struct vp_session *sess, struct pb_buf *out)
{
	append_service_trusted(sess->svc, out);
}

void vp_pkt_trace_config(struct vp_session *sess, struct pb_buf *out)
{
	begin(sess, out);
	size_t tc = pb_begin_nested(out, TP_TRACE_CONFIG);
	pb_put_raw(out, sess->cfg_raw, sess->cfg_raw_len);
	/* The config as applied: when the service flushed a write_into_file
	 * session on its own (write_flush_mode), flush_period_ms says how
	 * often (the last value of a field wins), so a reader knows the file
	 * did not wait for the producers' own commits. */
	if (sess->effective_flush_ms)
		pb_put_varint(out, TC_FLUSH_PERIOD_MS,
			      sess->effective_flush_ms);
	/* Likewise duration_ms, when trigger_config set it (as traced,
	 * whose trace_config packet is the config it rewrote). */
	uint32_t cfg_ms = sess->cfg->has_duration_ms ? sess->cfg->duration_ms
						     : 0;
	if (sess->duration_ms != cfg_ms)
		pb_put_varint(out, TC_DURATION_MS, sess->duration_ms);
	pb_end_nested(out, tc);
	end(sess, out);
}

/* The local time zone's offset from UTC now, in minutes (east positive). */
static bool timezone_off_mins(int32_t *out)
{
	time_t now = time(NULL);
	struct tm tm;
	if (!localtime_r(&now, &tm))
		return false;
	*out = (int32_t)(tm.tm_gmtoff / 60);
	return true;
}

void vp_pkt_system_info(struct vp_session *sess, struct pb_buf *out)
{
	struct utsname u;
	begin(sess, out);
	size_t si = pb_begin_nested(out, TP_SYSTEM_INFO);
	if (uname(&u) == 0) {
		size_t un = pb_begin_nested(out, SI_UTSNAME);
		pb_put_string(out, UTS_SYSNAME, u.sysname);
		pb_put_string(out, UTS_VERSION, u.version);
		pb_put_string(out, UTS_RELEASE, u.release);
		pb_put_string(out, UTS_MACHINE, u.machine);
		pb_end_nested(out, un);
	}
	pb_put_string(out, SI_TRACING_SERVICE_VERSION, "vtraced " VP_VERSION);
	long page = sysconf(_SC_PAGESIZE);
	if (page > 0)
		pb_put_varint(out, SI_PAGE_SIZE, (uint64_t)page);
	long cpus = sysconf(_SC_NPROCESSORS_CONF);
	if (cpus > 0)
		pb_put_varint(out, SI_NUM_CPUS, (uint64_t)cpus);
	int32_t tz;
	if (timezone_off_mins(&tz))
		pb_put_varint(out, SI_TIMEZONE_OFF_MINS, (uint64_t)(int64_t)tz);
	struct sysinfo si_ram;
	if (sysinfo(&si_ram) == 0)
		pb_put_varint(out, SI_SYSTEM_RAM_BYTES,
			      (uint64_t)si_ram.totalram * si_ram.mem_unit);
	if (uname(&u) == 0 && u.nodename[0])
		pb_put_string(out, SI_MACHINE_NAME, u.nodename);
	pb_end_nested(out, si);
	end(sess, out);
}

static void put_clock(struct pb_buf *out, uint32_t id, int clk)
{
	size_t c = pb_begin_nested(out, CS_CLOCKS);
	pb_put_varint(out, CLK_CLOCK_ID, id);
	pb_put_varint(out, CLK_TIMESTAMP, vp_svc_clock_ns(clk));
	pb_end_nested(out, c);
}

void vp_pkt_clock_snapshot(struct vp_session *sess, struct pb_buf *out)
{
	begin(sess, out);
	size_t cs = pb_begin_nested(out, TP_CLOCK_SNAPSHOT);
	put_clock(out, BUILTIN_CLOCK_BOOTTIME, CLOCK_BOOTTIME);
	put_clock(out, BUILTIN_CLOCK_MONOTONIC, CLOCK_MONOTONIC);
	put_clock(out, BUILTIN_CLOCK_REALTIME, CLOCK_REALTIME);
	put_clock(out, BUILTIN_CLOCK_MONOTONIC_RAW, CLOCK_MONOTONIC_RAW);
	put_clock(out, BUILTIN_CLOCK_REALTIME_COARSE, CLOCK_REALTIME_COARSE);
	put_clock(out, BUILTIN_CLOCK_MONOTONIC_COARSE, CLOCK_MONOTONIC_COARSE);
	if (sess->primary_clock)
		pb_put_varint(out, CS_PRIMARY_TRACE_CLOCK, sess->primary_clock);
	pb_end_nested(out, cs);
	end(sess, out);
}

void vp_pkt_trace_uuid(struct vp_session *sess, struct pb_buf *out)
{
	const uint64_t *v = sess->uuid;
	begin(sess, out);
	size_t u = pb_begin_nested(out, TP_TRACE_UUID);
	pb_put_varint(out, UUID_MSB, v[0]);
	pb_put_varint(out, UUID_LSB, v[1]);
	pb_end_nested(out, u);
	end(sess, out);
}

static void provenance_seq(void *ctx, uint16_t producer_id,
			   uint16_t writer_id,
			   const struct vp_tb_sequence_meta *meta)
{
	(void)writer_id;
	struct pb_buf *out = ctx;
	size_t q = pb_begin_nested(out, TPROV_BUF_SEQUENCES);
	pb_put_varint(out, TPROV_SEQ_ID, meta->sequence_id);
	pb_put_varint(out, TPROV_SEQ_PRODUCER_ID, producer_id);
	pb_end_nested(out, q);
}

void vp_pkt_trace_provenance(struct vp_session *sess, struct pb_buf *out)
{
	begin(sess, out);
	size_t tp = pb_begin_nested(out, TP_TRACE_PROVENANCE);
	for (size_t i = 0; i < sess->n_bufs; i++) {
		size_t b = pb_begin_nested(out, TPROV_BUFFERS);
		vp_trace_buffer_for_each_sequence(sess->bufs[i]->tb,
						  provenance_seq, out);
		pb_end_nested(out, b);
	}
	pb_end_nested(out, tp);
	end(sess, out);
}

void vp_pkt_sync_marker(struct vp_session *sess, struct pb_buf *out)
{
	/* The 16 bytes Perfetto's readers look for to find packet
	 * boundaries in a damaged stream; the marker goes last, after the
	 * uid and the sequence id, with no timestamp. */
	static const uint8_t marker[16] = {0x82, 0x47, 0x7a, 0x76, 0xb2, 0x8d,
					   0x42, 0xba, 0x81, 0xdc, 0x33, 0x32,
					   0x6d, 0x57, 0xa0, 0x79};
	pb_buf_reset(out);
	pb_put_varint(out, TP_TRUSTED_UID, (uint64_t)sess->svc->uid);
	pb_put_varint(out, TP_TRUSTED_PACKET_SEQUENCE_ID, SVC_SERVICE_SEQ_ID);
	pb_put_bytes(out, TP_SYNCHRONIZATION_MARKER, marker, sizeof(marker));
}

void vp_pkt_service_event(struct vp_session *sess, uint32_t field,
			  struct pb_buf *out)
{
	begin(sess, out);
	size_t e = pb_begin_nested(out, TP_SERVICE_EVENT);
	pb_put_varint(out, field, 1);
	pb_end_nested(out, e);
	end(sess, out);
}

void vp_pkt_trigger(struct vp_session *sess, const struct vp_trigger_rec *t,
		    struct pb_buf *out)
{
	Perfetto__Protos__Trigger m = PERFETTO__PROTOS__TRIGGER__INIT;
	m.trigger_name = t->name;
	m.producer_name = t->producer_name;
	m.has_trusted_producer_uid = true;
	m.trusted_producer_uid = t->producer_uid;
	m.has_stop_delay_ms = true;
	m.stop_delay_ms = t->stop_delay_ms;
	size_t n = perfetto__protos__trigger__get_packed_size(&m);
	uint8_t *bytes = vp_xmalloc(n);
	perfetto__protos__trigger__pack(&m, bytes);
	begin_at(sess, out, t->boot_ns);
	pb_put_bytes(out, TP_TRIGGER, bytes, n);
	free(bytes);
	end(sess, out);
}

static void put_buffer_stats(struct pb_buf *b, const struct vp_tb_stats *st)
{
	size_t n = pb_begin_nested(b, TS_BUFFER_STATS);
	pb_put_varint(b, BS_BYTES_WRITTEN, st->bytes_written);
	pb_put_varint(b, BS_CHUNKS_WRITTEN, st->chunks_written);
	pb_put_varint(b, BS_CHUNKS_OVERWRITTEN, st->chunks_overwritten);
	pb_put_varint(b, BS_WRITE_WRAP_COUNT, st->write_wrap_count);
	pb_put_varint(b, BS_PATCHES_SUCCEEDED, st->patches_succeeded);
	pb_put_varint(b, BS_PATCHES_FAILED, st->patches_failed);
	pb_put_varint(b, BS_READAHEADS_SUCCEEDED, st->readaheads_succeeded);
	pb_put_varint(b, BS_READAHEADS_FAILED, st->readaheads_failed);
	pb_put_varint(b, BS_ABI_VIOLATIONS, st->abi_violations);
	pb_put_varint(b, BS_CHUNKS_REWRITTEN, st->chunks_rewritten);
	pb_put_varint(b, BS_CHUNKS_COMMITTED_OUT_OF_ORDER,
		      st->chunks_committed_out_of_order);
	pb_put_varint(b, BS_BUFFER_SIZE, st->buffer_size);
	pb_put_varint(b, BS_BYTES_OVERWRITTEN, st->bytes_overwritten);
	pb_put_varint(b, BS_BYTES_READ, st->bytes_read);
	pb_put_varint(b, BS_PADDING_BYTES_WRITTEN, st->padding_bytes_written);
	pb_put_varint(b, BS_PADDING_BYTES_CLEARED, st->padding_bytes_cleared);
	pb_put_varint(b, BS_CHUNKS_READ, st->chunks_read);
	pb_put_varint(b, BS_CHUNKS_DISCARDED, st->chunks_discarded);
	pb_put_varint(b, BS_TRACE_WRITER_PACKET_LOSS,
		      st->trace_writer_packet_loss);
	pb_end_nested(b, n);
}

/* As traced: written whenever the session has a filter, every counter
 * (zeros too), one bytes_discarded_per_buffer up to the highest buffer a
 * filtered packet came from. */
static void put_filter_stats(struct pb_buf *b,
			     const struct vp_filter_stats *fs)
{
	size_t n = pb_begin_nested(b, TS_FILTER_STATS);
	pb_put_varint(b, FILTER_INPUT_PACKETS, fs->input_packets);
	pb_put_varint(b, FILTER_INPUT_BYTES, fs->input_bytes);
	pb_put_varint(b, FILTER_OUTPUT_BYTES, fs->output_bytes);
	pb_put_varint(b, FILTER_ERRORS, fs->errors);
	pb_put_varint(b, FILTER_TIME_TAKEN_NS, fs->time_taken_ns);
	for (size_t i = 0; i < fs->n_discarded; i++)
		pb_put_varint(b, FILTER_BYTES_DISCARDED_PER_BUFFER,
			      fs->discarded_per_buffer[i]);
	pb_end_nested(b, n);
}

void vp_write_trace_stats(struct vp_session *sess, struct pb_buf *b,
			  uint32_t field)
{
	struct vp_service_stats ss;
	vp_service_get_stats(sess->svc, &ss);
	size_t n = pb_begin_nested(b, field);
	for (size_t i = 0; i < sess->n_bufs; i++) {
		struct vp_tb_stats st;
		vp_trace_buffer_get_stats(sess->bufs[i]->tb, &st);
		put_buffer_stats(b, &st);
	}
	pb_put_varint(b, TS_PRODUCERS_CONNECTED, ss.producers_connected);
	pb_put_varint(b, TS_PRODUCERS_SEEN, ss.producers_seen);
	pb_put_varint(b, TS_DATA_SOURCES_REGISTERED,
		      ss.data_sources_registered);
	pb_put_varint(b, TS_DATA_SOURCES_SEEN, ss.data_sources_seen);
	pb_put_varint(b, TS_TRACING_SESSIONS, ss.tracing_sessions);
	pb_put_varint(b, TS_TOTAL_BUFFERS, ss.total_buffers);
	pb_put_varint(b, TS_CHUNKS_DISCARDED, ss.chunks_discarded);
	pb_put_varint(b, TS_PATCHES_DISCARDED, ss.patches_discarded);
	pb_put_varint(b, TS_INVALID_PACKETS, sess->invalid_packets);
	if (sess->filter)
		put_filter_stats(b, &sess->filter_stats);
	pb_put_varint(b, TS_FLUSHES_REQUESTED, sess->flushes_requested);
	pb_put_varint(b, TS_FLUSHES_SUCCEEDED, sess->flushes_succeeded);
	pb_put_varint(b, TS_FLUSHES_FAILED, sess->flushes_failed);
	if (sess->final_flush_outcome)
		pb_put_varint(b, TS_FINAL_FLUSH_OUTCOME,
			      (uint64_t)sess->final_flush_outcome);
	pb_end_nested(b, n);
}

void vp_pkt_trace_stats(struct vp_session *sess, struct pb_buf *out)
{
	begin(sess, out);
	vp_write_trace_stats(sess, out, TP_TRACE_STATS);
	end(sess, out);
}
