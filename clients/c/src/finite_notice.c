/* finite_notice.c: a simulation that sends NaN or Inf is told once, on its side, what the
 * trainer does with it, as the Python client logs it (client/finite_check.py): a field
 * goes without FLAG_FINITE and the trainer's nonfinite policy decides (by default the
 * sample is dropped); a prediction's input is sent as it is and the trainer's policy
 * decides (by default the request is refused). Before, the C client said nothing: a
 * diverged solver learnt of it only from the trainer's log, or from MT_EREFUSED. On
 * stderr, as the C client's other notices (send_notice.c). */
#define _POSIX_C_SOURCE 200809L
#include "finite_notice.h"

#include <stdio.h>

#include "serve.h"

static bool is_float(mt_dtype dtype) {
    return dtype == MT_FLOAT32 || dtype == MT_FLOAT64 || dtype == MT_FLOAT16;
}

void mt_nonfinite_field_notice(mt_client *c, const mt_field *f) {
    if (c->said_nonfinite_field || !is_float(f->dtype)) return;
    c->said_nonfinite_field = true;
    fprintf(stderr,
            "melissa_trainer: simulation %llu rank %d: field '%s' of time step %llu holds NaN "
            "or Inf; it is sent without FLAG_FINITE and the trainer applies its nonfinite "
            "policy to it (by default the sample is dropped). Later non-finite fields of this "
            "client are not logged.\n",
            (unsigned long long)c->simulation_id, c->rank, f->name,
            (unsigned long long)c->step);
}

void mt_nonfinite_inputs_notice(mt_client *c, const mt_input *in, size_t n_in) {
    if (c->said_nonfinite_input) return;
    for (size_t i = 0; i < n_in; ++i) {
        const mt_input *a = &in[i];
        if (!is_float(a->dtype) || mt_all_finite(a->dtype, a->data, mt_elements(a->ndim, a->shape)))
            continue;
        c->said_nonfinite_input = true;
        fprintf(stderr,
                "melissa_trainer: simulation %llu: mt_predict() input '%s' holds NaN or Inf; "
                "it is sent as it is and the trainer applies its nonfinite policy to it (by "
                "default the request is refused: MT_EREFUSED, MT_REFUSAL_BAD_REQUEST). Later "
                "non-finite inputs of this client are not logged.\n",
                (unsigned long long)c->simulation_id, a->name);
        return;
    }
}
