/*
 * ipc_capture_demo.c - a producer-shaped IPC exchange in one process, for
 * tests/ipc/ipc_protoc.sh.
 *
 *   ipc_capture_demo run         host (ProducerPort, on a loop thread) and
 *                                client: bind, InitializeConnection with
 *                                producer_name "capture-test", its reply.
 *                                Run with VPERFETTO_IPC_CAPTURE set, the
 *                                client's frames land in that directory.
 *   ipc_capture_demo args FILE   writes the args_proto of the InvokeMethod
 *                                (or the reply_proto of the reply) in the
 *                                captured frame FILE to stdout.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "event_loop.h"
#include "ipc_client.h"
#include "ipc_frame.h"
#include "ipc_host.h"
#include "perfetto/ipc/producer_port.pb-c.h"

static void init_connection(void *ctx, struct vp_ipc_conn *c, uint64_t id,
			    const uint8_t *args, size_t len)
{
	(void)ctx;
	Perfetto__Protos__InitializeConnectionRequest *req =
		perfetto__protos__initialize_connection_request__unpack(
			NULL, len, args);
	bool ok = req && req->producer_name &&
		  strcmp(req->producer_name, "capture-test") == 0;
	if (req)
		perfetto__protos__initialize_connection_request__free_unpacked(
			req, NULL);
	Perfetto__Protos__InitializeConnectionResponse resp =
		PERFETTO__PROTOS__INITIALIZE_CONNECTION_RESPONSE__INIT;
	resp.has_direct_smb_patching_supported = true;
	resp.direct_smb_patching_supported = true;
	uint8_t buf[64];
	size_t n = perfetto__protos__initialize_connection_response__pack(&resp,
									 buf);
	vp_ipc_conn_reply(c, id, ok, false, buf, n, -1);
}

static void *loop_main(void *arg)
{
	vp_loop_run(arg);
	return NULL;
}

static int run(void)
{
	static const struct vp_ipc_method methods[] = {
		{"InitializeConnection", init_connection},
	};
	struct vp_ipc_service svc = {.name = "ProducerPort",
				     .methods = methods,
				     .n_methods = 1};
	struct vp_error err;
	struct vp_loop *loop;
	struct vp_ipc_host *host;
	char dir[] = "/tmp/vp_capture_demo_XXXXXX";
	char addr[128];

	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	snprintf(addr, sizeof(addr), "%s/producer.sock", dir);
	if (vp_loop_new(&loop, &err) < 0 ||
	    vp_ipc_host_new(&host, loop, &svc, &err) < 0 ||
	    vp_ipc_host_listen(host, addr, &err) < 0) {
		fprintf(stderr, "host: %s\n", err.msg);
		return 1;
	}
	pthread_t th;
	pthread_create(&th, NULL, loop_main, loop);

	int rc = 1;
	struct vp_ipc_client *c = NULL;
	Perfetto__Protos__InitializeConnectionRequest req =
		PERFETTO__PROTOS__INITIALIZE_CONNECTION_REQUEST__INIT;
	req.producer_name = "capture-test";
	req.has_shared_memory_size_hint_bytes = true;
	req.shared_memory_size_hint_bytes = 1u << 20;
	uint8_t args[128];
	size_t n = perfetto__protos__initialize_connection_request__pack(&req,
									args);
	uint8_t *reply = NULL;
	size_t reply_len = 0;
	if (vp_ipc_client_connect(&c, addr, 5000, &err) < 0 ||
	    vp_ipc_client_bind(c, "ProducerPort", 5000, &err) < 0 ||
	    vp_ipc_client_call(c, "InitializeConnection", args, n, &reply,
			       &reply_len, NULL, 5000, &err) < 0)
		fprintf(stderr, "client: %s\n", err.msg);
	else
		rc = 0;
	free(reply);
	vp_ipc_client_close(c);
	vp_loop_quit(loop);
	pthread_join(th, NULL);
	vp_ipc_host_free(host);
	vp_loop_free(loop);
	rmdir(dir);
	if (rc == 0)
		printf("InitializeConnection: %zu reply bytes\n", reply_len);
	return rc;
}

static int extract_args(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		perror(path);
		return 1;
	}
	static uint8_t buf[1 << 20];
	size_t n = fread(buf, 1, sizeof(buf), f);
	fclose(f);
	struct vp_ipc_frame fr;
	struct vp_error err;
	if (vp_ipc_frame_decode(buf, n, &fr, &err) < 0) {
		fprintf(stderr, "%s: %s\n", path, err.msg);
		return 1;
	}
	struct vp_ipc_bytes b;
	if (fr.msg == VP_IPC_MSG_INVOKE_METHOD)
		b = fr.invoke.args;
	else if (fr.msg == VP_IPC_MSG_INVOKE_METHOD_REPLY)
		b = fr.reply.reply;
	else {
		fprintf(stderr, "%s: not an InvokeMethod or its reply\n", path);
		return 1;
	}
	return fwrite(b.data, 1, b.len, stdout) == b.len ? 0 : 1;
}

int main(int argc, char **argv)
{
	if (argc == 2 && strcmp(argv[1], "run") == 0)
		return run();
	if (argc == 3 && strcmp(argv[1], "args") == 0)
		return extract_args(argv[2]);
	fprintf(stderr, "usage: %s run | args FRAME.bin\n", argv[0]);
	return 2;
}
