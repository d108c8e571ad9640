SELECT s.id, s.ts, s.name FROM slice s ORDER BY s.id;
SELECT name, idx, severity, source, value FROM stats WHERE value <> 0 AND source <> 'analysis' ORDER BY name, idx;
