/*
 * progress.h - the merge's progress bar on stderr: bytes of its passes
 * done out of all, drawn when the percentage changes.  With the bar on,
 * threads may add at once (the scans of pass 1 do); with it off, adding
 * is only counting, and one thread at a time may do it.
 */
#ifndef VP_MERGE_PROGRESS_H
#define VP_MERGE_PROGRESS_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

struct progress {
	bool on;
	uint64_t total, done;
	int shown; /* last percentage drawn */
	pthread_mutex_t mu;
};

void progress_add(struct progress *p, uint64_t bytes);
/* progress_add for callbacks that take a void * (partition.h). */
void progress_cb(void *p, uint64_t bytes);

#endif
