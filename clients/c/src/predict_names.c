/* predict_names.c: a request's inputs against those the trainer serves
 * (mt_predict_check_inputs), and the words of inputs whose names are not those it
 * serves, as the Python client says them (melissa_trainer/stream/serving_rendezvous.py
 * check_inputs): "arrays ['v'], the trainer serves inputs ['u'] (unknown: 'v'; missing:
 * 'u')", each list sorted (strcmp: UTF-8's code point order, Python's `sorted`). The
 * parenthesis names what to fix, as docs/how-to/serve-while-training.md promises; C said
 * only the two lists before (user trial 39). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "predict_names.h"
#include "serve.h" /* (mt_shape_text) */

static int by_name(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static bool among(const char *name, const char *const *names, size_t n) {
    for (size_t i = 0; i < n; ++i)
        if (strcmp(name, names[i]) == 0) return true;
    return false;
}

/* Appends "'a', 'b'" (names[i] for which keep(i) holds) to buf at *at, truncating. */
static void append_names(char *buf, size_t size, size_t *at, const char *const *names,
                         size_t n, const char *const *other, size_t n_other, bool absent) {
    bool first = true;
    for (size_t i = 0; i < n && *at < size; ++i) {
        if (absent && among(names[i], other, n_other)) continue;
        int w = snprintf(buf + *at, size - *at, "%s'%s'", first ? "" : ", ", names[i]);
        *at += w > 0 ? (size_t)w : 0;
        first = false;
    }
}

static size_t count_absent(const char *const *names, size_t n, const char *const *other,
                           size_t n_other) {
    size_t k = 0;
    for (size_t i = 0; i < n; ++i) k += !among(names[i], other, n_other);
    return k;
}

void mt_input_names_text(const mt_input *in, size_t n_in, const mt_spec *served,
                         size_t n_served, char *buf, size_t size) {
    const char **given = calloc(n_in + 1, sizeof *given);
    const char **serves = calloc(n_served + 1, sizeof *serves);
    if (given == NULL || serves == NULL) {
        snprintf(buf, size, "arrays not the trainer's inputs");
        free(given);
        free(serves);
        return;
    }
    for (size_t i = 0; i < n_in; ++i) given[i] = in[i].name;
    for (size_t k = 0; k < n_served; ++k) serves[k] = served[k].name;
    qsort(given, n_in, sizeof *given, by_name);
    qsort(serves, n_served, sizeof *serves, by_name);
    size_t at = 0;
    at += (size_t)snprintf(buf, size, "arrays [");
    append_names(buf, size, &at, given, n_in, NULL, 0, false);
    if (at < size) at += (size_t)snprintf(buf + at, size - at, "], the trainer serves inputs [");
    append_names(buf, size, &at, serves, n_served, NULL, 0, false);
    if (at < size) at += (size_t)snprintf(buf + at, size - at, "] (");
    size_t unknown = count_absent(given, n_in, serves, n_served);
    if (unknown && at < size) {
        at += (size_t)snprintf(buf + at, size - at, "unknown: ");
        append_names(buf, size, &at, given, n_in, serves, n_served, true);
    }
    if (count_absent(serves, n_served, given, n_in) && at < size) {
        at += (size_t)snprintf(buf + at, size - at, "%smissing: ", unknown ? "; " : "");
        append_names(buf, size, &at, serves, n_served, given, n_in, true);
    }
    if (at < size) snprintf(buf + at, size - at, ")");
    free(given);
    free(serves);
}

/* The inputs against those the serve file declared, or the trainer described
 * (predict_describe.c): serving_rendezvous.check_inputs' rules and message. */
mt_status mt_predict_check_inputs(mt_client *c, const mt_input *in, size_t n_in) {
    bool same = n_in == c->n_serve_inputs;
    for (size_t i = 0; same && i < n_in; ++i) {
        bool found = false;
        for (size_t k = 0; k < c->n_serve_inputs && !found; ++k)
            found = strcmp(in[i].name, c->serve_inputs[k].name) == 0;
        same = found;
    }
    if (!same) {
        char text[1024];
        mt_input_names_text(in, n_in, c->serve_inputs, c->n_serve_inputs, text, sizeof text);
        return mt_fail(c, MT_EFIELD, "mt_predict: %s", text);
    }
    for (size_t i = 0; i < n_in; ++i) {
        const mt_spec *s = NULL;
        for (size_t k = 0; k < c->n_serve_inputs; ++k)
            if (strcmp(in[i].name, c->serve_inputs[k].name) == 0) s = &c->serve_inputs[k];
        bool shape = s->ndim == in[i].ndim;
        for (int d = 0; shape && d < s->ndim; ++d) shape = s->shape[d] == in[i].shape[d];
        if (s->dtype != in[i].dtype || !shape) {
            char got[200], want[200], cast[120] = "";
            mt_shape_text(in[i].ndim, in[i].shape, got, sizeof got);
            mt_shape_text(s->ndim, s->shape, want, sizeof want);
            if (s->dtype != in[i].dtype) /* (Python's hint, then the C/Fortran fix) */
                snprintf(cast, sizeof cast, " (cast it to %s: convert the data to %s, dtype %s)",
                         mt_dtype_str(s->dtype), mt_dtype_name(s->dtype),
                         mt_dtype_constant(s->dtype));
            /* a batch of requests (the declared shape under a leading dimension): one
             * request is one sample (serving_rendezvous._batch_hint's words) */
            char batch[160] = "";
            bool batched = in[i].ndim == s->ndim + 1;
            for (int d = 0; batched && d < s->ndim; ++d)
                batched = in[i].shape[d + 1] == s->shape[d];
            if (batched)
                snprintf(batch, sizeof batch,
                         " (a request is one sample, without a batch dimension: drop the "
                         "leading %llu, one request per sample)",
                         (unsigned long long)in[i].shape[0]);
            return mt_fail(c, s->dtype != in[i].dtype ? MT_EDTYPE : MT_ESHAPE,
                           "mt_predict: input '%s' is %s %s, declared %s %s%s%s", in[i].name,
                           mt_dtype_str(in[i].dtype), got, mt_dtype_str(s->dtype), want, cast,
                           batch);
        }
    }
    return MT_OK;
}
