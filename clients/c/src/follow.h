/* follow.h: following a restarted trainer (held.c, follow.c; docs/protocol.md 17), and
 * what of lifecycle.c follow.c uses. Not installed; after internal.h. */
#ifndef MT_FOLLOW_H
#define MT_FOLLOW_H

#include "internal.h"

/* held.c: which steps a resumed trainer's checkpoint holds (docs/protocol.md 17). */
#define MT_HELD_NONE 0
#define MT_HELD_STEPS 1
#define MT_HELD_FINISHED 2
#define MT_HELD_ABANDONED 3
typedef struct mt_held {
    int status;          /* MT_HELD_* */
    uint32_t rank, world;
    uint64_t bits;       /* the bit count (status MT_HELD_STEPS) */
    uint8_t *map;        /* ceil(bits / 8) bytes, malloc'd (NULL when bits is 0) */
} mt_held;
/* NULL with *out set (out->map malloc'd) if `frame` is a HELD answering `request_id`
 * about `simulation_id` from receiver `rank` of `world`; else why not ("truncated",
 * "bad_size", "bad_rank", ..., "no_memory"). */
const char *mt_held_parse(const uint8_t *frame, size_t len, uint64_t simulation_id,
                          uint64_t request_id, uint32_t rank, uint32_t world, mt_held *out);
/* Whether `h` holds time step `step` of `simulation_id`, routed as `routing` says
 * (mt_client.routing; docs/protocol.md 17: bit step / world). */
bool mt_held_holds(const mt_held *h, uint64_t step, uint64_t simulation_id, bool routing);
/* A HELD_QUERY into out (24 bytes). */
void mt_held_query(uint8_t out[24], uint64_t simulation_id, uint64_t request_id);
/* Each receiver's HELD of `rv` (held[r], mt_held_free each), asked on its follow socket,
 * at most `timeout` s each: MT_OK, or MT_ETIMEDOUT (no follow socket, no valid answer).
 * Given `newer` (its n 0), a wait also looks every 0.1 s whether the rendezvous names a
 * newer run (mt_follow_newer): then MT_OK with *newer filled (n > 0), held[] freed. */
mt_status mt_held_ask(mt_client *c, const mt_rendezvous *rv, double timeout, mt_held *held,
                      mt_rendezvous *newer);
void mt_held_free(mt_held *h);

/* rerun.c: a launched rerun skips the steps its receivers hold (docs/protocol.md 17). */
/* $MELISSA_TRAINER_ATTEMPT (0 the first launch), or -1 when unset or not a number. */
long mt_rerun_attempt(void);
/* $MELISSA_TRAINER_ATTEMPT checked at the start: unset, blank, or ASCII digits below 2**31
 * (client/config.py check_attempt's rule and words), else MT_EENV naming it. */
mt_status mt_check_attempt(mt_client *c);
/* $MELISSA_TRAINER_SILENCE_S checked at the start: unset, blank, or 1-9 ASCII digits with
 * an optional dot and 1-9 more, above 0 (client/launched_env.py check_silence's rule and
 * words), else MT_EENV naming it. */
mt_status mt_check_silence(mt_client *c);
/* $SLURM_RESTART_COUNT checked at the start of a launched job ($MELISSA_TRAINER_ATTEMPT
 * set; else not read): unset, blank, or ASCII digits below 2**31 (client/launched_env.py
 * check_restart_count's rule and words), else MT_EENV naming it. */
mt_status mt_check_restart_count(mt_client *c);
/* At the first send (sets c->rerun_asked): on an attempt > 0, or a launched batch job
 * Slurm requeued ($SLURM_RESTART_COUNT > 0), with a rendezvous, ask each
 * receiver which steps it holds (at most 5 s each) and keep the answers if any holds
 * some; never fails (no answer: every step is sent, one line on stderr says why). */
void mt_rerun_ask(mt_client *c);
/* Whether step `step` is held by its receiver and no sign of life is due at `now` (the
 * first send, or none for c->rerun_interval s): then it is not sent (counted in BYE).
 * Called for every step. */
bool mt_rerun_skips(mt_client *c, uint64_t step, double now);
/* Forget the answers (after a follow: they were the old trainer's; at the free). */
void mt_rerun_drop(mt_client *c);

/* follow.c: a trainer restarted (a new run in the rendezvous) followed. */
/* The window's bound and row, from mt_set_replay_bytes, MELISSA_TRAINER_REPLAY_BYTES or
 * the default (external mode only); after the headers are built. MT_EENV on a bad value. */
mt_status mt_follow_setup(mt_client *c);
/* With a window: look at the rendezvous (at most once a second unless `force`), and if
 * it names a new run, follow it (ask, reconnect, send again). MT_OK, or an error that
 * leaves the client failed (the message says what to do). */
mt_status mt_follow_poll(mt_client *c, bool force);
/* Whether rank_0.json was rewritten since the client last looked and names another run
 * than `rv` (*out filled: mt_rendezvous_free): a trainer being followed was killed before
 * it answered, and restarted again (follow.py Superseded). One stat when unchanged. */
bool mt_follow_newer(mt_client *c, const mt_rendezvous *rv, mt_rendezvous *out);
/* At the close, its receipt not confirmed or its BYE not delivered (c->receipt_restart:
 * the rendezvous names a new run, or a receiver gone): with a window, wait up to the
 * follow timeout for a new run other than `mine`'s (empty: than c->run_id), make the
 * client started again and follow it (MT_OK: the close says BYE again); else the
 * receipt's error, kept, or the follow's. */
mt_status mt_follow_reopen(mt_client *c, const mt_rendezvous *mine);
/* serve.c's lookup (mt_predict) in this client's rendezvous `dir` found only another
 * run's serve files (`why`): a trainer restarted there. Fails the request (mt_gone), saying
 * that the client follows it at its next mt_send, which then looks at once; or, without a
 * replay window, that it never will. */
mt_status mt_follow_predict_refused(mt_client *c, const char *dir, const char *why);

/* lifecycle.c: the transport alone (follow.c replaces it). */
void mt_transport_release(mt_client *c, int linger_ms);
mt_status mt_init_sync(mt_client *c);
mt_status mt_connect_all(mt_client *c);
/* lifecycle.c: everything mt_client_start acquires, released (linger_ms for the sockets;
 * the close's and the abort's, close.c). */
void mt_release_runtime(mt_client *c, int linger_ms);

#endif
