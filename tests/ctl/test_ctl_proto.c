/*
 * test_ctl_proto.c - unit tests of the guest control protocol
 * (ctl/ctl_proto.h): every message type round-trips, input split at
 * every byte decodes the same, garbage and corrupted frames are skipped
 * and the decoder resynchronizes, oversize lengths are refused.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <zlib.h>

#include "ctl_proto.h"

/* Encodes m; the frame is malloc'd. */
static uint8_t *enc(const struct vp_ctl_msg *m, size_t *len)
{
	uint8_t *f;
	struct vp_error e;
	assert_int_equal(vp_ctl_encode(m, &f, len, &e), 0);
	return f;
}

/* Decodes every frame of p[0..n) fed in pieces of `piece` bytes; parses
 * them into out[] (up to max); returns how many. */
static size_t decode_all(struct vp_ctl_decoder *d, const uint8_t *p, size_t n,
			 size_t piece, struct vp_ctl_msg *out, size_t max,
			 uint8_t **keep)
{
	size_t count = 0, off = 0;

	while (off < n) {
		size_t k = n - off < piece ? n - off : piece, pos = 0;
		bool got;
		struct vp_ctl_frame f;
		do {
			pos += vp_ctl_decode(d, p + off + pos, k - pos, &f, &got);
			if (got) {
				struct vp_error e;
				assert_true(count < max);
				assert_int_equal(vp_ctl_parse_payload(
					f.type, f.id, f.payload, f.len,
					&out[count], &e), 0);
				/* Byte fields point into the decoder: copy. */
				if (out[count].bytes_len) {
					keep[count] = malloc(out[count].bytes_len);
					memcpy(keep[count], out[count].bytes,
					       out[count].bytes_len);
					out[count].bytes = keep[count];
				}
				count++;
			}
		} while (got || pos < k);
		off += k;
	}
	return count;
}

/* One message of every type, with distinctive field values. */
static size_t sample_msgs(struct vp_ctl_msg *m)
{
	static const uint8_t cfg[] = {0x0a, 0x03, 0x08, 0x80, 0x40, 0x00, 0xff};
	static uint8_t big[200000];
	size_t n = 0;

	for (size_t i = 0; i < sizeof(big); i++)
		big[i] = (uint8_t)(i * 31 + 7);
	memset(m, 0, 12 * sizeof(*m));
	m[n] = (struct vp_ctl_msg){.type = VP_CTL_HELLO, .id = 1, .version = 1};
	strcpy(m[n++].machine, "host-a");
	m[n] = (struct vp_ctl_msg){.type = VP_CTL_HELLO_REPLY, .id = 1,
				   .version = 1, .consumer_ok = true,
				   .state = VP_CTL_ENDED, .trace_size = 123456};
	strcpy(m[n].machine, "guest");
	strcpy(m[n].uname, "Linux 6.1.0 x86_64");
	strcpy(m[n++].consumer, "/bin/vperfetto");
	m[n] = (struct vp_ctl_msg){.type = VP_CTL_START, .id = 2, .bytes = cfg,
				   .bytes_len = sizeof(cfg),
				   .start_key = 0xfedcba9876543210ull};
	strcpy(m[n++].session, "s1");
	m[n++] = (struct vp_ctl_msg){.type = VP_CTL_STARTED, .id = 2,
				     .pid = 4242};
	m[n++] = (struct vp_ctl_msg){.type = VP_CTL_STOP, .id = 3};
	m[n++] = (struct vp_ctl_msg){.type = VP_CTL_STOPPED, .id = 3,
				     .trace_size = 99, .exit_status = -1};
	m[n++] = (struct vp_ctl_msg){.type = VP_CTL_PULL, .id = 4,
				     .offset = 5, .chunk = 4096};
	m[n++] = (struct vp_ctl_msg){.type = VP_CTL_DATA, .id = 4,
				     .offset = 1ull << 33, .bytes = big,
				     .bytes_len = sizeof(big)};
	m[n++] = (struct vp_ctl_msg){.type = VP_CTL_END, .id = 4,
				     .total = 200005, .crc = 0xdeadbeef};
	m[n++] = (struct vp_ctl_msg){.type = VP_CTL_PING, .id = 0xffffffffu};
	m[n] = (struct vp_ctl_msg){.type = VP_CTL_PONG, .id = 0xffffffffu,
				   .state = VP_CTL_FAILED, .exit_status = 130};
	strcpy(m[n].session, "s1");
	strcpy(m[n++].text, "guest consumer failed");
	m[n] = (struct vp_ctl_msg){.type = VP_CTL_ERROR, .id = 9,
				   .request_type = VP_CTL_START};
	strcpy(m[n++].text, "session running");
	return n;
}

static void assert_msg_equal(const struct vp_ctl_msg *a,
			     const struct vp_ctl_msg *b)
{
	assert_int_equal(a->type, b->type);
	assert_int_equal(a->id, b->id);
	assert_int_equal(a->version, b->version);
	assert_true(a->start_key == b->start_key);
	assert_string_equal(a->machine, b->machine);
	assert_string_equal(a->uname, b->uname);
	assert_string_equal(a->consumer, b->consumer);
	assert_int_equal(a->consumer_ok, b->consumer_ok);
	assert_int_equal(a->state, b->state);
	assert_int_equal(a->trace_size, b->trace_size);
	assert_int_equal(a->pid, b->pid);
	assert_int_equal(a->exit_status, b->exit_status);
	assert_int_equal(a->offset, b->offset);
	assert_int_equal(a->chunk, b->chunk);
	assert_int_equal(a->total, b->total);
	assert_int_equal(a->crc, b->crc);
	assert_int_equal(a->request_type, b->request_type);
	assert_string_equal(a->session, b->session);
	assert_string_equal(a->text, b->text);
	assert_int_equal(a->bytes_len, b->bytes_len);
	if (a->bytes_len)
		assert_memory_equal(a->bytes, b->bytes, a->bytes_len);
}

/* All samples, concatenated, with optional junk between them. */
static uint8_t *stream(const struct vp_ctl_msg *m, size_t n, bool junk,
		       size_t *len)
{
	uint8_t *s = NULL;
	size_t total = 0;

	for (size_t i = 0; i < n; i++) {
		size_t fl;
		uint8_t *f = enc(&m[i], &fl);
		s = realloc(s, total + fl + 64);
		if (junk) {
			for (int j = 0; j < 37; j++)
				s[total++] = (uint8_t)(j * 13 + i);
			memcpy(s + total, "VPC", 3); /* a false start */
			total += 3;
		}
		memcpy(s + total, f, fl);
		total += fl;
		free(f);
	}
	*len = total;
	return s;
}

static void check_stream(const uint8_t *s, size_t len, size_t piece,
			 const struct vp_ctl_msg *want, size_t n,
			 uint64_t *skipped)
{
	struct vp_ctl_decoder d;
	struct vp_ctl_msg *got = calloc(16, sizeof(*got));
	uint8_t *keep[16] = {0};

	vp_ctl_decoder_init(&d);
	size_t c = decode_all(&d, s, len, piece, got, 16, keep);
	assert_int_equal(c, n);
	for (size_t i = 0; i < n; i++)
		assert_msg_equal(&got[i], &want[i]);
	if (skipped)
		*skipped = d.skipped_bytes;
	vp_ctl_decoder_free(&d);
	for (size_t i = 0; i < 16; i++)
		free(keep[i]);
	free(got);
}

static void test_round_trip(void **state)
{
	struct vp_ctl_msg m[12];
	size_t n = sample_msgs(m), len;
	(void)state;

	uint8_t *s = stream(m, n, false, &len);
	check_stream(s, len, len, m, n, NULL);
	free(s);
}

static void test_split_input(void **state)
{
	struct vp_ctl_msg m[12];
	size_t n = sample_msgs(m), len;
	(void)state;

	uint8_t *s = stream(m, n, false, &len);
	static const size_t pieces[] = {1, 2, 3, 7, 19, 20, 21, 4096, 65537};
	for (size_t i = 0; i < sizeof(pieces) / sizeof(pieces[0]); i++)
		check_stream(s, len, pieces[i], m, n, NULL);
	free(s);
}

static void test_garbage_resync(void **state)
{
	struct vp_ctl_msg m[12];
	size_t n = sample_msgs(m), len;
	uint64_t skipped;
	(void)state;

	uint8_t *s = stream(m, n, true, &len);
	check_stream(s, len, len, m, n, &skipped);
	assert_int_equal(skipped, n * 40);
	check_stream(s, len, 1, m, n, &skipped);
	assert_int_equal(skipped, n * 40);
	free(s);
}

/* A frame with a bad payload CRC is dropped, and a good frame hidden in
 * its payload, and the one after it, still come through. */
static void test_corrupted_crc(void **state)
{
	struct vp_ctl_msg ping = {.type = VP_CTL_PING, .id = 5};
	struct vp_ctl_msg stop = {.type = VP_CTL_STOP, .id = 6};
	struct vp_ctl_msg carrier = {.type = VP_CTL_START, .id = 4};
	size_t pl, sl, cl;
	(void)state;

	uint8_t *p = enc(&ping, &pl);
	carrier.bytes = p;
	carrier.bytes_len = pl;
	uint8_t *c = enc(&carrier, &cl);
	uint8_t *s = enc(&stop, &sl);
	c[cl - 2] ^= 1; /* the carrier's payload CRC */
	uint8_t *all = malloc(cl + sl);
	memcpy(all, c, cl);
	memcpy(all + cl, s, sl);

	struct vp_ctl_msg want[2] = {ping, stop};
	struct vp_ctl_decoder d;
	struct vp_ctl_msg got[4];
	uint8_t *keep[4] = {0};
	vp_ctl_decoder_init(&d);
	size_t n = decode_all(&d, all, cl + sl, cl + sl, got, 4, keep);
	assert_int_equal(n, 2);
	assert_msg_equal(&got[0], &want[0]);
	assert_msg_equal(&got[1], &want[1]);
	assert_int_equal(d.bad_frames, 1);

	/* A flipped header byte: the header CRC refuses it at once. */
	vp_ctl_decoder_free(&d);
	vp_ctl_decoder_init(&d);
	s[9] ^= 0x80;
	n = decode_all(&d, s, sl, 1, got, 4, keep);
	assert_int_equal(n, 0);
	assert_int_equal(d.skipped_bytes, sl);
	vp_ctl_decoder_free(&d);
	free(all);
	free(p);
	free(c);
	free(s);
}

/* A header claiming more than VP_CTL_MAX_PAYLOAD (with a valid header CRC)
 * is refused without waiting for its bytes; a frame right after it
 * decodes; the encoder refuses oversize payloads. */
static void test_oversize(void **state)
{
	struct vp_ctl_msg ping = {.type = VP_CTL_PING, .id = 8};
	size_t pl, hl;
	(void)state;

	uint8_t *p = enc(&ping, &pl);
	uint8_t *h = enc(&ping, &hl);
	uint32_t big = VP_CTL_MAX_PAYLOAD + 1;
	for (int i = 0; i < 4; i++)
		h[12 + i] = (uint8_t)(big >> (8 * i));
	/* Recompute the header CRC so only the length is wrong. */
	uint32_t hc = (uint32_t)crc32(crc32(0, NULL, 0), h, 16);
	for (int i = 0; i < 4; i++)
		h[16 + i] = (uint8_t)(hc >> (8 * i));
	uint8_t all[64];
	memcpy(all, h, 20);
	memcpy(all + 20, p, pl);

	struct vp_ctl_decoder d;
	struct vp_ctl_msg got[2];
	uint8_t *keep[2] = {0};
	vp_ctl_decoder_init(&d);
	size_t n = decode_all(&d, all, 20 + pl, 3, got, 2, keep);
	assert_int_equal(n, 1);
	assert_int_equal(got[0].id, 8);
	assert_int_equal(d.skipped_bytes, 20);
	assert_true(d.cap < 4096);
	vp_ctl_decoder_free(&d);

	struct vp_ctl_msg data = {.type = VP_CTL_DATA, .id = 1};
	uint8_t *huge = calloc(1, VP_CTL_MAX_PAYLOAD);
	data.bytes = huge;
	data.bytes_len = VP_CTL_MAX_PAYLOAD;
	uint8_t *f = (uint8_t *)1;
	size_t fl;
	struct vp_error e;
	assert_int_equal(vp_ctl_encode(&data, &f, &fl, &e), -1);
	assert_null(f);
	assert_non_null(strstr(e.msg, "exceeds"));
	/* The largest DATA chunk fits easily. */
	data.bytes_len = VP_CTL_MAX_CHUNK;
	assert_int_equal(vp_ctl_encode(&data, &f, &fl, &e), 0);
	free(f);
	free(huge);
	free(p);
	free(h);
}

/* Payload parsing: malformed protobuf is refused with a message; unknown
 * fields and types are handled. */
static void test_payload_errors(void **state)
{
	struct vp_ctl_msg *m = malloc(sizeof(*m));
	struct vp_error e;
	static const uint8_t trunc[] = {0x12, 0x05, 'a'};
	static const uint8_t unknown[] = {0xf8, 0x01, 0x05, 0x08, 0x2a};
	(void)state;

	assert_int_equal(vp_ctl_parse_payload(VP_CTL_ERROR, 3, trunc,
					      sizeof(trunc), m, &e), -1);
	assert_non_null(strstr(e.msg, "ERROR (id 3): malformed payload"));
	assert_int_equal(vp_ctl_parse_payload(VP_CTL_STARTED, 3, unknown,
					      sizeof(unknown), m, &e), 0);
	assert_int_equal(m->pid, 42);
	assert_int_equal(vp_ctl_parse_payload(77, 3, NULL, 0, m, &e), -1);
	assert_non_null(strstr(e.msg, "unknown message type 77"));
	assert_string_equal(vp_ctl_type_name(77), "type 77");
	assert_string_equal(vp_ctl_type_name(VP_CTL_PULL), "PULL");
	free(m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_split_input),
		cmocka_unit_test(test_garbage_resync),
		cmocka_unit_test(test_corrupted_crc),
		cmocka_unit_test(test_oversize),
		cmocka_unit_test(test_payload_errors),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
