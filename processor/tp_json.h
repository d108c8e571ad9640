/*
 * tp_json.h - flattens a JSON value into args (legacy_json_value).
 */
#ifndef VP_TP_JSON_H
#define VP_TP_JSON_H

#include <stddef.h>

#endif
