
        SELECT * FROM machine
        