/*
 * tp_shell.h - the interactive SQL shell of vperfetto_tp.
 */
#ifndef VP_TP_SHELL_H
#define VP_TP_SHELL_H

struct sqlite3;

/* Reads statements and dot commands from the terminal until .quit or EOF.
 * Returns the process exit status. */
/* trace_path: the loaded trace, which .dump must not overwrite. */
int tp_shell_run(struct sqlite3 *db, const char *trace_path);

#endif
