/* client.c: create, configure, declare, start; the accessors. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "internal.h"

mt_status mt_client_create(mt_client **out) {
    if (out == NULL) return MT_EINVAL;
    *out = NULL;
    mt_client *c = calloc(1, sizeof *c);
    if (c == NULL) return MT_ENOMEM;
    c->rendezvous_timeout = 60.0;
    c->send_timeout = -1.0;
    c->close_timeout = MT_DEFAULT_CLOSE_TIMEOUT; /* (ClientTuning.close_timeout's) */
    c->failed_close_timeout = MT_DEFAULT_FAILED_CLOSE_TIMEOUT; /* (and failed_close_timeout's) */
    c->disconnected_timeout = 60.0;
    c->follow_timeout = 120.0; /* ClientTuning.follow_timeout's default */
    c->batch_bytes = 65536;
    c->batch_delay = 0.02;
    c->sndhwm = 1000;
    c->reuse = MT_REUSE_IMMEDIATE;
    c->ranks = 1;
    c->max_message_bytes = (uint64_t)1 << 30;
    c->last_send = -INFINITY;
    c->handshake_checked = -INFINITY; /* (the first step reads the monitors) */
    c->marks.messages = MT_MARK_MOST; /* (the first DATA sent alone is a mark) */
    *out = c;
    return MT_OK;
}

#define CHECK_SETUP(c)                                                                        \
    do {                                                                                      \
        if ((c) == NULL) return MT_EINVAL;                                                    \
        mt_clear_error(c);                                                                    \
        if ((c)->started)                                                                     \
            return mt_fail((c), MT_ESTATE, "%s: the client is started; configure it before " \
                                           "mt_client_start", __func__);                      \
    } while (0)

mt_status mt_set_simulation_id(mt_client *c, uint64_t simulation_id) {
    CHECK_SETUP(c);
    c->simulation_id = simulation_id;
    c->id_set = true;
    return MT_OK;
}

mt_status mt_set_endpoints(mt_client *c, const char *endpoints) {
    CHECK_SETUP(c);
    if (endpoints == NULL) return mt_fail(c, MT_EINVAL, "mt_set_endpoints: endpoints is NULL");
    const char *start = endpoints;
    for (;;) { /* each comma-separated item must look like an endpoint */
        const char *end = strchr(start, ',');
        size_t len = end ? (size_t)(end - start) : strlen(start);
        bool scheme = false;
        for (size_t i = 0; i + 3 <= len; ++i) scheme = scheme || strncmp(start + i, "://", 3) == 0;
        if (!scheme) return mt_endpoints_not_like(c, endpoints, MT_EINVAL, "");
        if (end == NULL) break;
        start = end + 1;
    }
    /* (its form, now: ZeroMQ's connect at start would say only "Invalid argument") */
    if (mt_check_endpoints(c, endpoints, MT_EINVAL, "") != MT_OK) return MT_EINVAL;
    char *copy = strdup(endpoints);
    if (copy == NULL) return mt_fail(c, MT_ENOMEM, "out of memory");
    free(c->endpoints_arg);
    c->endpoints_arg = copy;
    return MT_OK;
}

mt_status mt_set_rendezvous(mt_client *c, const char *directory, double timeout_s) {
    CHECK_SETUP(c);
    if (directory == NULL || !(timeout_s >= 0))
        return mt_fail(c, MT_EINVAL, "mt_set_rendezvous: a directory and a timeout >= 0 seconds "
                                     "are needed");
    char *copy = strdup(directory);
    if (copy == NULL) return mt_fail(c, MT_ENOMEM, "out of memory");
    free(c->rendezvous_dir);
    c->rendezvous_dir = copy;
    c->rendezvous_timeout = timeout_s;
    return MT_OK;
}

mt_status mt_set_parameter(mt_client *c, const char *name, double value) {
    CHECK_SETUP(c);
    if (name == NULL || !mt_utf8_valid(name, strlen(name)))
        return mt_fail(c, MT_EINVAL, "parameter names must be UTF-8 strings");
    if (!isfinite(value))
        return mt_fail(c, MT_EINVAL, "parameter '%s': %s is not finite", name,
                       isnan(value) ? "nan" : value > 0 ? "inf" : "-inf");
    c->params_set = true;
    for (size_t i = 0; i < c->n_params; ++i) { /* a dict: the same name keeps its place */
        if (strcmp(c->params[i].name, name) == 0) {
            c->params[i].value = value;
            return MT_OK;
        }
    }
    mt_param *grown = realloc(c->params, (c->n_params + 1) * sizeof *grown);
    if (grown == NULL) return mt_fail(c, MT_ENOMEM, "out of memory");
    c->params = grown;
    char *copy = strdup(name);
    if (copy == NULL) return mt_fail(c, MT_ENOMEM, "out of memory");
    c->params[c->n_params].name = copy;
    c->params[c->n_params].value = value;
    ++c->n_params;
    return MT_OK;
}

static mt_status set_timeout(mt_client *c, const char *name, double seconds, double *slot) {
    if (isnan(seconds)) return mt_fail(c, MT_EINVAL, "%s must be a number of seconds", name);
    /* +inf is "forever", as < 0: a deadline of now + inf made the waits' conversions
     * undefined (a send that failed at once, a close that reported a timeout) */
    *slot = seconds < 0 || isinf(seconds) ? -1.0 : seconds;
    return MT_OK;
}

mt_status mt_set_send_timeout(mt_client *c, double seconds) {
    CHECK_SETUP(c);
    return set_timeout(c, "send_timeout", seconds, &c->send_timeout);
}

mt_status mt_set_close_timeout(mt_client *c, double seconds) {
    CHECK_SETUP(c);
    return set_timeout(c, "close_timeout", seconds, &c->close_timeout);
}

mt_status mt_set_failed_close_timeout(mt_client *c, double seconds) {
    CHECK_SETUP(c);
    return set_timeout(c, "failed_close_timeout", seconds, &c->failed_close_timeout);
}

mt_status mt_set_disconnected_timeout(mt_client *c, double seconds) {
    CHECK_SETUP(c);
    return set_timeout(c, "disconnected_timeout", seconds, &c->disconnected_timeout);
}

mt_status mt_set_replay_bytes(mt_client *c, uint64_t bytes) {
    CHECK_SETUP(c);
    c->replay_set = true;
    c->replay_arg = bytes;
    return MT_OK;
}

mt_status mt_set_follow_timeout(mt_client *c, double seconds) {
    CHECK_SETUP(c);
    return set_timeout(c, "follow_timeout", seconds, &c->follow_timeout);
}

mt_status mt_set_batching(mt_client *c, size_t bytes, double delay_s) {
    CHECK_SETUP(c);
    if (!(delay_s > 0) || isinf(delay_s))
        return mt_fail(c, MT_EINVAL, "batch_delay must be > 0 seconds, not %g (batch_bytes=0 "
                                     "disables batching)", delay_s);
    if (bytes > c->max_message_bytes)
        return mt_fail(c, MT_EINVAL, "batch_bytes=%zu is more than max_message_bytes=%llu: lower "
                                     "it (0 disables batching)",
                       bytes, (unsigned long long)c->max_message_bytes);
    c->batch_bytes = bytes;
    c->batch_delay = delay_s;
    return MT_OK;
}

mt_status mt_set_sndhwm(mt_client *c, int messages) {
    CHECK_SETUP(c);
    if (messages < 0) return mt_fail(c, MT_EINVAL, "sndhwm must be >= 0, not %d", messages);
    c->sndhwm = messages;
    return MT_OK;
}

mt_status mt_set_reuse(mt_client *c, mt_reuse mode) {
    CHECK_SETUP(c);
    if (mode != MT_REUSE_IMMEDIATE && mode != MT_REUSE_NEXT_SEND)
        return mt_fail(c, MT_EINVAL, "reuse mode must be MT_REUSE_IMMEDIATE or "
                                     "MT_REUSE_NEXT_SEND, not %d", (int)mode);
    c->reuse = mode;
    return MT_OK;
}

mt_status mt_set_rank(mt_client *c, int rank, int size) {
    CHECK_SETUP(c);
    if (size < 1 || size > MT_MAX_CLIENT_RANKS || rank < 0 || rank >= size)
        return mt_fail(c, MT_EINVAL, "rank %d of %d: need 0 <= rank < size <= %d", rank, size,
                       MT_MAX_CLIENT_RANKS);
    c->rank = rank;
    c->ranks = size;
    return MT_OK;
}

mt_status mt_set_max_message_bytes(mt_client *c, uint64_t bytes) {
    CHECK_SETUP(c);
    c->max_message_bytes = bytes;
    return MT_OK;
}

mt_status mt_set_curve_server_key(mt_client *c, const char *key) {
    CHECK_SETUP(c);
    char *copy = NULL, fault[320];
    if (key != NULL && mt_z85_fault(key, fault, sizeof fault)) {
        /* (now, not at the connect: libzmq would say only "Invalid argument"; the Python
         * client's words, server_key.py check_server_key, with NULL and zmq_curve_keypair
         * for its None and zmq.curve_keypair()[0]) */
        char *shown = mt_py_repr(key);
        if (shown == NULL) return mt_fail(c, MT_ENOMEM, "out of memory");
        mt_status st = mt_fail(c, MT_EINVAL, "curve_server_key=%s must be %s: the trainer's "
                                             "CURVE public key in Z85, as its rendezvous files "
                                             "publish it (curve_public_key in rank_N.json) or "
                                             "zmq_curve_keypair() gives it; or NULL for "
                                             "receivers without CURVE", shown, fault);
        free(shown);
        return st;
    }
    if (key != NULL && (copy = strdup(key)) == NULL) return mt_fail(c, MT_ENOMEM, "out of memory");
    free(c->curve_key_arg);
    c->curve_key_arg = copy;
    return MT_OK;
}

static mt_field *find_field(const mt_client *c, const char *name) {
    for (size_t i = 0; i < c->n_fields; ++i)
        if (strcmp(c->fields[i].name, name) == 0) return &c->fields[i];
    return NULL;
}

mt_status mt_declare_field(mt_client *c, const char *name, mt_dtype dtype, int ndim,
                           const uint64_t *shape) {
    CHECK_SETUP(c);
    size_t len = name == NULL ? 0 : strlen(name);
    if (len < 1 || len > MT_MAX_NAME_BYTES || !mt_utf8_valid(name, len))
        return mt_fail(c, MT_EINVAL, "field name '%s' must be a string of 1 to %d UTF-8 bytes",
                       name == NULL ? "(null)" : name, MT_MAX_NAME_BYTES);
    if (strcmp(name, "simulation_id") == 0 || strcmp(name, "time_step") == 0 ||
        strcmp(name, "parameters") == 0)
        return mt_fail(c, MT_EINVAL, "field name '%s' is reserved (['parameters', "
                                     "'simulation_id', 'time_step'])", name);
    if (find_field(c, name) != NULL)
        return mt_fail(c, MT_EFIELD, "field '%s' is declared twice", name);
    if (mt_itemsize(dtype) == 0)
        return mt_fail(c, MT_EINVAL, "field '%s': dtype code %d cannot be streamed (codes 1 to "
                                     "12, MT_FLOAT32 ... MT_BOOL)", name, (int)dtype);
    if (ndim < 0 || ndim > MT_MAX_NDIM || (ndim > 0 && shape == NULL))
        return mt_fail(c, MT_EINVAL, "field '%s': ndim %d, must be 0 to %d (with a shape)", name,
                       ndim, MT_MAX_NDIM);
    uint64_t size = 1;
    for (int d = 0; d < ndim; ++d) {
        if (shape[d] < 1)
            return mt_fail(c, MT_EINVAL, "field '%s': dimension %d is 0: shape must have at "
                                         "most %d positive dimensions", name, d, MT_MAX_NDIM);
        if (size > UINT64_MAX / shape[d])
            return mt_fail(c, MT_EINVAL, "field '%s': the shape's element count overflows 64 "
                                         "bits", name);
        size *= shape[d];
    }
    mt_field *grown = realloc(c->fields, (c->n_fields + 1) * sizeof *grown);
    if (grown == NULL) return mt_fail(c, MT_ENOMEM, "out of memory");
    c->fields = grown;
    mt_field *f = &c->fields[c->n_fields];
    memset(f, 0, sizeof *f);
    f->name = strdup(name);
    if (f->name == NULL) return mt_fail(c, MT_ENOMEM, "out of memory");
    f->name_len = len;
    f->dtype = dtype;
    f->itemsize = mt_itemsize(dtype);
    f->ndim = ndim;
    for (int d = 0; d < ndim; ++d) f->shape[d] = shape[d];
    f->size = size;
    ++c->n_fields;
    return MT_OK;
}

static mt_status part_field(mt_client *c, const char *name, mt_field **out) {
    *out = name == NULL ? NULL : find_field(c, name);
    if (*out == NULL)
        return mt_fail(c, MT_EFIELD, "field '%s' is not declared (mt_declare_field first)",
                       name == NULL ? "(null)" : name);
    return MT_OK;
}

mt_status mt_declare_part(mt_client *c, const char *name, uint64_t offset, uint64_t count) {
    CHECK_SETUP(c);
    mt_field *f;
    mt_status st = part_field(c, name, &f);
    if (st != MT_OK) return st;
    if (offset > f->size || count > f->size - offset)
        return mt_fail(c, MT_EINVAL, "field '%s': part [%llu, %llu + %llu) is outside the field's "
                                     "%llu elements", name, (unsigned long long)offset,
                       (unsigned long long)offset, (unsigned long long)count,
                       (unsigned long long)f->size);
    f->part = PART_RANGE;
    f->offset = offset;
    f->count = count;
    f->offset_known = true;
    return MT_OK;
}

mt_status mt_declare_part_count(mt_client *c, const char *name, uint64_t count) {
    CHECK_SETUP(c);
    mt_field *f;
    mt_status st = part_field(c, name, &f);
    if (st != MT_OK) return st;
    if (count > f->size)
        return mt_fail(c, MT_EINVAL, "field '%s': a part of %llu elements, more than the field's "
                                     "%llu", name, (unsigned long long)count,
                       (unsigned long long)f->size);
    f->part = PART_COUNT;
    f->count = count;
    f->offset_known = false;
    return MT_OK;
}

/* -- for melissa_trainer_mpi.h ------------------------------------------------------- */

size_t mt_field_count(const mt_client *c) { return c == NULL ? 0 : c->n_fields; }

const char *mt_field_name(const mt_client *c, size_t index) {
    return c == NULL || index >= c->n_fields ? NULL : c->fields[index].name;
}

uint64_t mt_field_size(const mt_client *c, size_t index) {
    return c == NULL || index >= c->n_fields ? 0 : c->fields[index].size;
}

int mt_field_part_count(const mt_client *c, size_t index, uint64_t *count) {
    if (c == NULL || index >= c->n_fields || count == NULL) return -1;
    const mt_field *f = &c->fields[index];
    *count = f->count;
    return f->part == PART_COUNT ? 1 : f->part == PART_RANGE ? 2 : 0;
}

mt_status mt_set_part_offset(mt_client *c, size_t index, uint64_t offset) {
    CHECK_SETUP(c);
    if (index >= c->n_fields) return mt_fail(c, MT_EINVAL, "no field of index %zu", index);
    mt_field *f = &c->fields[index];
    if (offset > f->size || f->count > f->size - offset)
        return mt_fail(c, MT_EINVAL, "field '%s': part [%llu, %llu) is outside the field's %llu "
                                     "elements", f->name, (unsigned long long)offset,
                       (unsigned long long)(offset + f->count), (unsigned long long)f->size);
    f->offset = offset;
    f->offset_known = true;
    return MT_OK;
}

/* -- accessors ----------------------------------------------------------------------- */

uint64_t mt_client_simulation_id(const mt_client *c) {
    return c == NULL ? 0 : c->simulation_id;
}

int mt_client_receivers(const mt_client *c) {
    return c == NULL || !c->started ? 0 : (int)c->n_endpoints;
}

mt_status mt_client_parameter(const mt_client *c, const char *name, double *value) {
    if (c == NULL || name == NULL || value == NULL) return MT_EINVAL;
    mt_client *w = (mt_client *)c; /* the error buffer is the client's own */
    for (size_t i = 0; i < c->n_params; ++i) {
        if (strcmp(c->params[i].name, name) == 0) {
            *value = c->params[i].value;
            return MT_OK;
        }
    }
    if (c->n_params == 0) /* started by hand: name the fix, as the Python client does */
        return mt_fail(w, MT_EINVAL,
                       "no parameter '%s': this simulation has none: no "
                       "MELISSA_TRAINER_PARAMETERS in its environment (a simulation started by "
                       "hand?); start it through the trainer's launcher, or give them: "
                       "MELISSA_TRAINER_PARAMETERS='{\"%s\": 0.5}' or "
                       "mt_set_parameter(c, \"%s\", 0.5) before mt_client_start",
                       name, name, name);
    mt_buf known = {0};
    for (size_t i = 0; i < c->n_params; ++i) {
        if (i) mt_buf_puts(&known, ", ");
        mt_buf_puts(&known, "'");
        mt_buf_puts(&known, c->params[i].name);
        mt_buf_puts(&known, "'");
    }
    mt_buf_put(&known, "", 1);
    mt_fail(w, MT_EINVAL, "no parameter '%s'; the known parameters are [%s]", name,
            known.oom ? "..." : known.data);
    free(known.data);
    return MT_EINVAL;
}
