
        select
          utid,
          tid,
          name,
          upid,
          is_main_thread,
          is_idle
        from thread
        