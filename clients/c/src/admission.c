/* admission.c: whether the trainer took this simulation, asked at mt_client_close
 * (docs/protocol.md, section 17a; melissa_trainer/client/admission.py, whose rules and
 * messages these are).
 *
 * PUSH/PULL acknowledges nothing: a receiver that refuses a simulation's HELLO (fields of
 * another shape than the study's, parameters missing) drops all it sends and logs why,
 * and the solver would exit 0 as if trained on. So a client whose endpoints came from a
 * rendezvous directory, and that the launcher did not start (no MELISSA_TRAINER_ATTEMPT:
 * a launched simulation's refusal is the study's record), asks each receiver's follow
 * socket, once its BYE was delivered, an ADMISSION_QUERY; a refusal is MT_ESIMREFUSED
 * with the receiver's reason. "Unknown" (its HELLO not processed yet) is asked again,
 * with growing pauses, for up to ADMISSION_TIMEOUT seconds. Nothing is decided without an
 * answer: the rendezvous rewritten or marked stopped since, another run's endpoints, a
 * receiver without a follow socket (an older trainer): nothing is asked; a malformed
 * reply is ignored; no decided answer in time: a warning on stderr, MT_OK as before.
 * A trainer whose receivers answer RECEIPT_QUERY is asked that instead (receipt.c: it
 * carries the admission, and whether the BYE was ingested); this question is for older
 * ones. The follow socket's DEALER and reader are shared with receipt.c. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

#include "internal.h"

#define KIND_ADMISSION_QUERY 11
#define KIND_ADMISSION 12
#define QUERY_BYTES 24u         /* the prefix, a u64 request id */
#define ADMISSION_HEAD 36u      /* the prefix, request id, rank, world, status, 0, length */
#define MAX_REASON_BYTES 4096u
#define ADMISSION_TIMEOUT 10.0 /* seconds, for every receiver together (as Python's) */
#define ENV_ATTEMPT "MELISSA_TRAINER_ATTEMPT"

const char *mt_admission_parse(const uint8_t *f, size_t len, uint64_t simulation_id,
                               uint64_t request_id, uint32_t rank, uint32_t world,
                               mt_admission *out) {
    /* Strict on every field read (the layout of section 17a); tolerant of what a later
     * revision of 17a could add without moving them: flags, the reserved byte, bytes after
     * the reason (the Python decoder rejects these three; another helper may extend the
     * reply: adapt here). */
    if (len < ADMISSION_HEAD) return "truncated";
    if (memcmp(f, "MTRN", 4) != 0) return "bad_magic";
    if (f[4] != MT_PROTOCOL_VERSION) return "bad_version";
    if (f[5] != KIND_ADMISSION) return "bad_kind";
    if (mt_get_u64(f + 8) != simulation_id || mt_get_u64(f + 16) != request_id)
        return "bad_request_id"; /* (a reply to another query) */
    if (mt_get_u32(f + 24) != rank || mt_get_u32(f + 28) != world) return "bad_rank";
    int status = f[32];
    size_t size = (size_t)f[34] | (size_t)f[35] << 8;
    if (status > MT_ADMISSION_REFUSED) return "bad_request";
    if (size > MAX_REASON_BYTES || (status == MT_ADMISSION_REFUSED) != (size > 0))
        return "bad_size";
    if (len < ADMISSION_HEAD + size) return "bad_size";
    if (!mt_utf8_valid((const char *)f + ADMISSION_HEAD, size)) return "bad_request";
    out->status = status;
    out->reason = (const char *)f + ADMISSION_HEAD;
    out->reason_len = size;
    return NULL;
}

static void nap(double seconds) {
    if (seconds <= 0) return;
    struct timespec ts = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
    nanosleep(&ts, NULL);
}

/* Malformed replies ignored (for the warning). */
typedef struct {
    unsigned count;
    const char *last;
} ignored;

int mt_follow_receive(void *s, uint8_t *buf, size_t cap, size_t *len, int *frames) {
    *frames = 0;
    int more = 1;
    while (more) {
        int n;
        while ((n = zmq_recv(s, *frames == 0 ? buf : NULL, *frames == 0 ? cap : 0, 0)) < 0 &&
               errno == EINTR)
            continue;
        if (n < 0) return errno;
        if ((*frames)++ == 0) *len = (size_t)n < cap ? (size_t)n : cap; /* (cut) */
        size_t size = sizeof more;
        if (zmq_getsockopt(s, ZMQ_RCVMORE, &more, &size) != 0) return errno;
    }
    return 0;
}

/* Receiver `rank`'s decided answer (1 accepted, 2 refused: its reason in `reason`), asking
 * again while it says unknown; 0 at the deadline. `s`: a DEALER connected to its follow
 * socket. */
static int ask(mt_client *c, void *s, uint32_t rank, uint32_t world, double deadline,
               uint64_t *request_id, ignored *bad, char *reason, size_t reason_size) {
    static const size_t cap = ADMISSION_HEAD + MAX_REASON_BYTES + 64;
    uint8_t *buf = malloc(cap);
    if (buf == NULL) return 0;
    double pause = 0.01;
    int decided = 0;
    while (!decided && mt_now() < deadline) {
        uint8_t query[QUERY_BYTES];
        uint64_t id = ++*request_id;
        mt_put_prefix(query, KIND_ADMISSION_QUERY, 0, c->simulation_id);
        mt_put_u64(query + 16, id);
        if (zmq_send(s, query, sizeof query, ZMQ_DONTWAIT) < 0) { /* (not connected yet) */
            nap(pause < deadline - mt_now() ? pause : deadline - mt_now());
            continue;
        }
        bool answered = false; /* (an answer to this query, decided or not) */
        while (!answered && !decided) {
            double left = deadline - mt_now();
            zmq_pollitem_t item = {s, 0, ZMQ_POLLIN, 0};
            int ready = left > 0 ? zmq_poll(&item, 1, mt_ms(left) + 1) : 0;
            if (ready < 0 && errno == EINTR) continue;
            if (ready <= 0) break; /* (the deadline) */
            size_t len = 0;
            int frames = 0;
            if (mt_follow_receive(s, buf, cap, &len, &frames) != 0) break;
            mt_admission a;
            const char *why = frames != 1 ? "unexpected_frame"
                                          : mt_admission_parse(buf, len, c->simulation_id, id,
                                                               rank, world, &a);
            if (why != NULL) { /* counted and ignored */
                bad->count++;
                bad->last = why;
                continue;
            }
            answered = true;
            if (a.status == MT_ADMISSION_UNKNOWN) continue;
            decided = a.status;
            snprintf(reason, reason_size, "%.*s", (int)a.reason_len, a.reason);
        }
        if (!decided) { /* (its HELLO not processed yet, or an error: ask again, later) */
            double left = deadline - mt_now();
            nap(pause < left ? pause : left);
            pause = pause * 2 < 0.5 ? pause * 2 : 0.5;
        }
    }
    free(buf);
    return decided;
}

void *mt_follow_dial(void *ctx, const char *follow, const char *key, const char *monitor,
                     void **pair, double disconnected_timeout) {
    void *s = zmq_socket(ctx, ZMQ_DEALER);
    int zero = 0, connect_ms = mt_connect_timeout_ms(disconnected_timeout);
    if (pair != NULL) *pair = NULL;
    if (s == NULL) return NULL;
    bool ok = zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero) == 0 &&
              zmq_setsockopt(s, ZMQ_CONNECT_TIMEOUT, &connect_ms, sizeof connect_ms) == 0;
    if (ok && key != NULL) {
        char public_key[41], secret_key[41];
        ok = zmq_has("curve") && zmq_curve_keypair(public_key, secret_key) == 0 &&
             zmq_setsockopt(s, ZMQ_CURVE_SERVERKEY, key, 40) == 0 &&
             zmq_setsockopt(s, ZMQ_CURVE_PUBLICKEY, public_key, 40) == 0 &&
             zmq_setsockopt(s, ZMQ_CURVE_SECRETKEY, secret_key, 40) == 0;
    }
    /* (the monitor and its reader before the connection: its first event is not missed;
     * RCVHWM 0, unbounded, as handshake.c's: libzmq's I/O thread blocks on a full one) */
    void *m = NULL;
    if (ok && monitor != NULL) {
        ok = zmq_socket_monitor(s, monitor, ZMQ_EVENT_CONNECTED | ZMQ_EVENT_DISCONNECTED) == 0 &&
             (m = zmq_socket(ctx, ZMQ_PAIR)) != NULL &&
             zmq_setsockopt(m, ZMQ_LINGER, &zero, sizeof zero) == 0 &&
             zmq_setsockopt(m, ZMQ_RCVHWM, &zero, sizeof zero) == 0 && zmq_connect(m, monitor) == 0;
    }
    if (ok) ok = zmq_connect(s, follow) == 0;
    if (!ok) {
        if (m != NULL) zmq_close(m);
        if (monitor != NULL) zmq_socket_monitor(s, NULL, 0);
        zmq_close(s);
        return NULL;
    }
    if (pair != NULL) *pair = m;
    return s;
}

mt_status mt_admission_refused(mt_client *c, size_t rank, const char *endpoint,
                               const char *reason) {
    /* client/admission.py's message, and its fix when the reason does not say it; a
     * query of another run's id (client/receipts.py _refused) */
    bool fields = strstr(reason, "declares other fields") != NULL;
    bool wrong_run = strstr(reason, "(wrong_run)") != NULL;
    return mt_fail(c, MT_ESIMREFUSED, "simulation %llu: the trainer's receiver %zu (%s) "
                                      "refused it, and dropped everything it sent: %s%s%s",
                   (unsigned long long)c->simulation_id, rank, endpoint, reason,
                   fields ? ". Run it again declaring the study's fields (the same names, "
                            "dtypes and shapes, e.g. the trainer's grid size)"
                          : "",
                   wrong_run ? ". Start it again (it reads the rendezvous afresh), with the same "
                               "simulation id; unset MELISSA_TRAINER_RUN_ID if its environment "
                               "sets one"
                             : "");
}

bool mt_admission_wanted(const mt_client *c) {
    const char *attempt = getenv(ENV_ATTEMPT);
    bool launched = false;
    for (const char *p = attempt; p != NULL && *p && !launched; ++p)
        launched = *p != ' ' && *p != '\t' && *p != '\n' && *p != '\r';
    return c->rendezvous_used != NULL && !launched;
}

mt_status mt_admission_check(mt_client *c, char *const *endpoints, size_t n) {
    mt_rendezvous rv;
    mt_status st = mt_rendezvous_read(c->rendezvous_used, &rv, NULL, false);
    if (st == MT_ENOMEM) return mt_fail(c, MT_ENOMEM, "out of memory");
    if (st != MT_OK) return MT_OK; /* (a trainer stopped or restarting since: not asked) */
    bool askable = rv.n == n;
    for (size_t r = 0; askable && r < n; ++r)
        askable = strcmp(rv.endpoints[r], endpoints[r]) == 0 && rv.follows[r] != NULL;
    if (!askable) { /* (another run's rendezvous, or receivers without a follow socket) */
        mt_rendezvous_free(&rv);
        return MT_OK;
    }
    void *ctx = zmq_ctx_new();
    double deadline = mt_now() + ADMISSION_TIMEOUT;
    uint64_t request_id = 0;
    ignored bad = {0, NULL};
    int decided = 1;
    char reason[MAX_REASON_BYTES + 1] = "";
    size_t r = 0;
    for (; ctx != NULL && r < n && decided == 1; ++r) {
        void *s = mt_follow_dial(ctx, rv.follows[r], rv.keys[r], NULL, NULL,
                                 c->disconnected_timeout);
        decided = s == NULL ? 0 : ask(c, s, (uint32_t)r, (uint32_t)n, deadline, &request_id,
                                      &bad, reason, sizeof reason);
        if (s != NULL) zmq_close(s);
    }
    if (ctx != NULL) {
        while (zmq_ctx_term(ctx) != 0 && errno == EINTR) continue;
    }
    st = MT_OK;
    if (decided == MT_ADMISSION_REFUSED) {
        st = mt_admission_refused(c, r - 1, rv.endpoints[r - 1], reason);
    } else if (decided == 0) {
        char ignored_text[96] = "";
        if (bad.count > 0)
            snprintf(ignored_text, sizeof ignored_text, " (malformed replies ignored: %u, "
                                                        "the last %s)", bad.count, bad.last);
        fprintf(stderr, "melissa_trainer: mt_client_close: simulation %llu rank %d: the trainer "
                        "did not confirm within %.0f s that it took this simulation%s; its "
                        "receivers' logs say whether they refused it\n",
                (unsigned long long)c->simulation_id, c->rank, ADMISSION_TIMEOUT, ignored_text);
    }
    mt_rendezvous_free(&rv);
    return st;
}
