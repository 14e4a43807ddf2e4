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
/* The marks among the DATA sent alone with a copy (a small payload, unbatched): sent as
 * a copy ZeroMQ holds without one more, counted in marks_flying until it lets go, a
 * close's sign that the trainer takes such messages. A DATA is a mark when, from the last
 * mark (included) to it (excluded), at least MT_MARK_EVERY messages and MT_MARK_BYTES
 * bytes went, or MT_MARK_MOST messages did; the first is a mark (mt_mark_due, send_held.c;
 * melissa_trainer/client/marks.py MARK_EVERY, MARK_BYTES, MARK_MOST, the same, and why
 * these: tiny messages do not pay for a tracked send every 16, and a close still sees a
 * sign every 16 of 16 KiB or more, every 1024 smaller ones at most) */
#define MT_MARK_EVERY 16u
#define MT_MARK_BYTES 262144u
#define MT_MARK_MOST 1024u
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
    bool ever;         /* a connection was accepted once (CONNECTED): else a wrong endpoint? */
    double down_since; /* (mt_now(), dated back by the reconnection intervals since) */
    double retried_ms, last_ms; /* those announced since down (all but the last; last) */
    double tcp_at; /* first TCP connection (mt_now(); 0: none), while no handshake (zmtp) */
    bool zmtp;       /* a handshake completed once */
    double warn_due; /* silence (s) at which "not a receiver" is said next (0: not yet) */
    double drained, opened; /* last read that found none; since when up, no handshake (<0) */
    double bound; /* mt_timeout_bound of the socket, read at its last CONNECTED */
    double watched; /* mt_now() when watched, just before its connect */
} mt_handshake;

/* Asking, while it runs, whether the trainer took it (admission_watch.c). */
typedef struct mt_watch {
    bool active;         /* mt_send calls mt_admission_watch_poll once `due` */
    void *socket;        /* DEALER to receiver `at`'s follow socket (NULL: not dialled) */
    size_t at;           /* the receiver asked (those before took it) */
    uint64_t request_id; /* the query awaiting its reply (0: none) */
    uint64_t next_id;
    double due, pause, deadline, asked;
    char *refused; /* a trusted refusal: what every mt_send returns (NULL: none) */
} mt_watch;

/* The DATA sent alone with a copy from the last mark (included): MT_MARK_EVERY's rule.
 * {MT_MARK_MOST, 0} before any: the first is a mark (mt_client_create). */
typedef struct mt_marks {
    uint64_t messages;
    uint64_t bytes;
} mt_marks;

struct mt_client {
    char *error; /* the last error's message (NULL: none): errors.c, on the heap */
    char error_spare[MT_ERROR_BYTES]; /* (out of memory: the message cut into it) */
    /* configuration */
    bool id_set;
    uint64_t simulation_id;
    char *endpoints_arg;      /* mt_set_endpoints, comma-separated */
    char *rendezvous_dir;     /* mt_set_rendezvous */
    char *curve_key_arg;      /* mt_set_curve_server_key, checked (NULL: none) */
    char *rendezvous_used;    /* the directory the endpoints came from (NULL: given) */
    double rendezvous_timeout;
    char *run_id;             /* the run the HELLO names (NULL: none), set at start */
    /* the routing (docs/protocol.md 3), set at start and kept when following: true when
     * every rendezvous file said "routing": "simulation_step" (step t to receiver
     * (simulation_id + t) % W, and the HELLO says so); false: t % W (endpoints given, or
     * an older trainer's rendezvous) */
    bool routing;
    mt_param *params;
    size_t n_params;
    bool params_set;
    double send_timeout, close_timeout, failed_close_timeout; /* (< 0: none) */
    double close_began; /* the close's start, or a followed trainer's (its cap: close_cap.c) */
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
    mt_handshake *handshakes; struct mt_stop_look *stop_looks; /* per socket (NULL: none yet) */
    double handshake_checked, stop_look_due; /* mt_send read monitors (-inf: never); records */
    uint64_t *steps_per_receiver;
    mt_stepset steps;
    /* following a restarted trainer (follow.c; external mode with a window only) */
    mt_replay replay;
    double follow_due;            /* when mt_send next looks at the rendezvous */
    unsigned long long follow_ino;
    long long follow_mtime_ns;    /* rank_0.json's as last looked at (0: none) */
    unsigned followed; bool taken_all; /* times followed; BYE lost, all taken: close_wait.c */
    int receipt_restart;          /* receipt.c: its MT_ETIMEDOUT was a new run (1), gone (2) */
    /* the open time step */
    bool step_open;
    uint64_t step;
    size_t step_missing; /* fields with a non-empty part not sent yet */
    size_t step_receiver;
    bool step_batched;   /* the outbox takes this step's small payloads */
    bool step_appended;  /* some were appended */
    double step_now;
    double last_send, opened; /* monotonic s: the last send (-inf before), the HELLO's */
    mt_watch watch;      /* admission_watch.c */
    /* a launched rerun's skip of held steps (rerun.c): asked at the first send; each
     * receiver's HELD (NULL: all sent), the s without a send after which a held step
     * goes anyway, the last send (-inf: none), whether the open step is skipped */
    bool rerun_asked;
    struct mt_held *rerun_held;
    size_t rerun_n; double rerun_interval, rerun_heard;
    bool step_skipped;
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
    uint64_t batches_flying; /* batches ZeroMQ still holds (outbox.c; a close's progress) */
    uint64_t marks_flying;   /* marked DATA ZeroMQ still holds (send.c; a close's too) */
    mt_marks marks;          /* DATA sent alone with a copy since the last mark */
    /* predictions (predict.c): the client's thread only */
    char *serve_endpoints_arg; /* mt_set_serve_endpoints */
    void *predict_socket;      /* DEALER; NULL until the first request, after a failure */
    struct mt_spec *serve_inputs; /* the serve file's, or DESCRIBE's (NULL: unknown) */
    size_t n_serve_inputs;
    bool predict_described; /* DESCRIBE answered on this connection (its endpoint given) */
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
    bool predict_given;         /* its endpoint given (not read from a serve file) */
    long long predict_rank;     /* the training rank it is (for messages) */
    char predict_resolved[256]; /* a host name found to resolve ("": none yet) */
    /* its monitor read by handshake.c's rule (predict_watch.c): the last read that found
     * it empty, since when its connection may be up without a handshake (<0: none), the
     * bound, whether a handshake timed out last (its DISCONNECTED, CONNECT_RETRIED are
     * left out), and how many did */
    double predict_drained, predict_opened, predict_bound, predict_missing, predict_unserved[2];
    bool predict_after_timeout;
    unsigned predict_timed_out;
    /* its connects (predict_dial.c): its ZMQ_CONNECT_TIMEOUT (s), when it was dialled,
     * when a connect in progress was read (its CONNECT_DELAYED; <0: none), and whether
     * its host ever answered (a connection made, an attempt refused) */
    double predict_connect_bound, predict_dialled, predict_dialling;
    bool predict_answered;
    /* a handshake failed with the detail of a mechanism mismatch (CURVE on one side only):
     * with a key here, the server takes no CURVE (predict_watch.c refused_handshake) */
    bool predict_mismatched;
    /* the endpoint whose peer went silent at an earlier request (its connection up, no
     * answer: a stopped trainer), "" if none or it answered since: kept across
     * mt_predict_release, which closes the connection whose age said it (a request's
     * timeout under the bound never ages a new one that far; predict_watch.c) */
    char predict_silent_at[512];
    bool served_there, first_looked; /* (first_looked: below) */
    bool said_nonfinite_field, said_nonfinite_input; /* told once each (finite_notice.c) */
    bool said_unreachable; /* a serve file out of reach, told once (host_scope.c) */
    char gone_why[2048]; /* (room for a stop reason: up to 800 bytes, serve.c) */
    double retry_at, backoff;
    /* the last lookup's rendezvous directory (NULL: none), its inode and mtime (ns) then: a
     * change ends a backoff; rank_0.json's text at the first lookup (NULL: none; serve.c) */
    char *looked_dir, *first_stop;
    long long looked_stamp[2];
    struct mt_stop_glance *stop_glance; /* rank_0.json as a lookup last read it (stop_look.c) */
};

/* An array's name, dtype and shape (C order), as a serve file declares an input. */
typedef struct mt_spec {
    char *name;
    mt_dtype dtype;
    int ndim;
    uint64_t shape[MT_MAX_NDIM];
} mt_spec;

/* The declarations of the modules, one header each (each includes this one). */
#include "errors.h"
#include "py_text.h"
#include "encode.h"
#include "predict_release.h"
#include "admission_watch.h"
#include "json.h"
#include "rendezvous.h"
#include "close_checks.h"
#include "send.h"
/* The receiver of the `world` that gets time step t of `simulation_id` (docs/protocol.md
 * 3; melissa_trainer/wire/routing.py receiver_of): (simulation_id + t) % world when
 * `routing` (each term reduced first: no 64-bit overflow), else t % world. */
static inline size_t mt_receiver_of(uint64_t simulation_id, uint64_t t, size_t world,
                                    bool routing) {
    uint64_t w = (uint64_t)world;
    return (size_t)((t % w + (routing ? simulation_id % w : 0)) % w);
}

#endif
