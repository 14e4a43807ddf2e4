/* declaration.c: what melissa_trainer_mpi.h (and the Fortran mt_start_mpi) compare
 * across the ranks of one simulation at start: a hash of each rank's field declaration
 * (names, order, dtypes, global shapes; mt_fields_mark), and, where they differ, the
 * error each rank gives, naming its own declaration as the Python client's first send
 * does (melissa_trainer/client/send_arrays.py place_parts and describe_fields, word for
 * word but for the fix it names: mt_declare_field, not Client). Before, ranks declaring
 * different fields (parts of the right sizes) both streamed; the receiver kept the first
 * HELLO to arrive and dropped the other ranks' data, and which rank won was a race. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* FNV-1a, 64 bits: one pass, no allocation (a rank out of memory still hashes alike). */
static uint64_t fnv(uint64_t h, const void *p, size_t n) {
    const unsigned char *s = (const unsigned char *)p;
    for (size_t i = 0; i < n; ++i) h = (h ^ s[i]) * 0x100000001b3ULL;
    return h;
}

int64_t mt_fields_mark(const mt_client *c) {
    uint64_t h = 0xcbf29ce484222325ULL;
    if (c == NULL) return 0;
    uint64_t n = c->n_fields;
    h = fnv(h, &n, sizeof n);
    for (size_t i = 0; i < c->n_fields; ++i) {
        const mt_field *f = &c->fields[i];
        /* (the name with its NUL: "ab"+"c" and "a"+"bc" differ) */
        h = fnv(h, f->name, f->name_len + 1);
        int32_t words[2] = {(int32_t)f->dtype, (int32_t)f->ndim};
        h = fnv(h, words, sizeof words);
        h = fnv(h, f->shape, (size_t)f->ndim * sizeof f->shape[0]);
    }
    /* 62 bits: its negation fits an int64, so that one MPI_MAX reduction of {h, -h}
     * gives the largest and the smallest of the ranks' hashes */
    return (int64_t)(h & ((UINT64_C(1) << 62) - 1));
}

/* "'u' float32 (4, 2), 'p' float64 ()": describe_fields's words (a tuple's repr). */
static void describe(const mt_client *c, mt_buf *b) {
    for (size_t i = 0; i < c->n_fields; ++i) {
        const mt_field *f = &c->fields[i];
        char *name = mt_py_repr(f->name);
        mt_buf_printf(b, "%s%s %s (", i ? ", " : "", name ? name : f->name,
                      mt_dtype_name(f->dtype));
        free(name);
        for (int d = 0; d < f->ndim; ++d)
            mt_buf_printf(b, "%s%llu", d ? ", " : "", (unsigned long long)f->shape[d]);
        mt_buf_puts(b, f->ndim == 1 ? ",)" : ")");
    }
    mt_buf_put(b, "", 1); /* (a string even with no field) */
}

mt_status mt_fields_differ(mt_client *c, int rank, int ranks) {
    if (c == NULL) return MT_EINVAL;
    mt_buf b = {0};
    describe(c, &b);
    mt_status st = mt_fail(c, MT_EMPI,
                           "the ranks of the communicator declare different fields: this rank "
                           "(%d of %d) declares %s. Declare the same fields (mt_declare_field: "
                           "names, order, global shapes, dtypes) on every rank: each rank sends "
                           "its part of the same global fields (each rank's error names its own)",
                           rank, ranks, b.oom || b.data == NULL ? "(out of memory)" : b.data);
    free(b.data);
    return st;
}
