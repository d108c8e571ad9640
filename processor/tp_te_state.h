/*
 * tp_te_state.h - the track_event module's state (ctx->te): one part per
 * file that keeps any, each part's fields private to its file.
 */
#ifndef VP_TP_TE_STATE_H
#define VP_TP_TE_STATE_H

struct tp_te_state {
	struct tp_te_tok *tok;           /* tp_te_tokenize.c */
	struct tp_te_desc_state *desc;   /* tp_te_desc.c */
	struct tp_te_intern *intern;     /* tp_te_intern.c */
	struct tp_te_args *args;         /* tp_te_args.c */
	struct tp_te_slices *slices;     /* tp_te_slices.c */
	struct tp_te_legacy *legacy;     /* tp_te_legacy.c */
};

#endif
