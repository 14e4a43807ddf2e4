/* predict_names.c: the words of a request whose input names are not those the trainer
 * serves, as the Python client says them (melissa_trainer/stream/serving_rendezvous.py
 * check_inputs): "arrays ['v'], the trainer serves inputs ['u'] (unknown: 'v'; missing:
 * 'u')", each list sorted (strcmp: UTF-8's code point order, Python's `sorted`). The
 * parenthesis names what to fix, as docs/how-to/serve-while-training.md promises; C said
 * only the two lists before (user trial 39). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "predict_names.h"

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
