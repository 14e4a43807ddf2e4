/* predict_names.h: a request's inputs against those the trainer serves, and the words of
 * inputs whose names are not those it serves. */
#ifndef MT_PREDICT_NAMES_H
#define MT_PREDICT_NAMES_H

#include "internal.h"

/* "arrays [...], the trainer serves inputs [...] (unknown: ...; missing: ...)" into buf
 * (truncated to `size`), the Python client's words (serving_rendezvous.check_inputs). */
void mt_input_names_text(const mt_input *in, size_t n_in, const mt_spec *served,
                         size_t n_served, char *buf, size_t size);

/* The inputs against those the serve file declared, or the trainer described
 * (c->serve_inputs, not NULL): MT_OK, or MT_EFIELD, MT_EDTYPE, MT_ESHAPE with the Python
 * client's words (mt_fail). */
mt_status mt_predict_check_inputs(mt_client *c, const mt_input *in, size_t n_in);

#endif
