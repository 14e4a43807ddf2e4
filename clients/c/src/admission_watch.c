/* admission_watch.c: whether the trainer took this simulation, learnt while it runs
 * (docs/protocol.md, section 17a; as melissa_trainer/client/admission_watch.py, whose
 * rules and words these are).
 *
 * A receiver that refuses a simulation's HELLO drops everything it sends; the close asks
 * (admission.c, receipt.c), but a solver told only there computed all its steps for
 * nothing. So, once its HELLO has left, a client whose close would ask (its endpoints
 * from a rendezvous, not launched: mt_admission_wanted) and whose receivers all have a
 * follow socket asks each one, in rank order, the ADMISSION_QUERY, again on "unknown"
 * with growing pauses (10 ms to 0.5 s), for at most WATCH_TIMEOUT seconds.
 *
 * Without a thread: mt_send, when it opens a step, calls mt_admission_watch_poll once the watch's
 * next moment is due (one comparison of a clock it reads anyway, else), which does one
 * non-blocking step: dial, send the query (ZMQ_DONTWAIT), or read a reply that came
 * (zmq_poll with a zero timeout). Its DEALER is of the client's context, used by the
 * client's thread only (the header's thread-safety promise holds). A trusted refusal
 * keeps the close's sentence (mt_admission_refused) in c->watch.refused, writes it to
 * stderr once, and mt_send returns MT_ESIMREFUSED with it from then on, sending nothing
 * (the step it would have opened stays closed: the close still sends BYE and asks), and
 * so does every mt_predict, asking nothing: the model serves the study, which this
 * simulation's declaration is not (an answer would be of other data), and MT_EREFUSED /
 * MT_ETIMEDOUT are what a solver falls back from, running on, its data dropped, unaware
 * (client/admission_watch.py says the same for Python).
 *
 * A refusal is trusted only when its reason is one this client's HELLO would get
 * (mt_admission_describes): the receiver answers from the refusals it recorded, so a
 * simulation run again with the same id, right this time, whose question overtakes its
 * HELLO, would read its earlier attempt's refusal. Such an answer is taken as unknown.
 * Nothing changes where no decided answer comes (a receiver busy for WATCH_TIMEOUT, a
 * silent one, no follow socket, endpoints given): the close asks as before. A client that
 * follows a restarted trainer (follow.c) releases the watch with its old transport and,
 * its HELLO sent to the new receivers, starts it again: the run followed is asked as the
 * first was (a study of other fields resumed in the same place is told at an mt_send),
 * as in Python (AdmissionWatch.followed). */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "internal.h"

#define KIND_ADMISSION_QUERY 11
#define QUERY_BYTES 24u
#define REPLY_CAP (36u + 4096u + 64u) /* admission.c's head, reason, room to see it cut */
#define WATCH_TIMEOUT 60.0            /* seconds (client/admission_watch.py WATCH_TIMEOUT) */
#define FIRST_PAUSE 0.01
#define LAST_PAUSE 0.5
#define REPLY_POLL_S 0.002 /* between two looks for the reply to a query sent */
#define REASK_S 1.0        /* a query unanswered that long is asked again (a new id) */
#define FIELDS_HEAD "HELLO declares other fields than the study's: "
/* a refusal for the parameters' order (no names given: the first HELLO's is the study's) */
#define ORDER_HEAD "HELLO lists its parameters in the order "

void mt_admission_watch_start(mt_client *c) {
    mt_watch *w = &c->watch;
    bool askable = mt_admission_wanted(c) && c->follows != NULL && c->n_endpoints > 0;
    for (size_t r = 0; askable && r < c->n_endpoints; ++r) askable = c->follows[r] != NULL;
    if (!askable) return;
    double now = mt_now();
    w->active = true, w->at = 0, w->request_id = 0;
    w->due = now, w->pause = FIRST_PAUSE, w->deadline = now + WATCH_TIMEOUT;
}

/* The watch ends (decided, or not: the close asks); its socket closed. */
void mt_admission_watch_release(mt_client *c) {
    if (c->watch.socket != NULL) zmq_close(c->watch.socket);
    c->watch.socket = NULL;
    c->watch.active = false;
}

/* Python's repr of a str (the receiver's words use it), for the names this client
 * declares: quotes and backslashes escaped as repr does; other characters as they are. */
static void put_repr(mt_buf *b, const char *s) {
    char q = strchr(s, '\'') != NULL && strchr(s, '"') == NULL ? '"' : '\'';
    mt_buf_put(b, &q, 1);
    for (; *s; ++s) {
        if (*s == '\\' || *s == q) mt_buf_put(b, "\\", 1);
        mt_buf_put(b, s, 1);
    }
    mt_buf_put(b, &q, 1);
}

static int by_name(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* "['a', 'b']" of `names` (n of them). */
static void put_list(mt_buf *b, const char *const *names, size_t n) {
    mt_buf_puts(b, "[");
    for (size_t i = 0; i < n; ++i) {
        if (i) mt_buf_puts(b, ", ");
        put_repr(b, names[i]);
    }
    mt_buf_puts(b, "]");
}

/* (a cut buffer, b.len = named, keeps its old bytes after the cut: compared by b.len) */
static bool starts(const char *s, const char *head) { return strncmp(s, head, strlen(head)) == 0; }

/* Whether one part of a fields difference (stream/schema.py schema_difference), `part`
 * (len bytes), holds for the fields this client declares (admission_watch.py _holds). */
static bool holds(const mt_client *c, const char *part, size_t len) {
    mt_buf b = {0};
    bool yes = false, decided = false;
    if (len >= 20 && strncmp(part, "fields in the order ", 20) == 0) {
        mt_buf_puts(&b, "fields in the order ");
        const char **names = malloc((c->n_fields + 1) * sizeof *names);
        for (size_t i = 0; names != NULL && i < c->n_fields; ++i) names[i] = c->fields[i].name;
        if (names != NULL) put_list(&b, names, c->n_fields);
        free(names);
        mt_buf_puts(&b, ", the study's are ");
        yes = names != NULL && !b.oom && len >= b.len && memcmp(part, b.data, b.len) == 0;
        free(b.data);
        return yes;
    }
    for (size_t i = 0; i < c->n_fields && !decided && !b.oom; ++i) {
        const mt_field *f = &c->fields[i];
        b.len = 0;
        mt_buf_puts(&b, "field ");
        put_repr(&b, f->name);
        size_t named = b.len;
        mt_buf_puts(&b, " is not one of the study's");
        if (!b.oom && len == b.len && memcmp(part, b.data, len) == 0) decided = yes = true;
        b.len = named;
        mt_buf_printf(&b, " is %s (", mt_dtype_name(f->dtype));
        for (int d = 0; d < f->ndim; ++d)
            mt_buf_printf(&b, "%s%llu", d ? ", " : "", (unsigned long long)f->shape[d]);
        mt_buf_printf(&b, "%s where the study's is ", f->ndim == 1 ? ",)" : ")");
        if (!decided && !b.oom && len >= b.len && memcmp(part, b.data, b.len) == 0)
            decided = yes = true;
        b.len = named;
        mt_buf_puts(&b, " is missing");
        if (!decided && !b.oom && len == b.len && memcmp(part, b.data, len) == 0) decided = true;
    }
    free(b.data);
    if (decided) return yes;
    return len >= 17 && strncmp(part, "field ", 6) == 0 &&
           memcmp(part + len - 11, " is missing", 11) == 0;
}

/* Whether `reason` begins with `head`, the client's parameter names (sorted as Python's
 * sorted(), by code points, or as the HELLO lists them), then `tail`. */
static bool names_lead(const mt_client *c, const char *reason, const char *head,
                       const char *tail, bool sorted) {
    const char **names = malloc((c->n_params + 1) * sizeof *names);
    if (names == NULL) return false;
    for (size_t i = 0; i < c->n_params; ++i) names[i] = c->params[i].name;
    if (sorted) qsort(names, c->n_params, sizeof *names, by_name);
    mt_buf b = {0};
    mt_buf_puts(&b, head);
    put_list(&b, names, c->n_params);
    mt_buf_puts(&b, tail);
    bool yes = !b.oom && strlen(reason) >= b.len && memcmp(reason, b.data, b.len) == 0;
    free(b.data), free(names);
    return yes;
}

bool mt_admission_describes(const mt_client *c, const char *reason) {
    if (starts(reason, "HELLO carries no parameters")) return c->n_params == 0;
    if (starts(reason, "HELLO carries parameters "))
        return names_lead(c, reason, "HELLO carries parameters ", ", the study's are ", true);
    if (starts(reason, ORDER_HEAD)) /* (schema.py parameters_order_difference: as sent) */
        return names_lead(c, reason, ORDER_HEAD, ", the study's first ", false);
    if (!starts(reason, FIELDS_HEAD)) return false;
    const char *part = reason + strlen(FIELDS_HEAD);
    for (;;) {
        const char *end = strstr(part, "; ");
        size_t len = end != NULL ? (size_t)(end - part) : strlen(part);
        if (!holds(c, part, len)) return false;
        if (end == NULL) return true;
        part = end + 2;
    }
}

/* A refusal trusted: kept, said on stderr once, returned (and by every later mt_send). */
static mt_status refused(mt_client *c, const char *reason) {
    size_t r = c->watch.at;
    mt_admission_refused(c, r, c->endpoints[r], reason);
    mt_buf b = {0};
    mt_buf_printf(&b, "%s. Told while it ran: every mt_send and mt_predict from now on returns "
                      "MT_ESIMREFUSED, and sends nothing", mt_client_error(c));
    mt_admission_watch_release(c);
    if (b.oom) return MT_ESIMREFUSED; /* (the close's sentence, as mt_client_error) */
    c->watch.refused = b.data;
    fprintf(stderr, "melissa_trainer: mt_send: %s\n", b.data);
    return mt_fail(c, MT_ESIMREFUSED, "%s", b.data);
}

/* Asked again later (unknown, a refusal not trusted, not connected yet). */
static void later(mt_watch *w, double now) {
    w->request_id = 0;
    w->due = now + w->pause;
    w->pause = w->pause * 2 < LAST_PAUSE ? w->pause * 2 : LAST_PAUSE;
}

mt_status mt_admission_watch_poll(mt_client *c, double now) {
    mt_watch *w = &c->watch;
    if (now >= w->deadline) { /* (undecided: the close asks) */
        mt_admission_watch_release(c);
        return MT_OK;
    }
    if (w->socket == NULL) {
        w->socket = mt_follow_dial(c->zctx, c->follows[w->at],
                                   c->curve_keys != NULL ? c->curve_keys[w->at] : NULL, NULL,
                                   NULL, c->disconnected_timeout);
        if (w->socket == NULL) { /* (ZeroMQ failing: not the solver's to pay for) */
            mt_admission_watch_release(c);
            return MT_OK;
        }
    }
    if (w->request_id == 0 || now - w->asked >= REASK_S) {
        uint8_t query[QUERY_BYTES];
        uint64_t id = ++w->next_id;
        mt_put_prefix(query, KIND_ADMISSION_QUERY, 0, c->simulation_id);
        mt_put_u64(query + 16, id);
        if (zmq_send(w->socket, query, sizeof query, ZMQ_DONTWAIT) < 0) {
            later(w, now); /* (not connected yet) */
            return MT_OK;
        }
        w->request_id = id, w->asked = now, w->due = now + REPLY_POLL_S;
        return MT_OK;
    }
    uint8_t buf[REPLY_CAP];
    for (;;) {
        zmq_pollitem_t item = {w->socket, 0, ZMQ_POLLIN, 0};
        if (zmq_poll(&item, 1, 0) <= 0) break;
        size_t len = 0;
        int frames = 0;
        if (mt_follow_receive(w->socket, buf, sizeof buf, &len, &frames) != 0) break;
        mt_admission a;
        if (frames != 1 || mt_admission_parse(buf, len, c->simulation_id, w->request_id,
                                              (uint32_t)w->at, (uint32_t)c->n_endpoints,
                                              &a) != NULL)
            continue; /* (malformed, or a reply to an earlier query: ignored) */
        if (a.status == MT_ADMISSION_ACCEPTED) {
            zmq_close(w->socket);
            w->socket = NULL, w->request_id = 0, w->pause = FIRST_PAUSE, w->due = now;
            if (++w->at == c->n_endpoints) mt_admission_watch_release(c); /* (every one took it) */
            return MT_OK;
        }
        if (a.status == MT_ADMISSION_REFUSED) {
            char reason[4097];
            snprintf(reason, sizeof reason, "%.*s", (int)a.reason_len, a.reason);
            if (mt_admission_describes(c, reason)) return refused(c, reason);
        }
        later(w, now); /* (unknown, or a refusal this HELLO would not get) */
        return MT_OK;
    }
    w->due = now + REPLY_POLL_S;
    return MT_OK;
}
