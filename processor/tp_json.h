/*
 * tp_json.h - flattens a JSON text (DebugAnnotation.legacy_json_value) into
 * args the way Perfetto does: object members become `key.member`, array
 * elements `key[i]` (flat key without the index), scalars typed values.
 */
#ifndef VP_TP_JSON_H
#define VP_TP_JSON_H

#include <stdbool.h>
#include <stddef.h>

#include "tp_args.h"

struct tp_ctx;

/* Adds the values of the JSON text s (len bytes) under flat_key / key.
 * Returns false (adding nothing more) on malformed JSON. */
bool tp_json_to_args(struct tp_ctx *ctx, const char *s, size_t len,
		     const char *flat_key, const char *key,
		     struct tp_args_builder *b);

#endif
