/*
 * tp_stats.c - the stats and metadata tables, and the warnings a load
 * prints (tp_warn).
 *
 * Stats are counters keyed by (name, machine, index).  Every stat Perfetto
 * knows is listed below with its kind (single / indexed), severity, source
 * and scope, so that the stats table lists each known single stat even when
 * nothing touched it, as Perfetto's does.  Names not in the list are kept
 * too (as single-or-indexed "error" analysis stats) so no caller's count is
 * lost.
 *
 * Metadata are (name, machine) -> int or string entries, "single" (set
 * replaces) or "multi" (appended).  tp_stats_finish() adds the trace-wide
 * entries Perfetto always writes (trace_type, trace_size_bytes, trace_uuid,
 * trace_time_clock_id) and writes both tables.
 */
#include <stddef.h> /* tp_stats.h uses size_t without it */

#include "tp_stats.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tp_clock.h"
#include "tp_ctx.h"
#include "vp_alloc.h"
#include "vp_log.h"

/* Perfetto's known stats: name, single (S) / indexed (X), severity
 * (I info, N notice, D data_loss, E error), source (T trace, A analysis),
 * scope (M machine and trace, G global).  Listed in Perfetto's order. */
#define TP_KNOWN_STATS(F) \
F(android_aflags_errors, S, E, T, M) \
F(android_br_parse_errors, S, E, T, M) \
F(android_log_num_failed, S, E, T, M) \
F(android_log_format_invalid, S, E, T, M) \
F(android_log_num_skipped, S, I, T, M) \
F(android_log_num_total, S, I, T, M) \
F(android_video_size_cap_hit, S, D, T, M) \
F(android_video_codec_error, S, E, T, M) \
F(android_video_display_gone, S, E, T, M) \
F(android_video_no_encoder, S, E, T, M) \
F(android_video_display_not_found, S, E, T, M) \
F(android_video_encoder_setup_failed, S, E, T, M) \
F(android_video_virtual_display_failed, S, E, T, M) \
F(android_video_parse_size_cap_hit, S, D, T, M) \
F(deobfuscate_location_parse_error, S, E, A, G) \
F(energy_breakdown_missing_values, S, E, A, M) \
F(energy_descriptor_invalid, S, E, A, M) \
F(entity_state_descriptor_invalid, S, E, A, M) \
F(entity_state_residency_invalid, S, E, A, M) \
F(entity_state_residency_lookup_failed, S, E, A, M) \
F(energy_uid_breakdown_missing_values, S, E, A, M) \
F(frame_timeline_event_parser_errors, S, I, A, M) \
F(frame_timeline_unpaired_end_event, S, I, A, M) \
F(ftrace_bundle_tokenizer_errors, S, E, A, M) \
F(ftrace_cpu_bytes_begin, X, I, T, M) \
F(ftrace_cpu_bytes_end, X, I, T, M) \
F(ftrace_cpu_bytes_delta, X, I, T, M) \
F(ftrace_cpu_commit_overrun_begin, X, I, T, M) \
F(ftrace_cpu_commit_overrun_end, X, I, T, M) \
F(ftrace_cpu_commit_overrun_delta, X, E, T, M) \
F(ftrace_cpu_dropped_events_begin, X, I, T, M) \
F(ftrace_cpu_dropped_events_end, X, I, T, M) \
F(ftrace_cpu_dropped_events_delta, X, E, T, M) \
F(ftrace_cpu_entries_begin, X, I, T, M) \
F(ftrace_cpu_entries_end, X, I, T, M) \
F(ftrace_cpu_entries_delta, X, I, T, M) \
F(ftrace_cpu_now_ts_begin, X, I, T, M) \
F(ftrace_cpu_now_ts_end, X, I, T, M) \
F(ftrace_cpu_oldest_event_ts_begin, X, I, T, M) \
F(ftrace_cpu_oldest_event_ts_end, X, I, T, M) \
F(ftrace_cpu_overrun_begin, X, I, T, M) \
F(ftrace_cpu_overrun_end, X, I, T, M) \
F(ftrace_cpu_overrun_delta, X, I, T, M) \
F(ftrace_cpu_read_events_begin, X, I, T, M) \
F(ftrace_cpu_read_events_end, X, I, T, M) \
F(ftrace_cpu_read_events_delta, X, I, T, M) \
F(ftrace_cpu_has_data_loss, X, D, T, M) \
F(ftrace_kprobe_hits_begin, S, I, T, M) \
F(ftrace_kprobe_hits_end, S, I, T, M) \
F(ftrace_kprobe_hits_delta, S, I, T, M) \
F(ftrace_kprobe_misses_begin, S, I, T, M) \
F(ftrace_kprobe_misses_end, S, I, T, M) \
F(ftrace_kprobe_misses_delta, S, D, T, M) \
F(ftrace_setup_errors, S, N, T, M) \
F(ftrace_abi_errors_skipped_zero_data_length, S, I, A, M) \
F(ftrace_generic_descriptor_errors, S, E, A, M) \
F(ftrace_thermal_exynos_acpm_unknown_tz_id, S, E, A, M) \
F(fuchsia_non_numeric_counters, S, E, A, M) \
F(fuchsia_timestamp_overflow, S, E, A, M) \
F(fuchsia_record_read_error, S, E, A, M) \
F(fuchsia_invalid_event, S, E, A, M) \
F(fuchsia_invalid_event_arg_type, S, E, A, M) \
F(fuchsia_invalid_event_arg_name, S, E, A, M) \
F(fuchsia_unknown_event_arg, S, E, A, M) \
F(fuchsia_invalid_string_ref, S, E, A, M) \
F(generic_task_state_invalid_order, S, E, A, M) \
F(gpu_counters_invalid_spec, S, E, A, M) \
F(gpu_counters_missing_spec, S, E, A, M) \
F(gpu_counters_missing_timestamp, S, E, T, M) \
F(gpu_render_stage_parser_errors, S, E, A, M) \
F(graphics_frame_event_parser_errors, S, I, A, M) \
F(guess_trace_type_duration_ns, S, I, A, G) \
F(instruments_row_missing_thread, S, E, A, M) \
F(instruments_row_missing_process, S, E, A, M) \
F(instruments_row_missing_backtrace, S, E, A, M) \
F(instruments_row_missing_frame, S, E, A, M) \
F(interned_data_tokenizer_errors, S, I, A, M) \
F(invalid_clock_snapshots, S, E, A, G) \
F(invalid_cpu_times, S, E, A, M) \
F(kernel_wakelock_reused_id, S, E, A, M) \
F(kernel_wakelock_unknown_id, S, E, A, M) \
F(kernel_wakelock_zero_value_reported, S, I, T, M) \
F(kernel_wakelock_non_monotonic_value_reported, S, I, T, M) \
F(kernel_wakelock_implausibly_large_value_reported, S, I, T, M) \
F(kernel_trackevent_format_error, S, E, A, M) \
F(app_wakelock_parse_error, S, E, A, M) \
F(app_wakelock_unknown_id, S, E, A, M) \
F(concurrent_session_event_unknown_state, S, E, A, M) \
F(meminfo_unknown_keys, S, E, A, M) \
F(cpu_info_unknown_cpu_features, S, I, A, M) \
F(missing_disk_io_event_name, S, E, A, M) \
F(cpu_info_empty, S, E, A, M) \
F(mismatched_sched_switch_tids, S, E, A, M) \
F(mm_unknown_type, S, E, A, M) \
F(parse_trace_duration_ns, S, I, A, G) \
F(power_rail_empty_packet, S, E, A, M) \
F(power_rail_unknown_index, S, E, T, M) \
F(proc_stat_unknown_counters, S, E, A, M) \
F(rss_stat_unknown_keys, S, E, A, M) \
F(rss_stat_negative_size, S, I, A, M) \
F(rss_stat_unknown_thread_for_mm_id, S, I, A, M) \
F(filter_input_bytes, S, I, T, M) \
F(filter_input_packets, S, I, T, M) \
F(filter_output_bytes, S, I, T, M) \
F(filter_time_taken_ns, S, I, T, M) \
F(filter_errors, S, E, T, M) \
F(flow_duplicate_id, S, E, T, M) \
F(flow_no_enclosing_slice, S, E, T, M) \
F(flow_step_without_start, S, I, T, M) \
F(flow_end_without_start, S, I, T, M) \
F(flow_invalid_id, S, E, T, M) \
F(flow_without_direction, S, E, T, M) \
F(stackprofile_empty_callstack, S, E, T, M) \
F(stackprofile_invalid_string_id, S, E, T, M) \
F(stackprofile_invalid_mapping_id, S, E, T, M) \
F(stackprofile_invalid_frame_id, S, E, T, M) \
F(stackprofile_invalid_callstack_id, S, E, T, M) \
F(stackprofile_parser_error, S, E, T, M) \
F(smaps_parser_errors, S, E, T, M) \
F(systemd_journal_num_failed, S, E, T, M) \
F(systemd_journal_num_total, S, I, T, M) \
F(systrace_parse_failure, S, E, A, M) \
F(task_state_invalid, S, E, A, M) \
F(traced_buf_abi_violations, X, D, T, M) \
F(traced_buf_buffer_size, X, I, T, M) \
F(traced_buf_bytes_overwritten, X, I, T, M) \
F(traced_buf_bytes_read, X, I, T, M) \
F(traced_buf_bytes_filtered_out, X, I, T, M) \
F(traced_buf_bytes_written, X, I, T, M) \
F(traced_buf_clone_done_timestamp_ns, X, I, T, M) \
F(traced_buf_chunks_discarded, X, I, T, M) \
F(traced_buf_chunks_overwritten, X, I, T, M) \
F(traced_buf_chunks_read, X, I, T, M) \
F(traced_buf_chunks_relocated, X, I, T, M) \
F(traced_buf_chunks_rewritten, X, I, T, M) \
F(traced_buf_chunks_written, X, I, T, M) \
F(traced_buf_chunks_committed_out_of_order, X, I, T, M) \
F(traced_buf_padding_bytes_cleared, X, I, T, M) \
F(traced_buf_padding_bytes_written, X, I, T, M) \
F(traced_buf_patches_failed, X, D, T, M) \
F(traced_buf_patches_succeeded, X, I, T, M) \
F(traced_buf_readaheads_failed, X, I, T, M) \
F(traced_buf_readaheads_succeeded, X, I, T, M) \
F(traced_buf_trace_writer_packet_loss, X, D, T, M) \
F(traced_buf_sequence_packet_loss, X, D, A, M) \
F(traced_buf_incremental_sequences_dropped, X, D, A, M) \
F(traced_buf_data_loss_read_gap, X, D, T, M) \
F(traced_buf_data_loss_chunk_corrupted, X, D, T, M) \
F(traced_buf_data_loss_orphan_continuation, X, D, T, M) \
F(traced_buf_data_loss_reassembly_gap, X, D, T, M) \
F(traced_buf_data_loss_reassembly_broken_chain, X, D, T, M) \
F(traced_buf_data_loss_overwrite, X, D, T, M) \
F(traced_buf_data_loss_writer_abort, X, D, T, M) \
F(traced_buf_data_loss_smb_full, X, D, T, M) \
F(traced_buf_write_wrap_count, X, I, T, M) \
F(traced_clone_started_timestamp_ns, S, I, T, M) \
F(traced_clone_trigger_timestamp_ns, S, I, T, M) \
F(traced_chunks_discarded, S, I, T, M) \
F(traced_data_sources_registered, S, I, T, M) \
F(traced_data_sources_seen, S, I, T, M) \
F(traced_final_flush_failed, S, D, T, M) \
F(traced_final_flush_succeeded, S, I, T, M) \
F(traced_flushes_failed, S, D, T, M) \
F(traced_flushes_requested, S, I, T, M) \
F(traced_flushes_succeeded, S, I, T, M) \
F(traced_patches_discarded, S, I, T, M) \
F(traced_producers_connected, S, I, T, M) \
F(traced_producers_seen, S, I, T, M) \
F(traced_total_buffers, S, I, T, M) \
F(traced_tracing_sessions, S, I, T, M) \
F(track_event_parser_errors, S, I, A, M) \
F(track_event_dropped_packets_outside_of_range_of_interest, S, I, A, M) \
F(track_event_tokenizer_errors, S, I, A, M) \
F(track_hierarchy_missing_uuid, S, I, A, M) \
F(track_event_thread_invalid_end, S, E, T, M) \
F(tokenizer_skipped_packets, S, I, A, M) \
F(vmstat_unknown_keys, S, E, A, M) \
F(psi_unknown_resource, S, E, A, M) \
F(vulkan_allocations_invalid_string_id, S, E, T, M) \
F(clock_sync_failure, S, E, A, M) \
F(clock_sync_failure_unknown_source_clock, S, E, A, M) \
F(clock_sync_failure_unknown_target_clock, S, E, A, M) \
F(clock_sync_failure_no_path, S, E, A, M) \
F(clock_sync_unrelatable_clock_domains, S, E, A, M) \
F(clock_sync_mixed_clock_sources, S, E, A, M) \
F(clock_sync_failure_undeferrable_packet_loss, S, D, A, M) \
F(clock_sync_cache_miss, S, I, A, G) \
F(process_tracker_errors, S, E, A, M) \
F(process_tracker_parent_pid_changed, S, I, A, M) \
F(namespaced_thread_missing_process, S, E, A, M) \
F(json_tokenizer_failure, S, E, T, M) \
F(json_parser_failure, S, E, T, M) \
F(json_display_time_unit, S, I, T, M) \
F(heap_graph_invalid_string_id, X, E, T, G) \
F(heap_graph_malformed_packet, X, E, T, G) \
F(heap_graph_missing_packet, X, E, T, G) \
F(heapprofd_buffer_corrupted, X, E, T, M) \
F(heapprofd_hit_guardrail, X, E, T, M) \
F(heapprofd_buffer_overran, X, D, T, M) \
F(heapprofd_client_error, X, E, T, M) \
F(heapprofd_client_disconnected, X, I, T, M) \
F(heapprofd_malformed_packet, X, E, T, M) \
F(heapprofd_missing_packet, S, E, T, M) \
F(heapprofd_rejected_concurrent, X, E, T, M) \
F(heapprofd_non_finalized_profile, S, E, T, M) \
F(heapprofd_sampling_interval_adjusted, X, I, T, M) \
F(heapprofd_unwind_time_us, X, I, T, M) \
F(heapprofd_unwind_samples, X, I, T, M) \
F(heapprofd_client_spinlock_blocked, X, I, T, M) \
F(heapprofd_last_profile_timestamp, X, I, T, M) \
F(symbolization_tmp_build_id_not_found, S, E, A, M) \
F(metatrace_overruns, S, E, T, M) \
F(packages_list_has_parse_errors, S, E, T, M) \
F(packages_list_has_read_errors, S, E, T, M) \
F(user_list_errors, S, E, T, M) \
F(game_intervention_has_parse_errors, S, E, T, M) \
F(game_intervention_has_read_errors, S, E, T, M) \
F(compact_sched_has_parse_errors, S, E, T, M) \
F(misplaced_end_event, S, D, A, M) \
F(truncated_sys_write_duration, S, I, A, M) \
F(compact_sched_switch_skipped, S, I, A, M) \
F(compact_sched_waking_skipped, S, I, A, M) \
F(empty_chrome_metadata, S, E, T, M) \
F(ninja_parse_errors, S, E, T, M) \
F(perf_cpu_lost_records, X, D, T, M) \
F(perf_process_shard_count, X, I, T, M) \
F(perf_chosen_process_shard, X, I, T, M) \
F(perf_guardrail_stop_ts, X, D, T, M) \
F(perf_unknown_record_type, X, I, A, M) \
F(perf_record_skipped, X, E, A, M) \
F(perf_samples_skipped, S, E, A, M) \
F(perf_features_skipped, X, I, A, M) \
F(perf_samples_cpu_mode_unknown, S, E, A, M) \
F(perf_samples_skipped_dataloss, S, D, T, M) \
F(perf_dummy_mapping_used, S, I, A, M) \
F(perf_aux_missing, S, D, T, M) \
F(perf_aux_ignored, S, I, T, M) \
F(perf_aux_lost, S, D, T, M) \
F(perf_aux_truncated, S, D, T, M) \
F(perf_aux_partial, S, D, T, M) \
F(perf_aux_collision, S, D, T, M) \
F(perf_auxtrace_missing, S, D, T, M) \
F(perf_unknown_aux_data, X, D, T, M) \
F(perf_no_tsc_data, S, I, T, M) \
F(spe_no_timestamp, S, I, T, M) \
F(etm_no_importer, S, E, A, M) \
F(memory_snapshot_parser_failure, S, E, A, M) \
F(thread_time_in_state_unknown_cpu_freq, S, E, A, M) \
F(ftrace_packet_before_tracing_start, S, I, A, M) \
F(sorter_push_event_out_of_order, S, E, T, G) \
F(unknown_extension_fields, S, E, T, M) \
F(network_trace_intern_errors, S, I, A, M) \
F(network_trace_parse_errors, S, I, A, M) \
F(atom_timestamp_missing, S, E, T, M) \
F(atom_unknown, S, I, A, M) \
F(v8_intern_errors, S, D, A, M) \
F(v8_isolate_has_no_code_range, S, E, A, M) \
F(v8_no_defaults, S, D, A, M) \
F(v8_no_code_range, S, E, A, M) \
F(v8_unknown_code_type, S, E, A, M) \
F(v8_code_load_missing_code_range, S, E, A, M) \
F(winscope_inputmethod_clients_parse_errors, S, E, A, M) \
F(winscope_inputmethod_manager_service_parse_errors, S, E, A, M) \
F(winscope_inputmethod_service_parse_errors, S, E, A, M) \
F(winscope_sf_layers_parse_errors, S, E, A, M) \
F(winscope_sf_transactions_parse_errors, S, E, A, M) \
F(winscope_shell_transitions_parse_errors, S, E, A, M) \
F(winscope_protolog_invalid_interpolation_parse_errors, S, I, A, M) \
F(winscope_protolog_missing_interned_arg_parse_errors, S, I, A, M) \
F(winscope_protolog_missing_interned_stacktrace_parse_errors, S, I, A, M) \
F(winscope_protolog_message_decoding_failed, S, I, A, M) \
F(winscope_protolog_message_collision, S, I, A, M) \
F(winscope_protolog_message_collision_resolved, S, I, A, M) \
F(winscope_protolog_group_tag_collision, S, I, A, M) \
F(winscope_protolog_group_tag_missing, S, I, A, M) \
F(winscope_protolog_param_mismatch, S, I, A, M) \
F(winscope_viewcapture_parse_errors, S, E, A, M) \
F(winscope_viewcapture_missing_interned_string_parse_errors, S, E, A, M) \
F(winscope_windowmanager_parse_errors, S, E, A, M) \
F(jit_unknown_frame, S, D, T, M) \
F(ftrace_missing_event_id, S, I, A, M) \
F(android_input_event_parse_errors, S, I, A, M) \
F(mali_unknown_mcu_state_id, S, E, A, M) \
F(pixel_modem_negative_timestamp, S, E, A, M) \
F(legacy_v8_cpu_profile_invalid_callsite, S, E, T, M) \
F(legacy_v8_cpu_profile_invalid_sample, S, E, T, M) \
F(config_write_into_file_no_flush, S, E, T, M) \
F(config_write_into_file_discard, X, D, T, M) \
F(long_trace_mode_bytes_overwritten, X, D, T, M) \
F(hprof_string_counter, S, I, A, M) \
F(hprof_class_counter, S, I, A, M) \
F(hprof_heap_dump_counter, S, I, A, M) \
F(hprof_instance_counter, S, I, A, M) \
F(hprof_object_array_counter, S, I, A, M) \
F(hprof_primitive_array_counter, S, I, A, M) \
F(hprof_root_counter, S, I, A, M) \
F(hprof_reference_counter, S, I, A, M) \
F(hprof_record_counter, S, I, A, M) \
F(hprof_segment_overshoot_counter, S, I, A, M) \
F(hprof_field_value_errors, S, E, A, M) \
F(hprof_class_errors, S, E, A, M) \
F(hprof_header_errors, S, E, A, M) \
F(hprof_heap_dump_errors, S, E, A, M) \
F(hprof_primitive_array_parsing_errors, S, E, A, M) \
F(hprof_reference_errors, S, E, A, M) \
F(trace_sorter_negative_timestamp_dropped, S, E, T, G) \
F(slice_drop_overlapping_complete_event, S, E, A, M) \
F(slice_spill_overlapping_complete_event, S, E, A, M) \
F(perf_text_importer_sample_no_frames, S, E, T, M) \
F(strace_parse_failure, S, I, T, M) \
F(strace_unsupported_timestamp_format, S, E, T, M) \
F(strace_missing_pid, S, E, T, M) \
F(simpleperf_missing_file_mapping, S, D, T, M) \
F(slice_negative_duration, S, E, A, M) \
F(slice_max_depth_exceeded, S, E, A, M) \
F(gpu_work_period_negative_duration, S, E, A, M) \
F(track_descriptor_missing_uuid, S, E, A, M) \
F(track_descriptor_thread_missing_pid_tid, S, E, A, M) \
F(track_descriptor_process_missing_pid, S, E, A, M) \
F(track_event_missing_sequence_id, S, E, A, M) \
F(track_event_missing_timestamp, S, E, A, M) \
F(track_event_invalid_timestamp, S, E, A, M) \
F(streaming_profile_invalid_timestamp, S, E, A, M) \
F(thread_descriptor_missing_sequence_id, S, E, A, M) \
F(incremental_state_cleared_missing_sequence_id, S, E, A, M) \
F(previous_packet_dropped_missing_sequence_id, S, E, A, M) \
F(trace_packet_defaults_missing_sequence_id, S, E, A, M) \
F(interned_data_missing_sequence_id, S, E, A, M) \
F(track_event_track_hierarchy_loop, S, E, A, M) \
F(track_event_track_hierarchy_too_deep, S, E, A, M) \
F(track_descriptor_default_track_with_parent, S, E, A, M) \
F(track_descriptor_conflicting_reservation, S, E, A, M) \
F(track_event_range_of_interest_missing_start_us, S, E, A, M) \
F(track_descriptor_invalid_child_ordering, S, E, A, M) \
F(track_event_counter_missing_track_uuid, S, E, A, M) \
F(track_event_counter_missing_value, S, E, A, M) \
F(track_event_counter_invalid_track_uuid, S, E, A, M) \
F(track_event_extra_counter_missing_track_uuids, S, E, A, M) \
F(track_event_state_missing_track_uuid, S, E, A, M) \
F(track_event_extra_counter_track_uuid_mismatch, S, E, A, M) \
F(track_event_extra_counter_exceeds_max, S, E, A, M) \
F(track_event_extra_counter_invalid_track, S, E, A, M) \
F(thread_descriptor_skipped_incremental_state_invalid, S, N, A, M) \
F(track_event_skipped_timestamp_delta_without_valid_state, S, N, A, M) \
F(track_event_skipped_thread_time_delta_without_valid_state, S, N, A, M) \
F(track_event_skipped_thread_instruction_delta_without_valid_state, S, N, A, M) \
F(packet_skipped_seq_needs_incremental_state_invalid, S, N, A, M) \
F(interned_data_skipped_incremental_state_invalid, S, N, A, M) \
F(heap_graph_non_finalized_graph, S, D, T, G) \
F(primes_unknown_edge_type, S, D, A, M) \
F(primes_executor_not_found, S, D, A, M) \
F(primes_end_without_matching_begin, S, I, A, M) \
F(primes_missing_entity_details, S, I, A, M) \
F(primes_missing_parent_id, S, I, A, M) \
F(primes_malformed_timestamp, S, D, A, M) \
F(protovm_abort, S, E, A, M) \
F(protovm_registration_error, S, E, A, M) \
F(extra_parsing_descriptors_error, S, E, A, G)

enum { STAT_SINGLE, STAT_INDEXED };
enum { SEV_INFO, SEV_NOTICE, SEV_DATA_LOSS, SEV_ERROR };
enum { SRC_TRACE, SRC_ANALYSIS };
enum { SCOPE_MACHINE_AND_TRACE, SCOPE_GLOBAL };

#define KIND_S STAT_SINGLE
#define KIND_X STAT_INDEXED
#define SEVC_I SEV_INFO
#define SEVC_N SEV_NOTICE
#define SEVC_D SEV_DATA_LOSS
#define SEVC_E SEV_ERROR
#define SRCC_T SRC_TRACE
#define SRCC_A SRC_ANALYSIS
#define SCOPEC_M SCOPE_MACHINE_AND_TRACE
#define SCOPEC_G SCOPE_GLOBAL

struct stat_def {
	const char *name;
	uint8_t kind, severity, source, scope;
};

#define STAT_DEF(n, k, sev, src, sc)                                        \
	{ #n, KIND_##k, SEVC_##sev, SRCC_##src, SCOPEC_##sc },
static const struct stat_def known_stats[] = { TP_KNOWN_STATS(STAT_DEF) };
#undef STAT_DEF

#define NKNOWN (sizeof(known_stats) / sizeof(known_stats[0]))

static const char *const severity_name[] = {
	[SEV_INFO] = "info",
	[SEV_NOTICE] = "notice",
	[SEV_DATA_LOSS] = "data_loss",
	[SEV_ERROR] = "error",
};
static const char *const source_name[] = {
	[SRC_TRACE] = "trace",
	[SRC_ANALYSIS] = "analysis",
};

/* A few descriptions, in our words, for the stats users most often ask
 * about; the others have an empty description. */
static const struct {
	const char *name, *text;
} stat_descriptions[] = {
	{ "generic_task_state_invalid_order",
	  "Invalid order of generic task state events. Should never happen." },
	{ "ftrace_cpu_has_data_loss",
	  "The kernel ftrace buffer of this cpu overwrote events before they "
	  "were read: its data is incomplete. Use a bigger buffer or fewer "
	  "events." },
	{ "traced_buf_patches_failed",
	  "The tracing service may have lost data written into this buffer." },
	{ "traced_buf_trace_writer_packet_loss",
	  "The tracing service saw packets lost for this buffer." },
	{ "traced_buf_sequence_packet_loss",
	  "Number of runs of consecutive lost packets, summed over the "
	  "sequences writing into this buffer." },
	{ "traced_buf_incremental_sequences_dropped",
	  "Number of sequences of this buffer whose packets were all dropped "
	  "because their incremental state (interned data) was never valid." },
	{ "long_trace_mode_bytes_overwritten",
	  "Bytes this buffer overwrote in streaming (write_into_file) mode: "
	  "they never reached the trace file." },
	{ "config_write_into_file_discard",
	  "write_into_file with a DISCARD buffer: this can silently lose data; "
	  "use RING_BUFFER." },
	{ "config_write_into_file_no_flush",
	  "write_into_file without flush_period_ms: the whole trace is held in "
	  "memory." },
	{ "cpu_info_unknown_cpu_features",
	  "CpuInfo had cpu feature bits this version does not know." },
	{ "misplaced_end_event",
	  "An end event had no matching begin on its track and was dropped." },
	{ "clock_sync_failure",
	  "A timestamp could not be converted to the trace clock; its event "
	  "was dropped." },
};

/* One counter value. */
struct stat_val {
	uint32_t def;     /* index in defs */
	uint32_t machine;
	int64_t idx;      /* -1: not indexed */
	int64_t value;
	uint32_t next;    /* chain in the hash bucket, UINT32_MAX: end */
};

/* A stat name not in known_stats. */
struct extra_def {
	char *name;
	bool indexed;
};

struct meta_val {
	tp_str name;
	int64_t machine; /* < 0: trace-wide */
	bool multi;
	bool is_str;
	int64_t i;
	tp_str s;
};

struct tp_stats {
	/* name hash -> def index + 1 (open addressing, verified by strcmp) */
	uint32_t *name_slots;
	uint32_t name_nslots;
	struct extra_def *extra;
	uint32_t nextra, extra_cap;

	struct stat_val *vals;
	uint32_t nvals, vals_cap;
	struct u64map val_index; /* key hash -> first val in chain */

	struct meta_val *meta;
	uint32_t nmeta, meta_cap;
	bool uuid_derived; /* trace_uuid hashed from the input, not read */
};

static uint64_t str_hash64(const char *s)
{
	uint64_t h = 14695981039346656037ull;
	for (; *s; s++) {
		h ^= (uint8_t)*s;
		h *= 1099511628211ull;
	}
	return h;
}

static const char *def_name(const struct tp_stats *s, uint32_t def)
{
	return def < NKNOWN ? known_stats[def].name
			    : s->extra[def - NKNOWN].name;
}

static void name_insert(struct tp_stats *s, uint32_t def)
{
	uint32_t mask = s->name_nslots - 1;
	uint32_t j = (uint32_t)str_hash64(def_name(s, def)) & mask;
	while (s->name_slots[j])
		j = (j + 1) & mask;
	s->name_slots[j] = def + 1;
}

static void name_rehash(struct tp_stats *s)
{
	uint32_t ndefs = (uint32_t)NKNOWN + s->nextra;
	uint32_t n = 1024;
	while (n < ndefs * 2 + 2)
		n *= 2;
	free(s->name_slots);
	s->name_slots = vp_xcalloc(n, sizeof(*s->name_slots));
	s->name_nslots = n;
	for (uint32_t d = 0; d < ndefs; d++)
		name_insert(s, d);
}

struct tp_stats *tp_stats_new(void)
{
	struct tp_stats *s = vp_xcalloc(1, sizeof(*s));
	u64map_init(&s->val_index);
	name_rehash(s);
	return s;
}

void tp_stats_free(struct tp_stats *s)
{
	if (!s)
		return;
	for (uint32_t i = 0; i < s->nextra; i++)
		free(s->extra[i].name);
	free(s->extra);
	free(s->name_slots);
	free(s->vals);
	u64map_free(&s->val_index);
	free(s->meta);
	free(s);
}

/* The definition index of name; unknown names are added. */
static uint32_t stat_def(struct tp_stats *s, const char *name, bool indexed)
{
	uint32_t mask = s->name_nslots - 1;
	uint32_t j = (uint32_t)str_hash64(name) & mask;
	while (s->name_slots[j]) {
		uint32_t d = s->name_slots[j] - 1;
		if (strcmp(def_name(s, d), name) == 0)
			return d;
		j = (j + 1) & mask;
	}
	if (s->nextra == s->extra_cap) {
		s->extra_cap = s->extra_cap ? s->extra_cap * 2 : 16;
		void *p = vp_xrealloc(s->extra, s->extra_cap * sizeof(*s->extra));
		s->extra = p;
	}
	char *copy = vp_xstrdup(name);
	s->extra[s->nextra].name = copy;
	s->extra[s->nextra].indexed = indexed;
	uint32_t d = (uint32_t)NKNOWN + s->nextra++;
	if ((NKNOWN + s->nextra) * 2 >= s->name_nslots)
		name_rehash(s);
	else
		name_insert(s, d);
	return d;
}

static uint64_t val_key(uint32_t def, uint32_t machine, int64_t idx)
{
	uint64_t h = def * 0x9e3779b97f4a7c15ull;
	h ^= (machine + 1) * 0xc2b2ae3d27d4eb4full;
	h ^= (uint64_t)idx * 0x165667b19e3779f9ull;
	h ^= h >> 29;
	return h;
}

/* The value slot of (name, machine, idx), created (0) if absent. */
static int64_t *stat_slot(struct tp_ctx *ctx, const char *name,
			  uint32_t machine, int64_t idx, bool create)
{
	struct tp_stats *s = ctx->stats;
	if (!s || !name)
		return NULL;
	if (idx < -1)
		idx = -1;
	uint32_t def = stat_def(s, name, idx >= 0);
	uint64_t key = val_key(def, machine, idx);
	uint64_t first;
	uint32_t head = UINT32_MAX;
	if (u64map_get(&s->val_index, key, &first)) {
		head = (uint32_t)first;
		for (uint32_t i = head; i != UINT32_MAX; i = s->vals[i].next) {
			struct stat_val *v = &s->vals[i];
			if (v->def == def && v->machine == machine &&
			    v->idx == idx)
				return &v->value;
		}
	}
	if (!create)
		return NULL;
	if (s->nvals == s->vals_cap) {
		s->vals_cap = s->vals_cap ? s->vals_cap * 2 : 64;
		void *p = vp_xrealloc(s->vals, s->vals_cap * sizeof(*s->vals));
		s->vals = p;
	}
	uint32_t i = s->nvals++;
	s->vals[i] = (struct stat_val){ .def = def, .machine = machine,
					.idx = idx, .value = 0, .next = head };
	u64map_put(&s->val_index, key, i);
	return &s->vals[i].value;
}

void tp_stat_add(struct tp_ctx *ctx, const char *name, uint32_t machine,
		 int64_t idx, int64_t delta)
{
	int64_t *v = stat_slot(ctx, name, machine, idx, true);
	if (v)
		*v = (int64_t)((uint64_t)*v + (uint64_t)delta);
}

void tp_stat_set(struct tp_ctx *ctx, const char *name, uint32_t machine,
		 int64_t idx, int64_t value)
{
	int64_t *v = stat_slot(ctx, name, machine, idx, true);
	if (v)
		*v = value;
}

int64_t tp_stat_get(struct tp_ctx *ctx, const char *name, uint32_t machine,
		    int64_t idx)
{
	int64_t *v = stat_slot(ctx, name, machine, idx, false);
	return v ? *v : 0;
}

bool tp_stat_find(struct tp_ctx *ctx, const char *name, uint32_t machine,
		  int64_t idx, int64_t *out)
{
	int64_t *v = stat_slot(ctx, name, machine, idx, false);

	if (v)
		*out = *v;
	return v != NULL;
}

/* ---- metadata ---------------------------------------------------------- */

static struct meta_val *meta_new(struct tp_stats *s)
{
	if (s->nmeta == s->meta_cap) {
		s->meta_cap = s->meta_cap ? s->meta_cap * 2 : 32;
		void *p = vp_xrealloc(s->meta, s->meta_cap * sizeof(*s->meta));
		s->meta = p;
	}
	struct meta_val *m = &s->meta[s->nmeta++];
	memset(m, 0, sizeof(*m));
	return m;
}

static struct meta_val *meta_find(struct tp_stats *s, tp_str name,
				  int64_t machine)
{
	if (machine < 0)
		machine = -1;
	for (uint32_t i = 0; i < s->nmeta; i++) {
		struct meta_val *m = &s->meta[i];
		if (m->name == name && m->machine == machine && !m->multi)
			return m;
	}
	return NULL;
}

static struct meta_val *meta_single(struct tp_ctx *ctx, const char *name,
				    int64_t machine)
{
	struct tp_stats *s = ctx->stats;
	tp_str n = tp_s(ctx, name);
	struct meta_val *m = meta_find(s, n, machine);
	if (!m) {
		m = meta_new(s);
		m->name = n;
		m->machine = machine < 0 ? -1 : machine;
	}
	return m;
}

void tp_meta_set_int(struct tp_ctx *ctx, const char *name, int64_t machine,
		     int64_t v)
{
	if (!ctx->stats || !name)
		return;
	struct meta_val *m = meta_single(ctx, name, machine);
	m->is_str = false;
	m->i = v;
	m->s = 0;
}

void tp_meta_set_str(struct tp_ctx *ctx, const char *name, int64_t machine,
		     const char *s, size_t len)
{
	if (!ctx->stats || !name)
		return;
	tp_str v = tp_intern(ctx->pool, s ? s : "", s ? len : 0);
	struct meta_val *m = meta_single(ctx, name, machine);
	m->is_str = true;
	m->s = v;
	m->i = 0;
}

void tp_meta_append_str(struct tp_ctx *ctx, const char *name, int64_t machine,
			const char *s, size_t len)
{
	if (!ctx->stats || !name)
		return;
	tp_str v = tp_intern(ctx->pool, s ? s : "", s ? len : 0);
	struct meta_val *m = meta_new(ctx->stats);
	m->name = tp_s(ctx, name);
	m->machine = machine < 0 ? -1 : machine;
	m->multi = true;
	m->is_str = true;
	m->s = v;
}

void tp_meta_append_int(struct tp_ctx *ctx, const char *name, int64_t machine,
			int64_t v)
{
	if (!ctx->stats || !name)
		return;
	struct meta_val *m = meta_new(ctx->stats);
	m->name = tp_s(ctx, name);
	m->machine = machine < 0 ? -1 : machine;
	m->multi = true;
	m->i = v;
}

bool tp_meta_has(struct tp_ctx *ctx, const char *name, int64_t machine)
{
	if (!ctx->stats || !name)
		return false;
	tp_str n = tp_s(ctx, name);
	if (machine < 0)
		machine = -1;
	for (uint32_t i = 0; i < ctx->stats->nmeta; i++)
		if (ctx->stats->meta[i].name == n &&
		    ctx->stats->meta[i].machine == machine)
			return true;
	return false;
}

static const struct meta_val *meta_lookup(struct tp_ctx *ctx,
					  const char *name, int64_t machine)
{
	if (!ctx->stats || !name)
		return NULL;
	return meta_find(ctx->stats, tp_s(ctx, name), machine);
}

bool tp_meta_get_int(struct tp_ctx *ctx, const char *name, int64_t machine,
		     int64_t *out)
{
	const struct meta_val *m = meta_lookup(ctx, name, machine);
	if (!m || m->is_str)
		return false;
	*out = m->i;
	return true;
}

bool tp_meta_get_str(struct tp_ctx *ctx, const char *name, int64_t machine,
		     const char **out)
{
	const struct meta_val *m = meta_lookup(ctx, name, machine);
	if (!m || !m->is_str)
		return false;
	*out = tp_str_get(ctx->pool, m->s);
	return *out != NULL;
}

/* ---- trace-wide metadata ------------------------------------------------ */

/* Formats a 128-bit uuid as Perfetto prints it: msb then lsb in hex,
 * 8-4-4-4-12. */
static void format_uuid(uint64_t msb, uint64_t lsb, char out[37])
{
	snprintf(out, 37, "%08x-%04x-%04x-%04x-%012llx",
		 (unsigned)(msb >> 32), (unsigned)(msb >> 16 & 0xffff),
		 (unsigned)(msb & 0xffff), (unsigned)(lsb >> 48),
		 (unsigned long long)(lsb & 0xffffffffffffull));
}

/* Without a uuid in the trace, Perfetto derives one from a 64-bit FNV-1a
 * hash of the first 4 KiB of the input (as the lsb; msb 0), which the
 * loader took as it opened it (tp_input.h). */
static bool derived_uuid(struct tp_ctx *ctx, char out[37])
{
	if (!ctx->have_head_hash)
		return false;
	format_uuid(0, ctx->head_hash, out);
	return true;
}

static void write_trace_wide_metadata(struct tp_ctx *ctx)
{
	/* Perfetto parses nothing of an empty file, so it has none */
	if (ctx->file_size == 0)
		return;
	if (!tp_meta_has(ctx, "trace_type", -1))
		tp_meta_set_str(ctx, "trace_type", -1, "proto", 5);
	tp_meta_set_int(ctx, "trace_size_bytes", -1, (int64_t)ctx->file_size);
	if (!tp_meta_has(ctx, "trace_uuid", -1)) {
		char uuid[37];
		if (derived_uuid(ctx, uuid)) {
			tp_meta_set_str(ctx, "trace_uuid", -1, uuid,
					strlen(uuid));
			ctx->stats->uuid_derived = true;
		}
	}
}

/* Metadata keys Perfetto scopes to a machine within a trace: both
 * machine_id and trace_id are set. */
static bool meta_machine_and_trace(const char *name)
{
	static const char *const keys[] = {
		"ftrace_latest_data_start_ns", "all_data_source_flushed_ns",
		"all_data_source_started_ns", "slow_start_data_source",
		"tracing_disabled_ns", "tracing_started_ns",
	};
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		if (strcmp(keys[i], name) == 0)
			return true;
	return false;
}

/* Entries no trace or machine owns (machine_id and trace_id NULL): the
 * trace clock, and a trace_uuid hashed from the input, which Perfetto
 * sets before it knows of a trace (one read from the trace is the
 * trace's). */
static bool meta_global(const struct tp_ctx *ctx, const char *name)
{
	return strcmp(name, "trace_time_clock_id") == 0 ||
	       (ctx->stats->uuid_derived && strcmp(name, "trace_uuid") == 0);
}

/* The keys of Perfetto's own list that belong to a trace alone.  Any
 * other trace-wide name (trace attributes, Chrome's metadata) is a key
 * Perfetto makes up as it reads, and scopes to the trace's first machine
 * as well. */
static bool meta_trace_key(const char *name)
{
	static const char *const keys[] = {
		"android_profile_boot_classpath", "android_profile_system_server",
		"benchmark_description", "benchmark_had_failures",
		"benchmark_label", "benchmark_name", "benchmark_start_time_us",
		"benchmark_story_name", "benchmark_story_run_index",
		"benchmark_story_run_time_us", "benchmark_story_tags",
		"range_of_interest_start_us", "statsd_triggering_subscription_id",
		"trace_config_pbtxt", "trace_size_bytes", "trace_trigger",
		"trace_type", "trace_uuid", "unique_session_name", "ui_state",
	};
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		if (strcmp(keys[i], name) == 0)
			return true;
	return false;
}

static void metadata_row(struct tp_ctx *ctx, const struct meta_val *m,
			 tp_str single, tp_str multi)
{
	struct tp_table *t = tp_tab(ctx, TP_T_METADATA);
	const char *name = tp_str_get(ctx->pool, m->name);
	uint32_t r = tp_table_add_row(t);
	tp_set_str(t, TP_METADATA_name, r, m->name);
	tp_set_str(t, TP_METADATA_key_type, r, m->multi ? multi : single);
	if (m->is_str) {
		/* Perfetto's string pool holds no empty string: NULL */
		if (tp_str_len(ctx->pool, m->s))
			tp_set_str(t, TP_METADATA_str_value, r, m->s);
	} else
		tp_set_int(t, TP_METADATA_int_value, r, m->i);
	if (m->machine < 0) {
		if (!meta_global(ctx, name))
			tp_set_int(t, TP_METADATA_trace_id, r, 0);
		if (!meta_global(ctx, name) && !meta_trace_key(name))
			tp_set_int(t, TP_METADATA_machine_id, r, 0);
	} else {
		tp_set_int(t, TP_METADATA_machine_id, r, m->machine);
		if (meta_machine_and_trace(name))
			tp_set_int(t, TP_METADATA_trace_id, r, 0);
	}
}

/* The rows of trace-wide entry `name`. */
static void metadata_rows_of(struct tp_ctx *ctx, tp_str name, tp_str single,
			     tp_str multi)
{
	struct tp_stats *s = ctx->stats;
	for (uint32_t i = 0; i < s->nmeta; i++)
		if (s->meta[i].name == name && s->meta[i].machine < 0)
			metadata_row(ctx, &s->meta[i], single, multi);
}

/* In Perfetto's order: the trace_uuid and trace_type it sets as it starts
 * on the file, the entries the trace wrote, then the trace config it
 * writes out once the whole file is read, and the file's size. */
static void write_metadata(struct tp_ctx *ctx)
{
	struct tp_stats *s = ctx->stats;
	tp_str single = tp_s(ctx, "single"), multi = tp_s(ctx, "multi");
	tp_str placed[] = {
		tp_s(ctx, "trace_uuid"), tp_s(ctx, "trace_type"),
		tp_s(ctx, "trace_config_pbtxt"), tp_s(ctx, "trace_size_bytes"),
	};
	const size_t nplaced = sizeof(placed) / sizeof(placed[0]);

	metadata_rows_of(ctx, placed[0], single, multi);
	metadata_rows_of(ctx, placed[1], single, multi);
	for (uint32_t i = 0; i < s->nmeta; i++) {
		const struct meta_val *m = &s->meta[i];
		bool is_placed = false;
		for (size_t k = 0; k < nplaced && m->machine < 0; k++)
			is_placed |= m->name == placed[k];
		if (!is_placed)
			metadata_row(ctx, m, single, multi);
	}
	metadata_rows_of(ctx, placed[2], single, multi);
	metadata_rows_of(ctx, placed[3], single, multi);
}

/* ---- the stats table ----------------------------------------------------- */

static void def_props(const struct tp_stats *s, uint32_t def, bool *indexed,
		      int *sev, int *src, int *scope)
{
	if (def < NKNOWN) {
		*indexed = known_stats[def].kind == STAT_INDEXED;
		*sev = known_stats[def].severity;
		*src = known_stats[def].source;
		*scope = known_stats[def].scope;
	} else {
		*indexed = s->extra[def - NKNOWN].indexed;
		*sev = SEV_ERROR;
		*src = SRC_ANALYSIS;
		*scope = SCOPE_MACHINE_AND_TRACE;
	}
}

/* Stats this list has that Perfetto v58.2, the version whose key
 * numbers the stats table's `key` column follows, does not: a later
 * Perfetto added them in mid-list, so they are numbered after v58.2's
 * last stat instead, and the stats after them keep v58.2's numbers. */
static const char *const newer_stats[] = {
	"long_trace_mode_bytes_overwritten",
};
#define NNEWER (sizeof(newer_stats) / sizeof(newer_stats[0]))

static bool is_newer(const char *name)
{
	for (size_t i = 0; i < NNEWER; i++)
		if (strcmp(newer_stats[i], name) == 0)
			return true;
	return false;
}

/* The stat's numeric key, as Perfetto's stats table has it: its place in
 * Perfetto's list (extras, names outside the list, after all of it). */
static int64_t def_key(uint32_t def)
{
	if (def >= NKNOWN)
		return (int64_t)def;
	int64_t newer_before = 0;
	for (uint32_t i = 0; i < def; i++)
		newer_before += is_newer(known_stats[i].name);
	if (!is_newer(known_stats[def].name))
		return (int64_t)def - newer_before;
	return (int64_t)(NKNOWN - NNEWER) + newer_before;
}

static const char *def_description(const char *name)
{
	size_t n = sizeof(stat_descriptions) / sizeof(stat_descriptions[0]);
	for (size_t i = 0; i < n; i++)
		if (strcmp(stat_descriptions[i].name, name) == 0)
			return stat_descriptions[i].text;
	return "";
}

static int cmp_val(const void *a, const void *b)
{
	const struct stat_val *x = a, *y = b;
	if (x->def != y->def)
		return x->def < y->def ? -1 : 1;
	if (x->machine != y->machine)
		return x->machine < y->machine ? -1 : 1;
	if (x->idx != y->idx)
		return x->idx < y->idx ? -1 : 1;
	return 0;
}

static void stats_row(struct tp_ctx *ctx, uint32_t def, uint32_t machine,
		      int64_t idx, int64_t value)
{
	struct tp_stats *s = ctx->stats;
	struct tp_table *t = tp_tab(ctx, TP_T_STATS);
	bool indexed;
	int sev, src, scope;
	def_props(s, def, &indexed, &sev, &src, &scope);
	const char *name = def_name(s, def);
	uint32_t r = tp_table_add_row(t);
	tp_set_str(t, TP_STATS_name, r, tp_s(ctx, name));
	tp_set_int(t, TP_STATS_key, r, def_key(def));
	if (idx >= 0)
		tp_set_int(t, TP_STATS_idx, r, idx);
	tp_set_str(t, TP_STATS_severity, r, tp_s(ctx, severity_name[sev]));
	tp_set_str(t, TP_STATS_source, r, tp_s(ctx, source_name[src]));
	tp_set_int(t, TP_STATS_value, r, value);
	tp_set_str(t, TP_STATS_description, r,
		   tp_s(ctx, def_description(name)));
	if (scope == SCOPE_MACHINE_AND_TRACE) {
		tp_set_int(t, TP_STATS_machine_id, r, machine);
		tp_set_int(t, TP_STATS_trace_id, r, 0);
	}
}

/* The value of single stat `def` on `machine` in sorted[0..n), 0 when
 * nothing touched it. */
static int64_t single_value(const struct stat_val *sorted, uint32_t n,
			    uint32_t def, uint32_t machine)
{
	uint32_t lo = 0, hi = n;
	while (lo < hi) { /* the first entry not before (def, machine) */
		uint32_t mid = lo + (hi - lo) / 2;
		const struct stat_val *v = &sorted[mid];
		if (v->def < def || (v->def == def && v->machine < machine))
			lo = mid + 1;
		else
			hi = mid;
	}
	for (; lo < n && sorted[lo].def == def && sorted[lo].machine == machine;
	     lo++)
		if (sorted[lo].idx < 0)
			return sorted[lo].value;
	return 0;
}

/* Rows as Perfetto lists them: each known single stat once for the whole
 * load (global ones) and once per machine (the rest), 0 when untouched,
 * each group in key order; then every touched indexed entry, and every
 * stat of a name Perfetto does not know. */
static void write_stats(struct tp_ctx *ctx)
{
	struct tp_stats *s = ctx->stats;
	struct stat_val *sorted = NULL;
	if (s->nvals) {
		sorted = vp_xmalloc(s->nvals * sizeof(*sorted));
		memcpy(sorted, s->vals, s->nvals * sizeof(*sorted));
		qsort(sorted, s->nvals, sizeof(*sorted), cmp_val);
	}
	/* an empty file has no machine, and so only the global stats */
	uint32_t nmachines = tp_tab(ctx, TP_T_MACHINE)->nrows;
	bool indexed;
	int sev, src, scope;
	for (int pass = 0; pass <= (int)nmachines; pass++) {
		/* pass 0: the global stats; pass m + 1: machine m's */
		for (uint32_t d = 0; d < NKNOWN; d++) {
			def_props(s, d, &indexed, &sev, &src, &scope);
			if (indexed || (scope == SCOPE_GLOBAL) != (pass == 0))
				continue;
			int64_t value = 0;
			if (pass) {
				value = single_value(sorted, s->nvals, d,
						     (uint32_t)pass - 1);
			} else { /* counted under any machine: one value */
				for (uint32_t m = 0; m < nmachines; m++)
					value += single_value(sorted, s->nvals,
							      d, m);
			}
			stats_row(ctx, d, pass ? (uint32_t)pass - 1 : 0, -1,
				  value);
		}
	}
	for (uint32_t j = 0; j < s->nvals; j++) {
		const struct stat_val *v = &sorted[j];
		def_props(s, v->def, &indexed, &sev, &src, &scope);
		bool listed = v->def < NKNOWN && !indexed &&
			      v->machine < nmachines;
		if (!listed)
			stats_row(ctx, v->def, v->machine, v->idx, v->value);
	}
	free(sorted);
}

void tp_stats_finish(struct tp_ctx *ctx)
{
	if (!ctx->stats)
		return;
	write_trace_wide_metadata(ctx);
	write_stats(ctx);
	write_metadata(ctx);
}

void tp_stats_visit(struct tp_ctx *ctx, tp_stat_visit_fn fn, void *arg)
{
	struct tp_stats *s = ctx->stats;
	if (!s)
		return;
	for (uint32_t i = 0; i < s->nvals; i++) {
		struct stat_val *v = &s->vals[i];
		if (!v->value)
			continue;
		bool indexed;
		int sev, src, scope;
		def_props(s, v->def, &indexed, &sev, &src, &scope);
		fn(arg, def_name(s, v->def), v->idx, v->machine, v->value,
		   severity_name[sev]);
	}
}

/* ---- warnings ----------------------------------------------------------- */

void tp_warn(struct tp_ctx *ctx, const char *fmt, ...)
{
	va_list ap;
	char msg[512];

	if (ctx->quiet || ctx->warnings >= 20)
		return;
	ctx->warnings++;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	vp_log_warn("%s: %s", ctx->path ? ctx->path : "trace", msg);
	if (ctx->warnings == 20)
		vp_log_warn("further warnings suppressed; see the stats table");
}
