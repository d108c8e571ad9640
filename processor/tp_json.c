/*
 * tp_json.c - JSON helpers for track event args (skeleton).
 */
#include "tp_json.h"
