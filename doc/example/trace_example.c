/*
 * trace_example.c - a program traced with the installed libvperfetto, in
 * process (no tracing service needed): it writes the trace file itself.
 *
 *     cc trace_example.c $(pkg-config --cflags --libs vperfetto) -o trace_example
 *     ./trace_example example.pftrace
 *     vperfetto_tp example.pftrace -Q 'select name, dur from slice'
 */
#include <stdio.h>

#include <vperfetto/vperfetto.h>

VP_CATEGORY(app, "app", "the example's events");

static unsigned long fib(unsigned n)
{
	return n < 2 ? n : fib(n - 1) + fib(n - 2);
}

int main(int argc, char **argv)
{
	struct vp_init_args a = {
		.backend = VP_BACKEND_IN_PROCESS,
		.output_path = argc > 1 ? argv[1] : "example.pftrace",
		.categories = "app",
	};
	if (vp_init(&a) < 0)
		return 1;
	for (unsigned n = 20; n < 25; n++) {
		TRACE_EVENT_BEGIN(app, "fib", VP_ARG_UINT("n", n));
		unsigned long r = fib(n);
		TRACE_EVENT_END(app);
		TRACE_COUNTER(app, "result", r);
		TRACE_EVENT_INSTANT(app, "done", VP_ARG_STRING("what", "fib"));
	}
	vp_shutdown();
	printf("wrote %s\n", a.output_path);
	return 0;
}
