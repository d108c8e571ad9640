/*
 * report.c - the merge's human summary and JSON report (see report.h).
 */
#include "report.h"

#include <stdlib.h>
#include <string.h>

#include "perfetto_fields.h"
#include "out_file.h"

static const char *source_key(enum cm_offset_source s)
{
	switch (s) {
	case CM_SRC_CMDLINE:
		return "cmdline";
	case CM_SRC_KVM_TSC:
		return "kvm_tsc";
	case CM_SRC_EXCHANGES:
		return "exchanges";
	case CM_SRC_DEFAULT:
		return "default";
	case CM_SRC_CARRIED:
		return "carried";
	}
	return "?";
}

static const struct cm_fit *guest_fit(const struct merge_guest *g)
{
	return g->have_boot ? &g->fit_boot : g->have_mono ? &g->fit_mono : NULL;
}

/* The path of guest n (1-based). */
/* Knots of the bends over all of a fit's segments. */
static size_t fit_knots(const struct cm_fit *f)
{
	size_t n = 0;

	for (size_t k = 0; k < f->nseg; k++)
		n += f->seg[k].nknot;
	return n;
}

static const char *guest_path(const struct merge_result *res, size_t n)
{
	return res->guests[n - 1].path;
}

/* --onto guest: which axis, and the host's map onto it. */
static void summary_onto_host(FILE *f, const struct merge_result *res)
{
	const struct rewrite_stats *rw = &res->host_rw;

	fprintf(f, "      onto guest %zu: host -> guest %zu, error bound p50 "
		"%.0f ns, p99 %.0f ns, max %.0f ns (%.0f ns at the trace's "
		"ends)\n", res->onto_guest, res->onto_guest,
		res->host_bound_ns.p50, res->host_bound_ns.p99,
		res->host_bound_ns.max, res->host_bound_edges_ns);
	fprintf(f, "      rewrote %llu packets: %llu packet, %llu "
		"scoped-clock, %llu legacy-us, %llu ftrace, %llu "
		"compact_sched, %llu snapshot timestamps\n",
		(unsigned long long)rw->packets,
		(unsigned long long)rw->ts_packet,
		(unsigned long long)rw->ts_scoped,
		(unsigned long long)rw->ts_legacy_us,
		(unsigned long long)rw->ts_ftrace,
		(unsigned long long)rw->ts_compact,
		(unsigned long long)rw->ts_snapshot);
}

/* --onto guest: guest i's map onto the chosen guest's axis. */
static void summary_onto_guest(FILE *f, const struct merge_result *res,
			       size_t i)
{
	const struct merge_guest *g = &res->guests[i];

	if (i + 1 == res->onto_guest) {
		fprintf(f, "      onto guest %zu: the axis, times kept as they "
			"are\n", res->onto_guest);
		return;
	}
	if (!g->synced && !g->manual)
		return;
	fprintf(f, "      onto guest %zu: guest %zu -> host -> guest %zu, "
		"error bound p50 %.0f ns, p99 %.0f ns, max %.0f ns (%.0f ns at "
		"the trace's ends)\n", res->onto_guest, i + 1, res->onto_guest,
		g->onto_bound_ns.p50, g->onto_bound_ns.p99, g->onto_bound_ns.max,
		g->onto_bound_edges_ns);
}

void report_summary(FILE *f, const struct merge_opts *o,
		    const struct merge_result *res)
{
	if (res->onto_guest)
		fprintf(f, "axis: guest %zu's %s (%s, machine %u): its times "
			"kept, the host and the other guests mapped onto them "
			"(--onto guest:%zu)\n", res->onto_guest,
			builtin_clock_name(res->clock),
			guest_path(res, res->onto_guest),
			res->guests[res->onto_guest - 1].machine_id,
			res->onto_guest);
	fprintf(f, "host  %s: %llu packets, %zu %s sync samples",
		o->host, (unsigned long long)res->host_packets,
		res->host_samples, builtin_clock_name(res->clock));
	if (res->have_host_fit) {
		fprintf(f, ", %zu segment(s)", res->host_fit.nseg);
		if (fit_knots(&res->host_fit))
			fprintf(f, " bent at %zu knots", fit_knots(&res->host_fit));
		fprintf(f, ", %zu rejected, residual max %.0f ns",
			res->host_fit.n_rejected, res->host_fit.resid_max_ns);
	}
	fputc('\n', f);
	if (res->onto_guest)
		summary_onto_host(f, res);
	for (size_t i = 0; i < res->n_guests; i++) {
		const struct merge_guest *g = &res->guests[i];
		fprintf(f, "guest %s -> machine %u, sequences +%u: ", g->path,
			g->machine_id, g->seq_offset);
		if (g->manual) {
			fprintf(f, "offset %+lld ns given by hand "
				"(--guest-offset-ns), no clock model\n",
				(long long)g->manual_offset_ns);
			continue;
		}
		if (!g->synced) {
			fprintf(f, "NOT SYNCED, timestamps unchanged\n");
			continue;
		}
		const struct cm_fit *gf = guest_fit(g);
		size_t knots = fit_knots(gf);
		fprintf(f, "%zu samples (%zu rejected), %zu segment(s), ",
			gf->n_used + gf->n_rejected, gf->n_rejected, gf->nseg);
		if (knots)
			fprintf(f, "bent at %zu knots, ", knots);
		fprintf(f, "drift %+.2f ppm\n", g->drift_ppm);
		fprintf(f, "      counter offset %lld (%s", (long long)g->cross.offset,
			cm_source_name(g->cross.source));
		if (g->cross.offset_hi > g->cross.offset_lo)
			fprintf(f, ", interval %lld..%lld",
				(long long)g->cross.offset_lo,
				(long long)g->cross.offset_hi);
		fprintf(f, ")");
		if (g->cross.ratio != (1ull << g->cross.frac_bits))
			fprintf(f, ", ratio %llu/2^%u",
				(unsigned long long)g->cross.ratio,
				g->cross.frac_bits);
		fputc('\n', f);
		const struct cm_fit *sf = g->seg_offset_boot ? &g->fit_boot
							     : &g->fit_mono;
		const int64_t *so = g->seg_offset_boot ? g->seg_offset_boot
						       : g->seg_offset_mono;
		const bool *carried = g->seg_offset_boot ? g->seg_carried_boot
							 : g->seg_carried_mono;
		for (size_t k = 0; so && k < sf->nseg; k++)
			fprintf(f, "      segment %zu (guest counter from %llu): "
				"offset %lld (%s, one of %zu values), error "
				"bound %.0f ns\n", k,
				(unsigned long long)sf->seg[k].x_first,
				(long long)so[k],
				cm_source_name(carried && carried[k]
						       ? CM_SRC_CARRIED
						       : g->seg_offset_source),
				g->n_offset_values,
				g->seg_bound_ns ? g->seg_bound_ns[k] : 0);
		fprintf(f, "      error bound p50 %.0f ns, p99 %.0f ns, max %.0f ns "
			"(%.0f ns at the trace's ends)\n", g->bound_ns.p50,
			g->bound_ns.p99, g->bound_ns.max, g->bound_edges_ns);
		if (g->n_exchanges)
			fprintf(f, "      %zu exchanges, %zu causality violations, "
				"round trip p50 %.0f ns p99 %.0f ns\n",
				g->n_exchanges, g->n_causality_violations,
				g->exchange_width_ns.p50, g->exchange_width_ns.p99);
		if (g->scan_split_at)
			fprintf(f, "      sync scan in %u parts at once, the "
				"second from byte offset %llu\n",
				g->scan_parts,
				(unsigned long long)g->scan_split_at);
		fprintf(f, "      rewrote %llu packets on %u thread%s: %llu "
			"packet, %llu scoped-clock, %llu legacy-us, %llu "
			"ftrace, %llu compact_sched, %llu snapshot "
			"timestamps\n",
			(unsigned long long)g->rw.packets, g->threads,
			g->threads == 1 ? "" : "s",
			(unsigned long long)g->rw.ts_packet,
			(unsigned long long)g->rw.ts_scoped,
			(unsigned long long)g->rw.ts_legacy_us,
			(unsigned long long)g->rw.ts_ftrace,
			(unsigned long long)g->rw.ts_compact,
			(unsigned long long)g->rw.ts_snapshot);
		if (res->onto_guest)
			summary_onto_guest(f, res, i);
	}
	for (size_t i = 0; i < res->n_warnings; i++)
		fprintf(f, "warning: %s\n", res->warnings[i]);
	if (res->n_warnings_dropped)
		fprintf(f, "warning: (%zu more warnings)\n",
			res->n_warnings_dropped);
	double mb = (double)res->bytes_out / 1e6;
	fprintf(f, "wrote %s: %.1f MB in %.2f s (%.0f MB/s)\n", o->out, mb,
		res->seconds, res->seconds > 0 ? mb / res->seconds : 0.0);
}

/* ---- JSON --------------------------------------------------------------------- */

static void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

static void json_fit(FILE *f, const struct cm_fit *fit)
{
	fprintf(f, "{\"samples_used\": %zu, \"samples_rejected\": %zu, "
		"\"residual_max_ns\": %.3f, \"segments\": [",
		fit->n_used, fit->n_rejected, fit->resid_max_ns);
	for (size_t i = 0; i < fit->nseg; i++) {
		const struct cm_segment *s = &fit->seg[i];
		fprintf(f, "%s{\"counter_first\": %llu, \"counter_last\": %llu, "
			"\"clock_first_ns\": %llu, \"clock_last_ns\": %llu, "
			"\"samples_used\": %zu, \"samples_rejected\": %zu, "
			"\"ns_per_cycle\": %.15g, \"frequency_hz\": %.6f, "
			"\"residual_rms_ns\": %.3f, \"residual_max_ns\": %.3f, "
			"\"knots\": %zu}",
			i ? ", " : "", (unsigned long long)s->x_first,
			(unsigned long long)s->x_last,
			(unsigned long long)s->y_first,
			(unsigned long long)s->y_last, s->n_used, s->n_rejected,
			s->slope, s->slope > 0 ? 1e9 / s->slope : 0.0,
			s->resid_rms_ns, s->resid_max_ns, s->nknot);
	}
	fprintf(f, "]}");
}

static void json_bounds(FILE *f, const struct bound_stats *b)
{
	fprintf(f, "{\"p50\": %.3f, \"p99\": %.3f, \"max\": %.3f}", b->p50, b->p99,
		b->max);
}

/* When the counter offset changed during the trace: each segment of the
 * guest fit with the offset in force in it. */
static void json_segment_offsets(FILE *f, const char *key, const int64_t *so,
				 const bool *carried, const double *bound,
				 const struct cm_fit *fit,
				 enum cm_offset_source source)
{
	if (!so)
		return;
	fprintf(f, ", \"%s\": [", key);
	for (size_t k = 0; k < fit->nseg; k++) {
		fprintf(f, "%s{\"guest_counter_from\": %llu, \"offset\": %lld, "
			"\"source\": \"%s\"", k ? ", " : "",
			(unsigned long long)fit->seg[k].x_first,
			(long long)so[k],
			source_key(carried && carried[k] ? CM_SRC_CARRIED
							 : source));
		if (bound)
			fprintf(f, ", \"error_bound_ns\": %.3f", bound[k]);
		fputc('}', f);
	}
	fputc(']', f);
}

/* The counts of a rewrite, as an object (no newline). */
static void json_rewrite(FILE *f, const struct rewrite_stats *s,
			 uint64_t bytes_in, uint64_t bytes_out)
{
	fprintf(f, "{\"packets\": %llu, \"packet_timestamps\": "
		"%llu, \"scoped_clock_timestamps\": %llu, \"legacy_us_timestamps\": "
		"%llu, \"ftrace_timestamps\": %llu, \"compact_sched_timestamps\": "
		"%llu, \"clock_snapshot_entries\": %llu, \"unmapped\": %llu, "
		"\"went_backwards\": %llu, \"clamped_deltas\": %llu, "
		"\"overflowed\": %llu, \"relabelled\": %llu, "
		"\"android_log_timestamps\": %llu, \"bytes_in\": %llu, \"bytes_out\": %llu}",
		(unsigned long long)s->packets, (unsigned long long)s->ts_packet,
		(unsigned long long)s->ts_scoped,
		(unsigned long long)s->ts_legacy_us,
		(unsigned long long)s->ts_ftrace, (unsigned long long)s->ts_compact,
		(unsigned long long)s->ts_snapshot,
		(unsigned long long)s->ts_unmapped,
		(unsigned long long)s->backwards, (unsigned long long)s->clamped,
		(unsigned long long)s->overflow, (unsigned long long)s->relabelled,
		(unsigned long long)s->ts_log, (unsigned long long)bytes_in, (unsigned long long)bytes_out);
}

/* --onto guest: a trace's map onto the chosen guest's axis ("map" says
 * through what) and its error bound in that direction. */
static void json_onto(FILE *f, const char *map, const struct bound_stats *b,
		      double edges)
{
	static const struct bound_stats none = {0, 0, 0};

	fprintf(f, "\"onto\": {\"map\": \"%s\", \"error_bound_ns\": ", map);
	json_bounds(f, b ? b : &none);
	fprintf(f, ", \"error_bound_at_trace_ends_ns\": %.3f}", edges);
}

static void json_guest_onto(FILE *f, const struct merge_result *res,
			    size_t i)
{
	const struct merge_guest *g = &res->guests[i];
	char map[64];

	fprintf(f, "     ");
	if (i + 1 == res->onto_guest) {
		json_onto(f, "kept", NULL, 0);
	} else if (!g->synced && !g->manual) {
		json_onto(f, "unchanged", NULL, 0);
	} else {
		snprintf(map, sizeof(map), "guest %zu -> host -> guest %zu",
			 i + 1, res->onto_guest);
		json_onto(f, map, &g->onto_bound_ns, g->onto_bound_edges_ns);
	}
	fprintf(f, ",\n");
}

static void json_guest(FILE *f, const struct merge_result *res, size_t i)
{
	const struct merge_guest *g = &res->guests[i];

	fprintf(f, "    {\"path\": ");
	json_str(f, g->path);
	fprintf(f, ", \"machine_id\": %u, \"sequence_id_offset\": %u, "
		"\"synced\": %s,\n", g->machine_id, g->seq_offset,
		g->synced ? "true" : "false");
	if (g->manual)
		fprintf(f, "     \"offset\": {\"source\": \"command_line\", "
			"\"offset_ns\": %lld},\n", (long long)g->manual_offset_ns);
	fprintf(f, "     \"samples\": {\"boottime\": %zu, \"monotonic\": %zu, "
		"\"from_clock_snapshots\": %zu, \"from_sync_events\": %zu},\n",
		g->n_samples_boot, g->n_samples_mono, g->n_snapshot_samples,
		g->n_event_samples);
	if (g->have_boot) {
		fprintf(f, "     \"fit_boottime\": ");
		json_fit(f, &g->fit_boot);
		fprintf(f, ",\n");
	}
	if (g->have_mono) {
		fprintf(f, "     \"fit_monotonic\": ");
		json_fit(f, &g->fit_mono);
		fprintf(f, ",\n");
	}
	if (g->synced) {
		fprintf(f, "     \"counter_map\": {\"source\": \"%s\", \"offset\": "
			"%lld, \"offset_interval\": [%lld, %lld], \"ratio\": %llu, "
			"\"frac_bits\": %u", source_key(g->cross.source),
			(long long)g->cross.offset, (long long)g->cross.offset_lo,
			(long long)g->cross.offset_hi,
			(unsigned long long)g->cross.ratio, g->cross.frac_bits);
		if (g->kvm_vm_pid >= 0)
			fprintf(f, ", \"kvm_vm_pid\": %lld", (long long)g->kvm_vm_pid);
		/* the bounds are of BOOTTIME's fit when there is one */
		json_segment_offsets(f, "segment_offsets_boottime",
				     g->seg_offset_boot, g->seg_carried_boot,
				     g->have_boot ? g->seg_bound_ns : NULL,
				     &g->fit_boot, g->seg_offset_source);
		json_segment_offsets(f, "segment_offsets_monotonic",
				     g->seg_offset_mono, g->seg_carried_mono,
				     g->have_boot ? NULL : g->seg_bound_ns,
				     &g->fit_mono, g->seg_offset_source);
		fprintf(f, "},\n     \"drift_ppm\": %.4f, \"freq_mismatch\": %.3g,\n",
			g->drift_ppm, g->freq_mismatch);
		fprintf(f, "     \"error_bound_ns\": ");
		json_bounds(f, &g->bound_ns);
		fprintf(f, ", \"error_bound_at_trace_ends_ns\": %.3f,\n",
			g->bound_edges_ns);
		fprintf(f, "     \"exchanges\": {\"count\": %zu, "
			"\"causality_violations\": %zu, \"round_trip_ns\": ",
			g->n_exchanges, g->n_causality_violations);
		json_bounds(f, &g->exchange_width_ns);
		fprintf(f, "},\n");
	}
	if (res->onto_guest)
		json_guest_onto(f, res, i);
	fprintf(f, "     \"rewrite\": ");
	json_rewrite(f, &g->rw, g->bytes_in, g->bytes_out);
	fputc('}', f);
}

static void json_report(FILE *f, const struct merge_opts *o,
			const struct merge_result *res)
{
	fprintf(f, "{\n  \"tool\": \"vperfetto_merge\",\n  \"clock\": \"%s\",\n",
		builtin_clock_name(res->clock));
	/* Whose time axis the output is on (--onto). */
	if (res->onto_guest) {
		fprintf(f, "  \"axis\": {\"onto\": \"guest\", \"guest\": %zu, "
			"\"path\": ", res->onto_guest);
		json_str(f, guest_path(res, res->onto_guest));
		fprintf(f, ", \"machine_id\": %u},\n",
			res->guests[res->onto_guest - 1].machine_id);
	} else {
		fprintf(f, "  \"axis\": {\"onto\": \"host\"},\n");
	}
	fprintf(f, "  \"host\": {\"path\": ");
	json_str(f, o->host);
	fprintf(f, ", \"packets\": %llu, \"bytes\": %llu, \"samples\": %zu, "
		"\"kvm_tsc_records\": %zu, \"max_sequence_id\": %u, "
		"\"incremental_clock64_snapshots_ignored\": %zu",
		(unsigned long long)res->host_packets,
		(unsigned long long)res->host_bytes, res->host_samples,
		res->n_kvm_records, res->max_host_seq, res->host_incremental_64);
	if (res->have_host_fit) {
		fprintf(f, ", \"fit\": ");
		json_fit(f, &res->host_fit);
	}
	if (res->onto_guest) {
		char map[48];
		snprintf(map, sizeof(map), "host -> guest %zu", res->onto_guest);
		fprintf(f, ",\n           ");
		json_onto(f, map, &res->host_bound_ns, res->host_bound_edges_ns);
		fprintf(f, ",\n           \"rewrite\": ");
		json_rewrite(f, &res->host_rw, res->host_bytes_in, res->host_bytes);
	}
	fprintf(f, "},\n  \"guests\": [\n");
	for (size_t i = 0; i < res->n_guests; i++) {
		json_guest(f, res, i);
		fprintf(f, "%s\n", i + 1 < res->n_guests ? "," : "");
	}
	fprintf(f, "  ],\n  \"warnings\": [");
	for (size_t i = 0; i < res->n_warnings; i++) {
		fprintf(f, "%s\n    ", i ? "," : "");
		json_str(f, res->warnings[i]);
	}
	fprintf(f, "%s],\n  \"output\": {\"path\": ", res->n_warnings ? "\n  " : "");
	json_str(f, o->out);
	fprintf(f, ", \"bytes\": %llu, \"seconds\": %.3f}\n}\n",
		(unsigned long long)res->bytes_out, res->seconds);
}

int report_write_json(struct vp_out *out, const struct merge_opts *o,
		      const struct merge_result *res, struct vp_error *err)
{
	char *text = NULL;
	size_t len = 0;
	FILE *mem = open_memstream(&text, &len);
	if (!mem)
		return vp_errorf(err, "report: out of memory");
	json_report(mem, o, res);
	if (fclose(mem) != 0) {
		free(text);
		return vp_errorf(err, "report: out of memory");
	}
	int rc = vp_out_write(out, text, len, err);
	free(text);
	return rc;
}
