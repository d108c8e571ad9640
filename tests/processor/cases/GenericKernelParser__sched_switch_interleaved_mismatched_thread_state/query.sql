
        select
          ts,
          dur,
          cpu,
          utid,
          state,
          ucpu
        from thread_state
        