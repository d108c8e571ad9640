/*
 * ftrace_page.c - walks the events of one raw ring-buffer page (see
 * ftrace_page.h for the layout).  Values are in host byte order: the page
 * comes from the running kernel.
 */
#include <string.h>

#include "ftrace_page.h"

#define TS_SHIFT 27
#define TYPE_PADDING 29
#define TYPE_TIME_EXTEND 30
#define TYPE_TIME_STAMP 31
#define MAX_DATA_TYPE 28
#define MISSED_EVENTS (1ull << 31)
#define COMMIT_MASK ((1ull << 30) - 1)
/* An absolute time stamp carries the low 59 bits of the time. */
#define ABS_TS_MASK ((1ull << 59) - 1)

static uint32_t rd32(const uint8_t *p)
{
	uint32_t v;
	memcpy(&v, p, sizeof v);
	return v;
}

static uint64_t rd64(const uint8_t *p)
{
	uint64_t v;
	memcpy(&v, p, sizeof v);
	return v;
}

/* Reads the page header; returns its size, or 0 if the page is too short
 * or claims more data than it holds. */
static size_t read_header(const struct ftrace_page_layout *l,
			  const uint8_t *page, size_t len,
			  struct ftrace_page_info *info,
			  enum ftrace_parse_status *st)
{
	size_t hdr = 8 + l->commit_size;
	uint64_t commit;

	if (len < hdr) {
		*st = FTRACE_STATUS_PARTIAL_PAGE_READ;
		return 0;
	}
	info->base_ts = rd64(page);
	commit = l->commit_size == 8 ? rd64(page + 8) : rd32(page + 8);
	info->missed_events = (commit & MISSED_EVENTS) != 0;
	info->data_len = (uint32_t)(commit & COMMIT_MASK);
	if (info->data_len > len - hdr) {
		*st = FTRACE_STATUS_ABI_INVALID_PAGE_HEADER;
		return 0;
	}
	return hdr;
}

enum ftrace_parse_status ftrace_page_parse(const struct ftrace_page_layout *l,
					   const uint8_t *page, size_t len,
					   ftrace_event_fn fn, void *ctx,
					   struct ftrace_page_info *info)
{
	enum ftrace_parse_status st = FTRACE_STATUS_OK;
	const uint8_t *p, *end;
	uint64_t ts;
	size_t hdr;

	memset(info, 0, sizeof *info);
	if (l->commit_size != 4 && l->commit_size != 8)
		return FTRACE_STATUS_ABI_INVALID_PAGE_HEADER;
	hdr = read_header(l, page, len, info, &st);
	if (!hdr)
		return st;
	p = page + hdr;
	end = p + info->data_len;
	ts = info->base_ts;
	info->last_ts = ts;

	while (p < end) {
		if ((size_t)(end - p) < 4)
			return FTRACE_STATUS_ABI_SHORT_EVENT_HEADER;
		uint32_t h = rd32(p);
		uint32_t type_len = h & 0x1f;
		uint32_t delta = h >> 5;
		p += 4;

		switch (type_len) {
		case TYPE_PADDING: {
			/* A zero delta means the rest of the page is unused;
			 * otherwise a discarded event of the given length. */
			if (delta == 0)
				return FTRACE_STATUS_OK;
			if ((size_t)(end - p) < 4)
				return FTRACE_STATUS_ABI_SHORT_PADDING_LENGTH;
			uint32_t plen = rd32(p);
			p += 4;
			if (plen < 4 || plen - 4 > (size_t)(end - p))
				return FTRACE_STATUS_ABI_INVALID_PADDING_LENGTH;
			p += plen - 4;
			break;
		}
		case TYPE_TIME_EXTEND:
			if ((size_t)(end - p) < 4)
				return FTRACE_STATUS_ABI_SHORT_TIME_EXTEND;
			ts += ((uint64_t)rd32(p) << TS_SHIFT) | delta;
			p += 4;
			break;
		case TYPE_TIME_STAMP: {
			if ((size_t)(end - p) < 4)
				return FTRACE_STATUS_ABI_SHORT_TIME_STAMP;
			uint64_t abs = ((uint64_t)rd32(p) << TS_SHIFT) | delta;
			/* The top bits the stamp cannot hold are the current
			 * time's. */
			ts = (abs & ABS_TS_MASK) | (ts & ~ABS_TS_MASK);
			p += 4;
			break;
		}
		default: {
			uint32_t dlen;
			if (type_len == 0) {
				/* The length word counts itself. */
				if ((size_t)(end - p) < 4)
					return FTRACE_STATUS_ABI_SHORT_DATA_LENGTH;
				dlen = rd32(p);
				p += 4;
				if (dlen < 4)
					return FTRACE_STATUS_ABI_ZERO_DATA_LENGTH;
				dlen -= 4;
			} else {
				dlen = type_len * 4; /* <= MAX_DATA_TYPE * 4 */
			}
			if (dlen > (size_t)(end - p))
				return FTRACE_STATUS_ABI_INVALID_DATA_LENGTH;
			ts += delta;
			if (dlen < 2)
				return FTRACE_STATUS_ABI_SHORT_EVENT_ID;
			info->last_ts = ts;
			info->n_events++;
			if (fn && fn(ctx, ts, p, dlen))
				return FTRACE_STATUS_OK;
			p += dlen;
			break;
		}
		}
	}
	return FTRACE_STATUS_OK;
}

const char *ftrace_status_name(enum ftrace_parse_status s)
{
	static const char *const names[] = {
		[FTRACE_STATUS_OK] = "OK",
		[FTRACE_STATUS_UNEXPECTED_READ_ERROR] = "UNEXPECTED_READ_ERROR",
		[FTRACE_STATUS_PARTIAL_PAGE_READ] = "PARTIAL_PAGE_READ",
		[FTRACE_STATUS_ABI_INVALID_PAGE_HEADER] =
			"ABI_INVALID_PAGE_HEADER",
		[FTRACE_STATUS_ABI_SHORT_EVENT_HEADER] = "ABI_SHORT_EVENT_HEADER",
		[FTRACE_STATUS_ABI_NULL_PADDING] = "ABI_NULL_PADDING",
		[FTRACE_STATUS_ABI_SHORT_PADDING_LENGTH] =
			"ABI_SHORT_PADDING_LENGTH",
		[FTRACE_STATUS_ABI_INVALID_PADDING_LENGTH] =
			"ABI_INVALID_PADDING_LENGTH",
		[FTRACE_STATUS_ABI_SHORT_TIME_EXTEND] = "ABI_SHORT_TIME_EXTEND",
		[FTRACE_STATUS_ABI_SHORT_TIME_STAMP] = "ABI_SHORT_TIME_STAMP",
		[FTRACE_STATUS_ABI_SHORT_DATA_LENGTH] = "ABI_SHORT_DATA_LENGTH",
		[FTRACE_STATUS_ABI_ZERO_DATA_LENGTH] = "ABI_ZERO_DATA_LENGTH",
		[FTRACE_STATUS_ABI_INVALID_DATA_LENGTH] =
			"ABI_INVALID_DATA_LENGTH",
		[FTRACE_STATUS_ABI_SHORT_EVENT_ID] = "ABI_SHORT_EVENT_ID",
		[FTRACE_STATUS_ABI_END_OVERFLOW] = "ABI_END_OVERFLOW",
		[FTRACE_STATUS_SHORT_COMPACT_EVENT] = "SHORT_COMPACT_EVENT",
		[FTRACE_STATUS_INVALID_EVENT] = "INVALID_EVENT",
	};
	if ((unsigned)s < sizeof names / sizeof names[0] && names[s])
		return names[s];
	return "UNKNOWN";
}
