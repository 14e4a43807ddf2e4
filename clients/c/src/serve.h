/* serve.h: the serving endpoint lookup shared by serve.c and predict.c (not installed). */
#ifndef MT_SERVE_H
#define MT_SERVE_H

#include "internal.h"

/* A rank's serving entry: its endpoint, CURVE server key (NULL: none) and the inputs it
 * takes (NULL, 0: unknown, for endpoints given without a serve file). */
typedef struct mt_serve_entry {
    char *endpoint;
    char *curve_key;
    mt_spec *inputs;
    size_t n_inputs;
} mt_serve_entry;

/* The entry of the rank serving c's simulation: from mt_set_serve_endpoints, else
 * $MELISSA_TRAINER_SERVE_ENDPOINTS, else the rendezvous directory, polled until
 * `deadline` (monotonic seconds; `timeout` for the message). MT_ETIMEDOUT when none was
 * published in time, MT_EENV when nothing says where to look. */
mt_status mt_serve_resolve(mt_client *c, double deadline, double timeout, mt_serve_entry *out);
void mt_serve_entry_free(mt_serve_entry *e);
void mt_specs_free(mt_spec *specs, size_t n);

#endif
