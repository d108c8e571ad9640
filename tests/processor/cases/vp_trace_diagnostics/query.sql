SELECT key, printf('%.5f', confidence) AS confidence, trace_id,
  length(title) > 0 AND length(description) > 0
    AND length(remediation) > 0 AS has_text
FROM __intrinsic_trace_diagnostics ORDER BY id;
