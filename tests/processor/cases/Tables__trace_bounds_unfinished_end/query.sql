
        SELECT * FROM trace_bounds;
        