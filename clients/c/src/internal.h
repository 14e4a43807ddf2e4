/* internal.h: the client's state and the helpers the library's files share (not installed). */
#ifndef MT_INTERNAL_H
#define MT_INTERNAL_H

#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "melissa_trainer.h"
#include "replay.h"

#define MT_MAX_NDIM 8
#define MT_MAX_NAME_BYTES 255
#define MT_INLINE_MAX_BYTES 65536u
#define MT_MAX_HELLO_BODY (1u << 20)
#define MT_MAX_CLIENT_RANKS 65535
#define MT_PREFIX_BYTES 16u
#define MT_DATA_FIXED_BYTES 48u
#define MT_TIME_STEP_AT 16u
#define MT_KIND_AT 5u
#define MT_FLAGS_AT 6u
#define MT_KIND_HELLO 1
#define MT_KIND_DATA 2
#define MT_KIND_BYE 3
#define MT_KIND_BATCH 5
#define MT_FLAG_INLINE 1
#define MT_FLAG_FINITE 2 /* DATA, BATCH: the sender checked every value finite */
#define MT_ERROR_BYTES 1024

enum part_mode { PART_WHOLE = 0, PART_RANGE = 1, PART_COUNT = 2 };

typedef struct mt_field {
    char *name;
    size_t name_len;
    mt_dtype dtype;
    size_t itemsize;
    int ndim;
    uint64_t shape[MT_MAX_NDIM];
    uint64_t size; /* elements of the global array */
    enum part_mode part;
    bool offset_known;
    uint64_t offset, count; /* this rank's part */
    /* after start */
    uint64_t nbytes;   /* of this rank's part */
    bool inline_;      /* one frame (<= MT_INLINE_MAX_BYTES) */
    bool batchable;    /* inline and nbytes <= batch_bytes / 2 */
    uint8_t *header;   /* the DATA header; the time step patched at each send */
    size_t header_len;
    bool sent;         /* sent for the open step */
    size_t replay_at;  /* where its part lies in a replay window's row (replay.c) */
} mt_field;

typedef struct mt_param {
    char *name;
    double value;
} mt_param;

/* One field's records bound for one receiver (a BATCH frame being filled). */
typedef struct mt_batch {
    uint8_t *buf;
    size_t len, cap, header_len;
    uint64_t records;
    bool finite; /* every record so far is a float payload without NaN or Inf */
} mt_batch;

/* The batches bound for one receiver; they leave together, as one message. */
typedef struct mt_group {
    mt_batch *batches; /* one per field, in declaration order */
    double born;       /* when its oldest record was added; 0: empty */
    bool full;
} mt_group;

/* A set of u64 (the distinct time steps sent): one arithmetic run (0, 1, 2, ... or 0, 10,
 * 20, ...: O(1) per step and no memory, whatever their number), and the steps off the run
 * in a hash set (open addressing), as the Python client's StepSet. */
typedef struct mt_stepset {
    uint64_t first, last, stride; /* the run (stride 0: one step); run_count 0: empty */
    uint64_t run_count;
    uint64_t *slots;
    unsigned char *used;
    size_t cap, count; /* the hash set's steps (none of them in the run) */
} mt_stepset;

/* What a data socket's monitor said of its receiver's handshake (handshake.c). */
typedef enum { MT_HANDSHAKE_NONE, MT_HANDSHAKE_OK, MT_HANDSHAKE_REFUSED } mt_handshake_state;
typedef struct mt_handshake {
    void *monitor; /* PAIR reading the data socket's handshake events; NULL: none */
    mt_handshake_state state;
    int undetailed;      /* failures without detail since the last success */
    uint16_t event;      /* the failure that refused it, and its value */
    uint32_t value;
    bool down;         /* disconnected (or a connection attempt failed) since down_since */
    double down_since; /* (mt_now(), when the event was read) */
} mt_handshake;

struct mt_client {
    char error[MT_ERROR_BYTES];
    /* configuration */
    bool id_set;
    uint64_t simulation_id;
    char *endpoints_arg;      /* mt_set_endpoints, comma-separated */
    char *rendezvous_dir;     /* mt_set_rendezvous */
    char *rendezvous_used;    /* the directory the endpoints came from (NULL: given) */
    double rendezvous_timeout;
    char *run_id;             /* the run the HELLO names (NULL: none), set at start */
    mt_param *params;
    size_t n_params;
    bool params_set;
    double send_timeout, close_timeout;
    double disconnected_timeout; /* the close's receipt: a receiver gone after (< 0: never) */
    bool replay_set;          /* mt_set_replay_bytes was called: replay_arg wins */
    uint64_t replay_arg;
    double follow_timeout;    /* follow.c: a trainer found gone, a new one waited for (< 0: ever) */
    size_t batch_bytes;
    double batch_delay;
    int sndhwm;
    mt_reuse reuse;
    int rank, ranks;
    uint64_t max_message_bytes;
    mt_field *fields;
    size_t n_fields;
    /* after start */
    bool started, failed;
    char **endpoints;
    size_t n_endpoints;
    /* per endpoint, its receiver's CURVE public key (NULL: none): MELISSA_TRAINER_KEY for
     * endpoints given, or the one a rendezvous file published; freed with endpoints */
    char **curve_keys;
    /* per endpoint, its receiver's follow socket (NULL: none; docs/protocol.md 17), from
     * the rendezvous; freed with endpoints. `receipts`: every one answers RECEIPT_QUERY */
    char **follows;
    bool receipts;
    void *zctx;
    void **sockets;
    mt_handshake *handshakes; /* one per socket (NULL until the first monitor) */
    double handshake_checked; /* when mt_send last read their monitors (-inf: never) */
    uint64_t *steps_per_receiver;
    mt_stepset steps;
    /* following a restarted trainer (follow.c; external mode with a window only) */
    mt_replay replay;
    double follow_due;            /* when mt_send next looks at the rendezvous */
    unsigned long long follow_ino;
    long long follow_mtime_ns;    /* rank_0.json's as last looked at (0: none) */
    unsigned followed;            /* how many times it followed */
    int receipt_restart;          /* receipt.c: its MT_ETIMEDOUT was a new run (1), gone (2) */
    /* the open time step */
    bool step_open;
    uint64_t step;
    size_t step_missing; /* fields with a non-empty part not sent yet */
    size_t step_receiver;
    bool step_batched;   /* the outbox takes this step's small payloads */
    bool step_appended;  /* some were appended */
    double step_now;
    double last_send;    /* monotonic seconds; -inf before the first */
    /* batching: mu guards the sockets and the groups (the flusher thread shares them) */
    pthread_mutex_t mu;
    pthread_cond_t wake; /* the flusher's timer, with mu */
    bool mu_init;
    mt_group *groups;
    bool flusher_running, closing;
    int flusher_err; /* a send of the flusher failed (not on back-pressure) */
    pthread_t flusher;
    /* large arrays ZeroMQ still reads (held_mu: the ZeroMQ I/O thread releases them) */
    pthread_mutex_t held_mu;
    pthread_cond_t held_cv;
    bool held_init;
    uint64_t pending;
    /* predictions (predict.c): the client's thread only */
    char *serve_endpoints_arg; /* mt_set_serve_endpoints */
    void *predict_socket;      /* DEALER; NULL until the first request, after a failure */
    struct mt_spec *serve_inputs; /* the inputs the serve file declared (NULL: unknown) */
    size_t n_serve_inputs;
    uint64_t request_id;       /* the last one sent */
    mt_refusal refusal;
    double refusal_retry;
    /* a trainer gone (predict_watch.c): predict_socket's monitor, how many were made
     * (each its own inproc address), whether a serve file was found before, and after a
     * request that found the trainer gone, why, until when requests fail without
     * dialling, and that backoff (0: none) */
    void *predict_monitor;
    unsigned predict_monitors;
    char predict_endpoint[512]; /* where predict_socket is connected (for messages) */
    int predict_key;            /* its CURVE key: MT_KEY_NONE, _GIVEN, _SERVE_FILE (serve.h) */
    bool served_there;
    char gone_why[640];
    double retry_at, backoff;
};

/* errors.c */
mt_status mt_fail(mt_client *c, mt_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void mt_clear_error(mt_client *c);
size_t mt_itemsize(mt_dtype dtype);
const char *mt_dtype_name(mt_dtype dtype);
const char *mt_dtype_str(mt_dtype dtype);
double mt_now(void); /* monotonic seconds */
#ifdef MT_TESTING
void mt_testing_advance_clock(double seconds); /* (tests only: see errors.c) */
#endif
/* The Python repr of a double (shortest round trip: 300.0, 1e-05, 1e+16) into out. */
void mt_format_double(double v, char out[32]);
bool mt_utf8_valid(const char *s, size_t n);

/* encode.c */
typedef struct mt_buf {
    char *data;
    size_t len, cap;
    bool oom;
} mt_buf;
void mt_buf_put(mt_buf *b, const void *p, size_t n);
void mt_buf_puts(mt_buf *b, const char *s);
void mt_buf_json_string(mt_buf *b, const char *s, size_t n);
mt_status mt_encode_hello(mt_client *c, mt_buf *out);
void mt_put_u16(uint8_t *p, uint16_t v);
void mt_put_u32(uint8_t *p, uint32_t v);
void mt_put_u64(uint8_t *p, uint64_t v);
/* The little-endian reads of the replies' fields (reply.c, admission.c, receipt.c). */
uint32_t mt_get_u32(const uint8_t *p);
uint64_t mt_get_u64(const uint8_t *p);
void mt_put_prefix(uint8_t *p, int kind, uint16_t flags, uint64_t simulation_id);
/* Whether `count` values of `dtype` at `data` are all finite (float dtypes only: false
 * for the others, which carry no FLAG_FINITE), by their exponent bits (exact). */
bool mt_all_finite(mt_dtype dtype, const void *data, uint64_t count);
mt_status mt_build_headers(mt_client *c);
void mt_encode_bye(uint8_t out[28], uint64_t simulation_id, int rank, int ranks, uint64_t steps);

/* json.c: a strict reader of one flat JSON object */
typedef enum { MT_JSON_NUMBER, MT_JSON_STRING, MT_JSON_OTHER } mt_json_kind;
typedef struct mt_json_member {
    char *key;
    mt_json_kind kind;
    double number;
    bool integer; /* a number without fraction or exponent */
    char *string; /* MT_JSON_STRING: decoded UTF-8; else the raw text of the value */
} mt_json_member;
/* Parse `text` as one JSON object; on failure returns false with a reason in err. */
bool mt_json_object(const char *text, mt_json_member **members, size_t *n, char *err,
                    size_t err_size);
void mt_json_free(mt_json_member *members, size_t n);
/* True if `text` is one valid JSON value (of any kind). */
bool mt_json_valid(const char *text);

/* An array's name, dtype and shape (C order), as a serve file declares an input. */
typedef struct mt_spec {
    char *name;
    mt_dtype dtype;
    int ndim;
    uint64_t shape[MT_MAX_NDIM];
} mt_spec;

/* Split `text`, one JSON array, into the raw texts of its items (each NUL-terminated). */
bool mt_json_array(const char *text, char ***items, size_t *n, char *err, size_t err_size);
void mt_json_array_free(char **items, size_t n);

/* predict.c: close the prediction socket (before the context ends), free what
 * mt_set_serve_endpoints and the serve file left. */
void mt_predict_release(mt_client *c);
void mt_predict_free(mt_client *c);

/* env.c */
mt_status mt_resolve_config(mt_client *c);
/* rendezvous.c: one complete and consistent reading of a rendezvous directory, in rank
 * order: each receiver's endpoint, CURVE key and follow endpoint (NULL: none), whether its
 * follow socket answers RECEIPT_QUERY (13 in "follow_kinds"), the run id (NULL: none),
 * whether a file is marked stopped (read with `stopped_too` only). */
typedef struct mt_rendezvous {
    size_t n;
    char **endpoints, **keys, **follows;
    bool *receipts;
    char *run_id;
    bool stopped;
} mt_rendezvous;
/* One look at `dir`: MT_OK (*out filled: mt_rendezvous_free), MT_ERENDEZVOUS (not complete,
 * not consistent, or, unless `stopped_too`, a file marked stopped: what is wrong in
 * `problem`), MT_ENOMEM. */
mt_status mt_rendezvous_read(const char *dir, mt_rendezvous *out, char *problem, size_t size,
                             bool stopped_too);
void mt_rendezvous_free(mt_rendezvous *rv);
/* admission.c: was the simulation taken (docs/protocol.md 17a), asked at the close. */
#define MT_ADMISSION_UNKNOWN 0
#define MT_ADMISSION_ACCEPTED 1
#define MT_ADMISSION_REFUSED 2
typedef struct mt_admission {
    int status;         /* MT_ADMISSION_* */
    const char *reason; /* into the frame: reason_len bytes of UTF-8, no NUL */
    size_t reason_len;
} mt_admission;
/* NULL with *out set if `frame` (len bytes) is an ADMISSION answering query `request_id`
 * about `simulation_id`, from receiver `rank` of `world`; else why not, as the Python
 * client counts it ("truncated", "bad_size", "bad_rank", ...). */
const char *mt_admission_parse(const uint8_t *frame, size_t len, uint64_t simulation_id,
                               uint64_t request_id, uint32_t rank, uint32_t world,
                               mt_admission *out);
/* Whether the close asks: endpoints from a rendezvous, MELISSA_TRAINER_ATTEMPT unset. */
bool mt_admission_wanted(const mt_client *c);
/* Ask each receiver (`endpoints`: the ones the client sent to, the rendezvous read again
 * must name them) whether it took the simulation: MT_ESIMREFUSED with its reason if one
 * refused it, else MT_OK (a warning on stderr when one did not say in 10 s). Asked of a
 * trainer whose receivers do not all answer RECEIPT_QUERY (receipt.c). */
mt_status mt_admission_check(mt_client *c, char *const *endpoints, size_t n);
/* A DEALER to `follow` (with the receiver's CURVE key, if any), or NULL; with `monitor`
 * (an inproc address), its connections (connected, disconnected) are reported to *pair,
 * a PAIR connected there before the DEALER connects. */
void *mt_follow_dial(void *ctx, const char *follow, const char *key, const char *monitor,
                     void **pair);
/* One whole message on `s` (readable: polled first): its first frame into `buf` (*len
 * bytes, cut at `cap`), its frames counted in *frames; 0, or the errno. */
int mt_follow_receive(void *s, uint8_t *buf, size_t cap, size_t *len, int *frames);
/* The refusal's message (MT_ESIMREFUSED), as the Python client's SimulationRefused (with
 * its fix when the reason names other fields or another run). */
mt_status mt_admission_refused(mt_client *c, size_t rank, const char *endpoint,
                               const char *reason);

/* receipt.c: was this rank's BYE ingested (docs/protocol.md 17b), asked at the close. */
#define MT_RECEIPT_NO_BYE 0
#define MT_RECEIPT_BYE 1
#define MT_RECEIPT_FINISHED 2
typedef struct mt_receipt {
    int admission;      /* MT_ADMISSION_* */
    int bye;            /* MT_RECEIPT_* */
    const char *reason; /* into the frame: reason_len bytes of UTF-8, no NUL */
    size_t reason_len;
    uint64_t steps, bye_steps, nonfinite;
} mt_receipt;
/* NULL with *out set if `frame` (len bytes) is a RECEIPT answering query `request_id`
 * about `simulation_id`, from receiver `rank` of `world`; else why not, as the Python
 * client counts it ("truncated", "bad_size", "bad_rank", ...). */
const char *mt_receipt_parse(const uint8_t *frame, size_t len, uint64_t simulation_id,
                             uint64_t request_id, uint32_t rank, uint32_t world,
                             mt_receipt *out);
/* 1 if `r` confirms a BYE that carried `expected` (the simulation finished there, or
 * this rank's BYE is in with that count), -1 if the simulation was refused, 0 not yet. */
int mt_receipt_decides(const mt_receipt *r, uint64_t expected);
/* A RECEIPT_QUERY into `out` (at least 102 bytes); its length. */
size_t mt_receipt_query(uint8_t *out, uint64_t simulation_id, uint64_t request_id,
                        uint64_t bye_steps, int rank, int ranks, const char *run_id);
/* Ask the receivers of `rv` (whose endpoints are the client's) until each confirmed
 * this rank's BYE (MT_OK; a warning on stderr for samples refused as non-finite),
 * one refused the simulation or all its samples were non-finite (MT_ESIMREFUSED), or
 * one is gone, the rendezvous names a new run, or the close timeout passed
 * (MT_ETIMEDOUT, saying what may be lost and what to do). */
mt_status mt_receipt_check(mt_client *c, const mt_rendezvous *rv, const uint64_t *bye_steps);

/* stop_record.c: what a stopped receiver's stop record says of this rank's BYE
 * (docs/protocol.md 2, "The stop record"; 17b, "A trainer that stopped"). */
typedef enum {
    MT_STOP_UNDECIDED, /* no record of this run (or preempted, or it lacks the BYE and is
                        * incomplete or "stopped"): the waits decide */
    MT_STOP_CONFIRMED, /* the BYE (or the simulation finished) is in it: *out's receipt */
    MT_STOP_REFUSED,   /* the trainer stopped on this simulation's non-finite sample */
    MT_STOP_ENDED,     /* the trainer ended or failed without this BYE (complete record) */
    MT_STOP_INVALID    /* (internal: a record that does not parse, ignored) */
} mt_stop_outcome;
typedef struct mt_stop_said {
    int bye; /* MT_RECEIPT_BYE or MT_RECEIPT_FINISHED, when confirmed */
    uint64_t steps, bye_steps, nonfinite, time_step;
    char code[16];
    char message[1024];
} mt_stop_said;
/* What one receiver's file looked like when last read (it is read again only once it
 * changes), and whether its invalid record was warned of. Zeroed before the first look. */
typedef struct mt_stop_look {
    bool seen, warned;
    unsigned long long ino;
    long long mtime, size;
} mt_stop_look;
mt_stop_outcome mt_stop_record_decide(const char *dir, size_t rank, const char *endpoint,
                                      const char *run_id, uint64_t simulation_id,
                                      int client_rank, uint64_t count, mt_stop_look *look,
                                      mt_stop_said *out);
/* The close's failure for MT_STOP_REFUSED (MT_ESIMREFUSED) or MT_STOP_ENDED (MT_ETIMEDOUT),
 * in the Python client's words (client/stopped.py). */
mt_status mt_stop_record_fail(mt_client *c, mt_stop_outcome o, const mt_stop_said *s,
                              size_t rank, const char *endpoint, const char *whose);
/* rendezvous.c: c->endpoints, c->curve_keys and c->run_id from the rendezvous directory
 * `dir`, polled until complete for up to `timeout` seconds (else MT_ERENDEZVOUS). */
mt_status mt_fetch_endpoints(mt_client *c, const char *dir, double timeout);
/* 1 to 64 ASCII letters, digits, '-' or '_', one alphanumeric at least (a run id). */
bool mt_valid_run_id(const char *s);

/* outbox.c */
mt_status mt_outbox_init(mt_client *c);
void mt_outbox_free(mt_client *c);
mt_status mt_outbox_append(mt_client *c, size_t field, const void *data);
bool mt_outbox_due(const mt_client *c, size_t index, double now);
/* Send group `index` as one message (mu held); flags 0 or ZMQ_DONTWAIT. Returns 0, or
 * the errno of the failed send (EAGAIN: nothing sent, the group intact). */
int mt_outbox_send(mt_client *c, size_t index, int flags);
mt_status mt_outbox_start_flusher(mt_client *c);
void mt_outbox_stop_flusher(mt_client *c);

/* steps (in outbox.c) */
int mt_stepset_add(mt_stepset *s, uint64_t v); /* 1 new, 0 present, -1 no memory */
void mt_stepset_free(mt_stepset *s);

/* handshake.c */
/* Monitor socket i's handshakes (before it connects: none is missed). */
mt_status mt_handshake_watch(mt_client *c, size_t i);
/* MT_EENV, naming the endpoint and the fix, if socket i's receiver refused its handshake
 * (events read without blocking); MT_OK otherwise. */
mt_status mt_handshake_check(mt_client *c, size_t i);
/* Wait until every receiver accepted the handshake (MT_OK), one refused it (MT_EENV, the
 * message set), or the deadline (< 0: none) passed (MT_ETIMEDOUT, no message set). */
mt_status mt_handshake_wait(mt_client *c, double deadline);
/* Since when socket i's receiver has been down (events read without blocking), or < 0
 * while it is connected or not known down. */
double mt_handshake_down_since(mt_client *c, size_t i);
/* Stop the monitors and close their sockets (before the data sockets, and the context). */
void mt_handshake_release(mt_client *c);

/* send.c */
mt_status mt_arm(mt_client *c, void *sock, double deadline);
/* Whole milliseconds in `seconds` for ZeroMQ's int options and waits (SNDTIMEO, LINGER,
 * zmq_poll): 0 if <= 0, at most INT_MAX (24.8 days; a cast past it is undefined, in
 * practice INT_MIN: "forever"). A longer bound is capped there: a send or close blocked
 * that long fails then (a poll loop, which looks at its deadline again, is exact). */
int mt_ms(double seconds);
/* Wait until ZeroMQ holds none of this client's arrays (MT_OK) or the deadline (< 0:
 * none) passed (MT_ETIMEDOUT). mt_held_none: whether it holds none now (no wait). */
mt_status mt_wait_held(mt_client *c, double deadline);
bool mt_held_none(mt_client *c);
#ifdef MT_TESTING
extern _Atomic unsigned mt_testing_held_waits; /* condition waits of mt_wait_held */
#endif
mt_status mt_send_fail(mt_client *c, int err, const char *what);

/* send_wait.c. One try of a send on a socket (c->mu held): 0, or the errno (EAGAIN:
 * nothing sent, the try can be repeated). mt_send_sliced: try_(c, arg), socket `index`
 * armed for a slice, until done: MT_OK (sent; or a restarted trainer was followed
 * meanwhile, c->followed changed, which sent what this send carried), or the error, the
 * client failed (the send timeout passed, a handshake refused, a receiver disconnected
 * for the disconnected timeout, ZeroMQ). `step`: for messages (NULL: "a message"). */
typedef int (*mt_try)(mt_client *c, void *arg);
mt_status mt_send_sliced(mt_client *c, size_t index, double deadline, mt_try try_, void *arg,
                         const uint64_t *step);
/* mt_wait_held in slices, as mt_send_sliced waits. */
mt_status mt_wait_sent(mt_client *c, double deadline, const uint64_t *step);

#endif
