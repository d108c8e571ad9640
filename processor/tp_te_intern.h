/*
 * tp_te_intern.h - the strings a track event names: its own bytes, or
 * iids of its sequence's interned data (event names, categories, debug
 * annotation names and values), looked up through a cache the parse of
 * every event goes through.
 */
#ifndef VP_TP_TE_INTERN_H
#define VP_TP_TE_INTERN_H

#include <stddef.h>
#include <stdint.h>

#include "tp_db.h"

struct tp_ctx;

struct tp_te_intern *tp_te_intern_new(void);
void tp_te_intern_free(struct tp_te_intern *in);

/* A string field's bytes (up to a NUL), interned. */
tp_str tp_te_intern_bytes(struct tp_ctx *ctx, const uint8_t *p, size_t n);
/* The name of interned-data entry iid of InternedData field `field` in
 * generation gen; 0 when there is none. */
tp_str tp_te_interned(struct tp_ctx *ctx, uint32_t gen, uint32_t field,
		      uint64_t iid);
/* out = prefix "." name (len bytes of it, up to a NUL), cut to cap: the
 * key of a debug annotation or of a dict entry.  As Perfetto, each '.',
 * '[' and ']' of the name becomes '_', so that a name never reads as a
 * step of the key's path. */
void tp_te_arg_key(char *out, size_t cap, const char *prefix,
		   const char *name, size_t len);
/* "debug.<name>" for an interned debug annotation name; 0 for none. */
tp_str tp_te_interned_debug_key(struct tp_ctx *ctx, uint32_t gen,
				uint64_t iid);

#endif
