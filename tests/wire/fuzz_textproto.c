/*
 * fuzz_textproto.c - libFuzzer target: arbitrary bytes parsed as a text
 * format TraceConfig.  Parsing never crashes or leaks; on success, the
 * printed message parses back to one that packs to the same bytes.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "perfetto/config/config.pb-c.h"
#include "textproto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint8_t *pack(const ProtobufCMessage *m, size_t *len)
{
	*len = protobuf_c_message_get_packed_size(m);
	uint8_t *buf = malloc(*len ? *len : 1);
	if (!buf)
		abort();
	protobuf_c_message_pack(m, buf);
	return buf;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const ProtobufCMessageDescriptor *desc =
		&perfetto__protos__trace_config__descriptor;
	ProtobufCMessage *m, *back;
	struct vp_error err;

	if (vp_textproto_parse(desc, (const char *)data, size, "fuzz", &m,
			       &err) < 0) {
		if (m != NULL || strncmp(err.msg, "fuzz:", 5) != 0)
			abort();
		return 0;
	}
	char *text = vp_textproto_print(m);
	if (!text)
		abort();
	if (vp_textproto_parse(desc, text, strlen(text), "printed", &back,
			       &err) < 0)
		abort(); /* the printer wrote something the parser rejects */
	size_t la, lb;
	uint8_t *a = pack(m, &la);
	uint8_t *b = pack(back, &lb);
	if (la != lb || memcmp(a, b, la) != 0)
		abort();
	free(a);
	free(b);
	free(text);
	protobuf_c_message_free_unpacked(back, NULL);
	protobuf_c_message_free_unpacked(m, NULL);
	return 0;
}
