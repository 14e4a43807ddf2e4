/* close_checks.h: what the close asks the trainer: was the simulation taken (admission.c),
 * was this rank's BYE ingested (receipt.c), what a stopped receiver's record says
 * (stop_record.c). Not installed; internal.h, which every source includes, includes it at
 * its end, after the types it uses. */
#ifndef MT_CLOSE_CHECKS_H
#define MT_CLOSE_CHECKS_H

#include "internal.h"

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
 * a PAIR connected there before the DEALER connects. Its TCP connect is bounded as a data
 * socket's (ZMQ_CONNECT_TIMEOUT, mt_connect_timeout_ms of `disconnected_timeout`): a host
 * that never answers is dialled again, not waited on for the kernel's ~2 minutes. */
void *mt_follow_dial(void *ctx, const char *follow, const char *key, const char *monitor,
                     void **pair, double disconnected_timeout);
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
#define MT_STOP_MESSAGE_MAX (4 * 4096u) /* bytes: stop_record.py's 4096 characters, UTF-8 */
typedef struct mt_stop_said {
    int bye; /* MT_RECEIPT_BYE or MT_RECEIPT_FINISHED, when confirmed */
    /* MT_STOP_ENDED on expected_simulations (the record's expected_end) before this
     * simulation was needed: steps and nonfinite are then what the receiver took of it */
    bool not_needed;
    /* this run's record, its code "preempted" or "broken", or "error" with restarts_left
     * > 0 (the launcher restarts the failed run): a resume may come */
    bool preempted;
    /* of "error": restarts_left (0: absent or invalid; restarts_bad: present and not an
     * integer from 0 to 2^31 - 1, read as 0 with a word: stop_record.py restarts_fault) */
    uint32_t restarts_left;
    bool restarts_bad;
    uint64_t steps, bye_steps, nonfinite, time_step;
    uint64_t expected, finished, abandoned; /* not_needed: the record's expected_end */
    /* MT_STOP_CONFIRMED by the record's "unfinished": the run ended ("end") having taken
     * every step this rank sent there (as many held as sent, the first and last held the
     * least and greatest sent), though it never read the BYE */
    bool taken;
    bool held_known; /* this simulation in the record's "unfinished": `held` steps */
    uint64_t held, sent; /* (sent: the count this rank's BYE carried there) */
    char code[16];
    char message[MT_STOP_MESSAGE_MAX + 1]; /* the record's reason's, whole */
} mt_stop_said;
/* What one receiver's file looked like when last read (it is read again only once it
 * changes), and whether its invalid record was warned of. Zeroed before the first look. */
typedef struct mt_stop_look {
    bool seen, warned, restarts_warned;
    unsigned long long ino;
    long long mtime, size;
} mt_stop_look;
/* What this rank sent a receiver: the count its BYE carries there, and the least and
 * greatest of those steps (spanned: some; client/stopped.py compares them with the
 * record's "unfinished" row: steps, first, last). */
typedef struct mt_stop_sent {
    uint64_t count, first, last;
    bool spanned;
} mt_stop_sent;
/* Of receiver `rank` of `world`, its BYE carrying `count` (c->steps: the steps sent). */
mt_stop_sent mt_stop_sent_of(const mt_client *c, size_t rank, size_t world, uint64_t count);
mt_stop_outcome mt_stop_record_decide(const char *dir, size_t rank, const char *endpoint,
                                      const char *run_id, uint64_t simulation_id,
                                      int client_rank, const mt_stop_sent *sent,
                                      mt_stop_look *look, mt_stop_said *out);
/* The close's question while a receiver is disconnected and its messages are not
 * delivered (client/stopped.py StopRecords.for_good): whether receiver `rank`'s record
 * says that the trainer is not coming back, whatever it lists and whether it is complete
 * (nothing undelivered is in it): MT_STOP_REFUSED (this simulation's non-finite sample),
 * MT_STOP_ENDED (ended or failed otherwise; not_needed when complete, on
 * expected_simulations), else MT_STOP_UNDECIDED (preempted, stopped by its owner, none,
 * another run's, invalid). */
mt_stop_outcome mt_stop_record_for_good(const char *dir, size_t rank, const char *endpoint,
                                        const char *run_id, uint64_t simulation_id,
                                        const mt_stop_sent *sent, /* (NULL: none said) */
                                        mt_stop_look *look, mt_stop_said *out);
/* stop_said.c: what the close says of a stop record's MT_STOP_REFUSED (MT_ESIMREFUSED) or
 * MT_STOP_ENDED (MT_ETIMEDOUT), in the Python client's words, composed from `s`'s fields.
 * mt_stop_record_fail: the receipt's (client/stopped.py StopRecords.decide), `whose` the
 * sentence's subject; mt_stop_record_undelivered: the delivery's (close_wait.c; closing.py
 * stop_first), one sentence, the reason first, then `what` ("batched data", "BYE",
 * "queued messages") was not delivered to `down` (the disconnected receivers, ", "
 * between; NULL: `endpoint`), naming `endpoint` (the record's receiver) too if it is
 * another, then the facts and what to do; without `bye` (a close after a failure) it is
 * a warning on stderr, c's error kept. */
mt_status mt_stop_record_fail(mt_client *c, mt_stop_outcome o, const mt_stop_said *s,
                              size_t rank, const char *endpoint, const char *whose);
/* stop_said.c: the one warning (stderr) of a BYE confirmed by `s->taken` (client/stopped.py
 * StopRecords.taken_warning, word for word): nothing lost, what a resume would need. */
void mt_stop_taken_warning(const mt_client *c, const mt_stop_said *s, size_t rank,
                           const char *endpoint, const char *whose);
/* stop_said.c: whether every receiver, connected once, has a record saying the run ended
 * having taken all this rank sent it (`taken`): a BYE undelivered lost nothing
 * (StopRecords.all_taken). */
bool mt_stop_all_taken(mt_client *c);
/* stop_said.c: whether a receiver's stop record of this run says that the trainer was
 * preempted (client/stopped.py StopRecords.preempted), and then, into `out`, what a
 * receiver gone is said to be gone for in place of "the trainer died": "the trainer was
 * preempted (MESSAGE; its stop record in DIR)", the words of the Python client's blocked
 * send and close. A read of each receiver's rendezvous file (none without a rendezvous). */
bool mt_stop_preempted_words(mt_client *c, char *out, size_t size);
/* the room for those words (a buffer of a cause): a message of 200 UTF-8 characters (up to
 * 800 bytes: mt_reason_line), a rendezvous path (up to PATH_MAX, 4096) and the words */
#define MT_CAUSE_SIZE (4096 + 1024)
mt_status mt_stop_record_undelivered(mt_client *c, mt_stop_outcome o, const mt_stop_said *s,
                                     size_t rank, const char *endpoint, const char *down,
                                     const char *what, bool bye);
/* stop_said.c: a blocked send's error (send_wait.c; client/send_wait.py SendWait._check
 * and timeout) when a receiver is disconnected and receiver `rank`'s record says
 * MT_STOP_REFUSED or MT_STOP_ENDED: the close's sentence on "time step N (`step`; NULL: a
 * message) and those queued before it", then `after` in parentheses, what ended the send
 * ("the send gave up after S s blocked: no trainer comes back there", "send_timeout=T s
 * ended the send", "the send gave up after S s, disconnected_timeout=D s"); the close's
 * status for that kind (MT_ESIMREFUSED, MT_ETIMEDOUT). */
mt_status mt_stop_record_send_gave_up(mt_client *c, mt_stop_outcome o, const mt_stop_said *s,
                                      size_t rank, const char *down, const uint64_t *step,
                                      const char *after);

#endif
