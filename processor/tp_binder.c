/*
 * tp_binder.c - binder transactions and i2c transfers as slices, as
 * Perfetto's BinderTracker and I2cTracker make them from ftrace:
 *
 *   binder_transaction   on the sender's thread track: a call that expects
 *                        a reply opens "binder transaction", a one-way
 *                        call is an instant "binder transaction async",
 *                        a reply closes the replier's "binder reply";
 *                        all carry the transaction's args
 *   binder_transaction_received
 *                        on the receiver's thread track: a call opens
 *                        "binder reply" (and names the receiving thread
 *                        on the caller's slice), a one-way call is an
 *                        instant "binder async rcv", a reply closes the
 *                        caller's slice; a flow joins sent and received
 *   i2c_read / i2c_write / i2c_result
 *                        a slice "i2c-<adapter>" on the thread's track
 *                        from its first message to the result that counts
 *                        as many messages on the same adapter
 *
 * Perfetto also follows binder_command / binder_return to close slices of
 * failed transactions; this processor does not read those events.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "perfetto_fields.h"
#include "tp_args.h"
#include "tp_binder.h"
#include "tp_ctx.h"
#include "tp_flows.h"
#include "tp_procs.h"
#include "tp_slices.h"
#include "tp_tracks.h"
#include "vp_alloc.h"

/* binder's transaction flags (uapi/linux/android/binder.h). */
#define TF_ONE_WAY 0x01
#define TF_ROOT_OBJECT 0x04
#define TF_STATUS_CODE 0x08
#define TF_ACCEPT_FDS 0x10

/* Perfetto names i2c adapters 0 to 255 only. */
#define MAX_I2C_ADAPTERS 256

/* A transaction sent and not yet received. */
struct txn {
	uint32_t machine;
	int32_t id;
	bool is_reply, is_oneway;
	int64_t args;        /* the transaction's arg set, or -1 */
	uint32_t send_track;
	int64_t send_slice;  /* -1: none (a reply with nothing to close) */
};

/* The i2c transfer a thread has open. */
struct i2c_op {
	bool open;
	uint32_t adapter;
	uint32_t nr_msgs;
};

struct tp_binder {
	struct txn *txn;
	size_t ntxn, txn_cap;
	struct i2c_op *i2c;  /* by utid */
	size_t ni2c;
};

struct tp_binder *tp_binder_new(void)
{
	struct tp_binder *b = vp_xcalloc(1, sizeof(*b));

	return b;
}

void tp_binder_free(struct tp_binder *b)
{
	if (!b)
		return;
	free(b->txn);
	free(b->i2c);
	free(b);
}

/* The last varint field num of a payload, 0 if absent. */
static uint64_t varint_field(const uint8_t *data, size_t len, uint32_t num)
{
	struct pb_reader r;
	struct pb_field f;
	uint64_t v = 0;

	pb_reader_init(&r, data, len);
	while (pb_next(&r, &f))
		if (f.num == num && f.wt == PB_WT_VARINT)
			v = f.val;
	return v;
}

static struct txn *txn_find(struct tp_binder *b, uint32_t machine,
			    int32_t id)
{
	for (size_t i = 0; i < b->ntxn; i++)
		if (b->txn[i].machine == machine && b->txn[i].id == id)
			return &b->txn[i];
	return NULL;
}

/* A later transaction with the same id replaces the earlier one. */
static void txn_put(struct tp_binder *b, const struct txn *t)
{
	struct txn *old = txn_find(b, t->machine, t->id);

	if (old) {
		*old = *t;
		return;
	}
	if (b->ntxn == b->txn_cap) {
		b->txn_cap = b->txn_cap ? b->txn_cap * 2 : 16;
		b->txn = vp_xrealloc(b->txn, b->txn_cap * sizeof(*b->txn));
	}
	b->txn[b->ntxn++] = *t;
}

static void txn_drop(struct tp_binder *b, struct txn *t)
{
	*t = b->txn[--b->ntxn];
}

/* "0x10 allow replies with file descriptors; ": the flags in hex, then
 * what each set flag means. */
static tp_str flags_text(struct tp_ctx *ctx, uint32_t flags)
{
	char buf[256];
	int n = snprintf(buf, sizeof(buf), "0x%02x ", flags);

	if (flags & TF_ONE_WAY)
		n += snprintf(buf + n, sizeof(buf) - (size_t)n,
			      "this is a one-way call: async, no return; ");
	if (flags & TF_ROOT_OBJECT)
		n += snprintf(buf + n, sizeof(buf) - (size_t)n,
			      "contents are the components root object; ");
	if (flags & TF_STATUS_CODE)
		n += snprintf(buf + n, sizeof(buf) - (size_t)n,
			      "contents are a 32-bit status code; ");
	if (flags & TF_ACCEPT_FDS)
		n += snprintf(buf + n, sizeof(buf) - (size_t)n,
			      "allow replies with file descriptors; ");
	if (!flags)
		snprintf(buf + n, sizeof(buf) - (size_t)n, "No Flags Set");
	return tp_s(ctx, buf);
}

static void add_int(struct tp_ctx *ctx, struct tp_args_builder *a,
		    const char *key, int64_t v)
{
	tp_str k = tp_s(ctx, key);

	tp_args_add_int(a, k, k, v);
}

static void add_str(struct tp_ctx *ctx, struct tp_args_builder *a,
		    const char *key, tp_str v)
{
	tp_str k = tp_s(ctx, key);

	tp_args_add_str(a, k, k, v);
}

/* The receiving thread's args: its tid and, when known, its name. */
static int64_t dest_args(struct tp_ctx *ctx, uint32_t utid, int64_t tid,
			 bool tid_unsigned)
{
	struct tp_args_builder a;
	tp_str k = tp_s(ctx, "destination thread");
	tp_str name = tp_get_str(tp_tab(ctx, TP_T_THREAD), TP_THREAD_name,
				 utid);

	tp_args_builder_init(&a);
	if (tid_unsigned)
		tp_args_add_uint(&a, k, k, (uint64_t)tid);
	else
		tp_args_add_int(&a, k, k, tid);
	if (name)
		add_str(ctx, &a, "destination name", name);
	int64_t set = tp_args_commit(ctx, &a);
	tp_args_builder_free(&a);
	return set;
}

static int64_t txn_args(struct tp_ctx *ctx, int64_t tid, const uint8_t *data,
			size_t len)
{
	struct tp_args_builder a;
	char code[64];
	tp_str k = tp_s(ctx, "reply transaction?");

	tp_args_builder_init(&a);
	add_int(ctx, &a, "transaction id",
		(int32_t)varint_field(data, len, BTX_DEBUG_ID));
	add_int(ctx, &a, "destination node",
		(int32_t)varint_field(data, len, BTX_TARGET_NODE));
	/* Perfetto reads to_proc as a uint32, then stores it signed. */
	add_int(ctx, &a, "destination process",
		(uint32_t)varint_field(data, len, BTX_TO_PROC));
	tp_args_add_bool(&a, k, k,
			 (int32_t)varint_field(data, len, BTX_REPLY) == 1);
	add_str(ctx, &a, "flags",
		flags_text(ctx, (uint32_t)varint_field(data, len, BTX_FLAGS)));
	snprintf(code, sizeof(code), "0x%02x Java Layer Dependent",
		 (uint32_t)varint_field(data, len, BTX_CODE));
	add_str(ctx, &a, "code", tp_s(ctx, code));
	k = tp_s(ctx, "calling tid");
	tp_args_add_uint(&a, k, k, (uint32_t)tid);
	int64_t set = tp_args_commit(ctx, &a);
	tp_args_builder_free(&a);
	return set;
}

static void transaction(struct tp_ctx *ctx, int64_t ts, uint32_t machine,
			int64_t tid, const uint8_t *data, size_t len)
{
	tp_str binder = tp_s(ctx, "binder");
	uint32_t flags = (uint32_t)varint_field(data, len, BTX_FLAGS);
	struct txn t = {
		.machine = machine,
		.id = (int32_t)varint_field(data, len, BTX_DEBUG_ID),
		.is_reply = (int32_t)varint_field(data, len, BTX_REPLY) == 1,
		.is_oneway = flags & TF_ONE_WAY,
		.args = txn_args(ctx, tid, data, len),
		.send_track = tp_track_thread(ctx,
					      tp_thread_get(ctx, machine, tid)),
	};

	if (t.is_reply) {
		/* The reply ends the replier's "binder reply", which learns
		 * the thread the reply goes to. */
		uint32_t to = (uint32_t)varint_field(data, len,
						      BTX_TO_THREAD);
		uint32_t utid = tp_thread_get(ctx, machine, to);
		tp_slice_add_args(ctx, t.send_track, binder,
				  tp_s(ctx, "binder reply"),
				  dest_args(ctx, utid, to, false));
		t.send_slice = tp_slice_end(ctx, t.send_track, ts, 0, 0,
					    t.args);
	} else if (t.is_oneway) {
		t.send_slice = tp_slice_complete(
			ctx, t.send_track, ts, 0, binder,
			tp_s(ctx, "binder transaction async"), t.args);
	} else {
		t.send_slice = tp_slice_begin(ctx, t.send_track, ts, binder,
					      tp_s(ctx, "binder transaction"),
					      t.args);
	}
	txn_put(ctx->binder, &t);
}

static void received(struct tp_ctx *ctx, int64_t ts, uint32_t machine,
		     int64_t pid, const uint8_t *data, size_t len)
{
	tp_str binder = tp_s(ctx, "binder");
	int32_t id = (int32_t)varint_field(data, len, BTR_DEBUG_ID);
	struct txn *found = txn_find(ctx->binder, machine, id);
	int64_t recv;

	/* Of a transaction never sent, the kind is unknown: no slice. */
	if (!found)
		return;
	struct txn t = *found;
	txn_drop(ctx->binder, found);
	uint32_t utid = tp_thread_get(ctx, machine, pid);
	uint32_t track = tp_track_thread(ctx, utid);
	if (t.is_reply) {
		tp_slice_end(ctx, track, ts, 0, 0, -1);
		return;
	}
	if (t.is_oneway) {
		recv = tp_slice_complete(ctx, track, ts, 0, binder,
					 tp_s(ctx, "binder async rcv"), t.args);
	} else {
		tp_slice_add_args(ctx, t.send_track, binder,
				  tp_s(ctx, "binder transaction"),
				  dest_args(ctx, utid, pid, true));
		recv = tp_slice_begin(ctx, track, ts, binder,
				      tp_s(ctx, "binder reply"), -1);
	}
	if (t.send_slice >= 0 && recv >= 0)
		tp_flow_link(ctx, (uint32_t)t.send_slice, (uint32_t)recv);
}

static struct i2c_op *i2c_op(struct tp_binder *b, uint32_t utid)
{
	if (utid >= b->ni2c) {
		size_t n = b->ni2c ? b->ni2c : 16;
		while (n <= utid)
			n *= 2;
		b->i2c = vp_xrealloc(b->i2c, n * sizeof(*b->i2c));
		memset(b->i2c + b->ni2c, 0, (n - b->ni2c) * sizeof(*b->i2c));
		b->ni2c = n;
	}
	return &b->i2c[utid];
}

static tp_str i2c_name(struct tp_ctx *ctx, uint32_t adapter)
{
	char buf[32];

	snprintf(buf, sizeof(buf), "i2c-%u", adapter);
	return tp_s(ctx, buf);
}

/* A message of a transfer: the first opens its slice; later ones only
 * raise the count of messages the result must report. */
static void i2c_enter(struct tp_ctx *ctx, int64_t ts, uint32_t machine,
		      int64_t pid, uint32_t adapter, uint32_t msg_nr)
{
	if (adapter >= MAX_I2C_ADAPTERS)
		return;
	uint32_t utid = tp_thread_get(ctx, machine, pid);
	struct i2c_op *op = i2c_op(ctx->binder, utid);
	if (op->open) {
		if (msg_nr + 1 > op->nr_msgs)
			op->nr_msgs = msg_nr + 1;
		return;
	}
	tp_slice_begin(ctx, tp_track_thread(ctx, utid), ts, 0,
		       i2c_name(ctx, adapter), -1);
	op->open = true;
	op->adapter = adapter;
	op->nr_msgs = msg_nr + 1;
}

/* The result closes the transfer when it is of the same adapter and
 * counts all its messages; any other result is ignored. */
static void i2c_exit(struct tp_ctx *ctx, int64_t ts, uint32_t machine,
		     int64_t pid, uint32_t adapter, uint32_t nr_msgs)
{
	if (adapter >= MAX_I2C_ADAPTERS)
		return;
	uint32_t utid = tp_thread_get(ctx, machine, pid);
	struct i2c_op *op = i2c_op(ctx->binder, utid);
	if (!op->open || op->adapter != adapter || op->nr_msgs != nr_msgs)
		return;
	op->open = false;
	tp_slice_end(ctx, tp_track_thread(ctx, utid), ts, 0,
		     i2c_name(ctx, adapter), -1);
}

bool tp_binder_parse(struct tp_ctx *ctx, int64_t ts, uint32_t machine,
		     int64_t pid, uint32_t id, const uint8_t *data,
		     size_t len)
{
	switch (id) {
	case FE_BINDER_TRANSACTION:
		transaction(ctx, ts, machine, pid, data, len);
		return true;
	case FE_BINDER_TRANSACTION_RECEIVED:
		received(ctx, ts, machine, pid, data, len);
		return true;
	case FE_I2C_READ:
		i2c_enter(ctx, ts, machine, pid,
			  (uint32_t)varint_field(data, len,
						 I2C_READ_ADAPTER_NR),
			  (uint32_t)varint_field(data, len, I2C_READ_MSG_NR));
		return true;
	case FE_I2C_WRITE:
		i2c_enter(ctx, ts, machine, pid,
			  (uint32_t)varint_field(data, len,
						 I2C_WRITE_ADAPTER_NR),
			  (uint32_t)varint_field(data, len, I2C_WRITE_MSG_NR));
		return true;
	case FE_I2C_RESULT:
		i2c_exit(ctx, ts, machine, pid,
			 (uint32_t)varint_field(data, len,
						I2C_RESULT_ADAPTER_NR),
			 (uint32_t)varint_field(data, len, I2C_RESULT_NR_MSGS));
		return true;
	default:
		return false;
	}
}
