/* close_wait.h: the close's delivery of what is left (close_wait.c). Not installed; after
 * internal.h. */
#ifndef MT_CLOSE_WAIT_H
#define MT_CLOSE_WAIT_H

#include "internal.h"

/* Send the batches and (with `bye`) each receiver's BYE, wait until ZeroMQ let go of
 * every array and BYE and every receiver accepted the handshake, in slices, by *deadline
 * (< 0: none), which each progress puts c->close_timeout from then (close_wait.c); on
 * return, *deadline is where it ended. MT_OK with *failure NULL: delivered; MT_OK with
 * *failure "batched data", "BYE" or "queued messages": the deadline passed there (the
 * caller's message; *stuck: every receiver connected, its handshake done, none reading,
 * said in the receipt's words, mt_close_no_progress); else the
 * error, its message set, *failure "" (nothing more is waited for): a refused handshake
 * (MT_EENV), a stop record that ends the close (MT_ETIMEDOUT, MT_ESIMREFUSED), a restarted
 * trainer or a receiver gone (MT_ETIMEDOUT, c->receipt_restart 1 or 2: follow.c follows a
 * new run with a window), ZeroMQ's. */
mt_status mt_close_deliver(mt_client *c, bool bye, double *deadline, const char **failure,
                           bool *stuck, bool *capped);
/* close.c: the close, with BYE (mt_client_close) or, `failing`, without one, its
 * wait failed_close_timeout's (mt_client_fail: fail.c); the message of an error in
 * `message` (NULL: on stderr); c freed in every case. */
mt_status mt_close_as(mt_client *c, bool failing, char *message, size_t size);

/* close_failed.c: in a close without BYE (`bye` false: a time step left incomplete),
 * MT_ETIMEDOUT saying why (`whose`: "simulation S rank R"; `what`: what was not
 * delivered) as soon as a receiver is disconnected, never connected once its connect
 * failed, or not a receiver (TCP accepted, no handshake): none is waited for, as the
 * Python client's close after a failure; else MT_OK. Reads the monitors; never blocks. */
mt_status mt_close_unwaited(mt_client *c, const char *whose, const char *what);
/* Why socket i's receiver went when no stop record says: "the trainer died, or its node"
 * once a ZeroMQ handshake completed on it, else that the peer closed the connection
 * before any (a trainer killed as it started, or not a receiver: which is not known);
 * handshake_notes.py gone_cause, word for word. */
const char *mt_gone_cause(const mt_client *c, size_t i);
/* The bound of a close's delivery, in seconds (< 0: none), and in *setting the name its
 * message gives it: with `bye`, c->close_timeout ("close_timeout"); without, the lower
 * of it and c->failed_close_timeout ("failed_close_timeout" when that is the one), a
 * bound in all, progress or not (patience.py, closing.py: the Python close's rule). */
double mt_close_bound(const mt_client *c, bool bye, const char **setting);
/* What the close's message says after "within SETTING=T s to [...]" of how to change the
 * bound: "" for "close_timeout", a parenthesis for "failed_close_timeout". */
const char *mt_close_bound_how(const char *setting);
/* The close's status once its first error `first` (message `said`, a copy taken before
 * the delivery) is followed by the delivery's `then` (its message set): `first`, both
 * messages said ("SAID; and THEN"); `first` alone if `then` is MT_OK. */
mt_status mt_close_also(mt_client *c, mt_status first, const char *said, mt_status then);

/* close_cap.c: the close's cap in all, both phases (delivery.py capped_deadline). The
 * mt_now() past which no deadline goes: c->close_began plus MT_CLOSE_CAP_FACTOR close
 * timeouts (< 0: none, a close timeout of forever). */
double mt_close_cap(const mt_client *c);
/* The deadline once a progress would put it at `until`: never earlier than `deadline`,
 * never past `cap` (< 0: none); *capped: the cap held it back (say mt_close_capped_words). */
double mt_close_capped(double deadline, double until, double cap, bool *capped);
/* delivery.py capped_words ("close_timeout", mt_set_close_timeout), word for word. */
void mt_close_capped_words(char *out, size_t size, uint64_t simulation_id);
/* What a close's waiting notice names as its bound once the cap holds the deadline back:
 * "SETTER=T s, 10 times it in all: the close's cap" (delivery.py cap_bound, word for
 * word; `setter` "mt_set_close_timeout"). */
void mt_close_cap_bound(char *out, size_t size, const char *setter, double timeout);

/* close_notice.c: a close's one notice while it waits on a receiver (patience.py,
 * gave_up.py waits_for, receipts.py Rounds._tell: their words, the C setters named).
 * Seconds a receiver is disconnected (or silent) before the close says it waits on it:
 * 5, or half `disconnected_timeout` (< 0: none) if that is shorter (patience.py
 * notice_after). */
double mt_notice_after(double disconnected_timeout);
/* gave_up.py waits_for, action "close": up to `left` more seconds (< 0: no bound) for the
 * receiver to `what`, ended by `bound` ("mt_set_NAME=V s"), then, if it `follows`, up to
 * `follow` (< 0: no bound) for a restarted trainer in `rendezvous` (`resumed`: a stop
 * record said the trainer was preempted: for it to be resumed, --resume_from_checkpoint
 * latest); appended to `b` (unit_close_notice.c). */
void mt_waits_for(mt_buf *b, double left, const char *bound, const char *what,
                  const char *rendezvous, bool follows, double follow, double elapsed,
                  bool resumed);
/* The same for `action` "close" or "send" (a blocked send's notice: send_notice.c), whose
 * setter mt_set_ACTION_timeout a wait with no bound names. */
void mt_waits_for_action(mt_buf *b, const char *action, double left, const char *bound,
                         const char *what, const char *rendezvous, bool follows, double follow,
                         double elapsed, bool resumed);
/* The receipt phase's notice (receipts.py _tell): receiver `rank` (its follow socket
 * `follow_endpoint`) neither answered nor connected for `quiet` s, since `clock`; the
 * receipts' deadline `deadline_left` s away (inf: none), `capped` by the close's cap;
 * `elapsed` s of the receipt wait gone. Appended to `b` (unit_close_notice.c). */
void mt_receipt_notice_text(mt_buf *b, const mt_client *c, const char *whose, size_t rank,
                            const char *follow_endpoint, const char *clock, double quiet,
                            double deadline_left, bool capped, double elapsed);
/* That text on stderr, once per wait (receipt.c): silent `since` (mt_now()), the receipt
 * wait begun at `began`, its deadline `deadline` (mt_now() clock; inf: none). */
void mt_receipt_notice(const mt_client *c, const char *whose, size_t rank,
                       const char *follow_endpoint, double since, double deadline, bool capped,
                       double began);

#endif
