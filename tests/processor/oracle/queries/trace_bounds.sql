select start_ts, end_ts from trace_bounds;
