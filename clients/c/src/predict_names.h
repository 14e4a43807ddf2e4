/* predict_names.h: the words of inputs whose names are not those the trainer serves. */
#ifndef MT_PREDICT_NAMES_H
#define MT_PREDICT_NAMES_H

#include "internal.h"

/* "arrays [...], the trainer serves inputs [...] (unknown: ...; missing: ...)" into buf
 * (truncated to `size`), the Python client's words (serving_rendezvous.check_inputs). */
void mt_input_names_text(const mt_input *in, size_t n_in, const mt_spec *served,
                         size_t n_served, char *buf, size_t size);

#endif
