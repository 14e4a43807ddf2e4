/* finite_notice.h: the warnings of NaN or Inf a simulation sends (finite_notice.c). Not
 * installed; after internal.h. */
#ifndef MT_FINITE_NOTICE_H
#define MT_FINITE_NOTICE_H

#include "internal.h"

/* A float field `f` of the open step was found holding NaN or Inf (mt_all_finite false):
 * on stderr, once per client, what the trainer does with it, in the Python client's words
 * (client/finite_check.py FiniteCheck.nonfinite). Non-float fields: nothing. mu held. */
void mt_nonfinite_field_notice(mt_client *c, const mt_field *f);

/* Before a prediction is asked: on stderr, once per client, the first float input of
 * `in` holding NaN or Inf, named, and what the trainer does with it (Python's
 * warn_nonfinite_inputs). Nothing is refused here: the trainer decides, by its
 * nonfinite policy. Once said, the inputs are not checked again. The client's thread. */
void mt_nonfinite_inputs_notice(mt_client *c, const mt_input *in, size_t n_in);

#endif
