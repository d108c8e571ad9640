/*
 * progress.c - the merge's progress bar (progress.h).
 */
#include "progress.h"

#include <stdio.h>
#include <string.h>

void progress_add(struct progress *p, uint64_t bytes)
{
	if (!p->on) {
		p->done += bytes;
		return;
	}
	pthread_mutex_lock(&p->mu);
	p->done += bytes;
	int pct = p->total ? (int)(p->done * 100 / p->total) : p->shown;
	if (pct == p->shown) {
		pthread_mutex_unlock(&p->mu);
		return;
	}
	p->shown = pct;
	char bar[41];
	int fill = pct * 40 / 100;
	memset(bar, '#', (size_t)fill);
	memset(bar + fill, '.', (size_t)(40 - fill));
	bar[40] = 0;
	fprintf(stderr, "\r[%s] %3d%%", bar, pct);
	if (pct >= 100)
		fputc('\n', stderr);
	pthread_mutex_unlock(&p->mu);
}

void progress_cb(void *p, uint64_t bytes)
{
	progress_add(p, bytes);
}
