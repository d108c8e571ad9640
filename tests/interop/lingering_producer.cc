// lingering_producer.cc - a producer on Perfetto's C++ SDK that outlives its
// tracing session and never flushes: --threads threads each write --events
// "work" slices in category "stack" as soon as a session enables it, then
// stay idle until the session has ended (and one second more), so that what
// each thread's trace writer holds in its chunk reaches the trace only if
// the service scrapes shared memory.  For tests/interop/lingering_sdk.sh.
#include <perfetto/tracing.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

PERFETTO_DEFINE_CATEGORIES(
    perfetto::Category("stack").SetDescription("interop test events"));
PERFETTO_TRACK_EVENT_STATIC_STORAGE();

namespace {

void Work(int thread_index, int events) {
  for (int i = 0; i < events; i++) {
    TRACE_EVENT_BEGIN("stack", "work", "thread", thread_index, "seq", i);
    TRACE_EVENT_END("stack");
  }
  // Idle, writer still alive, until the session is over.
  while (TRACE_EVENT_CATEGORY_ENABLED("stack"))
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 2, events = 100;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--threads"))
      threads = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--events"))
      events = std::atoi(argv[i + 1]);
  }
  perfetto::TracingInitArgs args;
  args.backends = perfetto::kSystemBackend;
  perfetto::Tracing::Initialize(args);
  perfetto::TrackEvent::Register();

  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!TRACE_EVENT_CATEGORY_ENABLED("stack")) {
    if (std::chrono::steady_clock::now() > deadline) {
      std::fprintf(stderr, "lingering_producer: tracing never started\n");
      return 1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; t++)
    pool.emplace_back(Work, t, events);
  for (auto& th : pool)
    th.join();
  std::this_thread::sleep_for(std::chrono::seconds(1));
  std::fprintf(stderr, "lingering_producer: %d x %d slices\n", threads,
               events);
  return 0;
}
