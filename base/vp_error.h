/*
 * vp_error.h - an error message carried back to the caller.
 *
 * Functions that can fail take a struct vp_error * and return a negative
 * value; the message names what went wrong and where (file and byte offset,
 * or line and field), ready to print as is.
 */
#ifndef VP_ERROR_H
#define VP_ERROR_H

#define VP_ERROR_MAX 512

struct vp_error {
	char msg[VP_ERROR_MAX];
};

/* Formats into e (if not NULL) and returns -1, so callers can write
 * `return vp_errorf(err, "...")`. */
int vp_errorf(struct vp_error *e, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#endif
