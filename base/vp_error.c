/* vp_error.c - formatting of error messages (see vp_error.h). */
#include "vp_error.h"

#include <stdarg.h>
#include <stdio.h>

int vp_errorf(struct vp_error *e, const char *fmt, ...)
{
	if (e) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
		va_end(ap);
	}
	return -1;
}
