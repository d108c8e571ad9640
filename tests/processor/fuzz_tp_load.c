/*
 * fuzz_tp_load.c - libFuzzer target for vperfetto_tp: loads the input as a
 * trace, then runs a few queries over every kind of table (output goes to
 * /dev/null).  Whatever the bytes, loading and querying must not crash,
 * hang or leak.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "tp_load.h"
#include "tp_query.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const fuzz_queries[] = {
	"SELECT count(*), sum(dur), max(depth) FROM slice",
	"SELECT s.name, EXTRACT_ARG(s.arg_set_id, 'debug.x') FROM slice s "
	"LIMIT 50",
	"SELECT t.name, t.type FROM track t LEFT JOIN thread USING (utid) "
	"LIMIT 50",
	"SELECT name, idx, value FROM stats WHERE value > 0",
	"SELECT count(*) FROM counter JOIN args USING (arg_set_id)",
	"SELECT * FROM metadata",
	"SELECT count(*) FROM sched JOIN thread_state USING (utid)",
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static FILE *devnull;
	const struct tp_load_opts opts = {.progress = false, .quiet = true};
	struct vp_error err;
	struct tp_ctx *ctx;
	struct sqlite3 *db;

	if (!devnull)
		devnull = fopen("/dev/null", "w");
	ctx = tp_ctx_new();
	tp_load_buffer(ctx, data, size, &opts);
	db = tp_query_open(ctx, &err);
	if (db) {
		/* Each query on its own: an error in one must not hide the
		 * others.  Only crashes matter here, not the results. */
		for (size_t i = 0;
		     i < sizeof(fuzz_queries) / sizeof(fuzz_queries[0]); i++)
			tp_query_run(db, fuzz_queries[i],
				     devnull ? devnull : stdout, &err);
		tp_query_close(db);
	}
	tp_ctx_free(ctx);
	return 0;
}
