
        select
          name,
          severity,
          source,
          value,
          description
        from stats
        where name = "generic_task_state_invalid_order"
        