
        SELECT d.name AS descendant_name
        FROM slice AS s
        JOIN descendant_slice(s.id) AS d
        WHERE s.name = 'uncle'
        ORDER BY d.ts, d.name;
        