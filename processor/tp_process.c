/*
 * tp_process.c - process_tree and process_stats packets (skeleton).
 */
#include "tp_modules.h"
