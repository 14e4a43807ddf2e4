/*
 * melissa_trainer.h: the C client of melissa-trainer (wire protocol version 2).
 *
 * A simulation streams its fields to the trainer's receivers over ZeroMQ, exactly as
 * the Python client `melissa_trainer.client.Client` does (docs/protocol.md): HELLO,
 * DATA (one frame up to 64 KiB, two frames above, the payload sent without a copy),
 * BATCH coalescing of small payloads (same size and delay bounds as the Python
 * client), BYE. A simulation started by the trainer's Launcher needs no configuration:
 * its id, parameters and the receivers' endpoints come from the environment
 * (MELISSA_TRAINER_SIMULATION_ID, MELISSA_TRAINER_PARAMETERS,
 * MELISSA_TRAINER_ENDPOINTS or MELISSA_TRAINER_RENDEZVOUS). Receivers with CURVE keys:
 * their public key by mt_set_curve_server_key or in MELISSA_TRAINER_KEY, with
 * MELISSA_TRAINER_ENDPOINTS or mt_set_endpoints (a key not 40 Z85 characters: MT_EINVAL
 * from mt_set_curve_server_key, MT_EENV at mt_client_start from the variable); with a
 * rendezvous directory, the key each rank_{r}.json file publishes (as the Python client:
 * MELISSA_TRAINER_KEY is not read then).
 *
 *     mt_client *c;
 *     uint64_t shape[2] = {64, 64};
 *     if (mt_client_create(&c) != MT_OK) abort();
 *     mt_declare_field(c, "temperature", MT_FLOAT32, 2, shape);
 *     if (mt_client_start(c) != MT_OK) { fprintf(stderr, "%s\n", mt_client_error(c)); ... }
 *     for (uint64_t t = 0; t < steps; ++t) {
 *         step(u);
 *         mt_send(c, t, "temperature", MT_FLOAT32, u, 64 * 64);
 *     }
 *     mt_client_close(c);           // flush, BYE, wait for delivery, free
 *
 * MPI: include melissa_trainer_mpi.h and call mt_client_start_mpi(c, comm) instead of
 * mt_client_start; each rank declares its part of every field (mt_declare_part) and
 * sends that part. The library itself does not link MPI: the MPI calls are in that
 * header, compiled with the user's MPI.
 *
 * Errors: every function returns an mt_status (MT_OK = 0). mt_strerror(status) names
 * the kind of error; mt_client_error(c) gives the message of c's last error, which
 * names what was wrong and how to fix it (e.g. "field 'temperature' is declared float32,
 * mt_send was given float64 (convert the data to float32, dtype MT_FLOAT32)"). A client
 * whose send failed on the transport (MT_ETIMEDOUT, MT_EZMQ): close it with mt_client_abort.
 *
 * Thread-safety: an mt_client belongs to one thread of the simulation (the one that
 * calls its functions; the library runs one thread of its own per client, which sends
 * batches older than the batch delay, under the client's lock). Two clients in one
 * process share nothing (no global state); mt_strerror is thread-safe.
 *
 * Column-major (Fortran) arrays: the protocol carries C-ordered (row-major) arrays. A
 * Fortran array a(nx, ny) sent as is has, in C order, the shape {ny, nx}: declare the
 * shape reversed (the Fortran module does so).
 */
#ifndef MELISSA_TRAINER_H
#define MELISSA_TRAINER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MT_PROTOCOL_VERSION 2
#define MT_VERSION_MAJOR 0
#define MT_VERSION_MINOR 1
#define MT_VERSION_PATCH 0

/* Status codes: 0 is success; mt_strerror names each. */
typedef enum mt_status {
    MT_OK = 0,
    MT_EINVAL = 1,      /* a bad argument (a null pointer, a bad name, a bad value) */
    MT_EFIELD = 2,      /* a field not declared, declared twice, or missing from a step */
    MT_EDTYPE = 3,      /* a dtype other than the field's declared one */
    MT_ESHAPE = 4,      /* a count other than the field's (part's) element count */
    MT_ESTATE = 5,      /* called in the wrong state (declare after start, send before) */
    MT_EENV = 6,        /* configuration to fix (mt_strerror: "a MELISSA_TRAINER_*
                         * variable, an endpoint or a CURVE key missing, malformed or
                         * refused"): a variable missing or malformed, a CURVE key
                         * (MELISSA_TRAINER_KEY, a rendezvous file) a receiver refused, or
                         * (mt_predict) one a serving endpoint refused or a serve file's
                         * that is not one, an endpoint of the variable not of a form to
                         * connect to or not a serving one, a host name that does not
                         * resolve */
    MT_ERENDEZVOUS = 7, /* the rendezvous directory was not complete in time */
    MT_ETIMEDOUT = 8,   /* a send or the close did not complete in time; or (external
                         * mode) the close found the trainer gone or restarted before it
                         * confirmed this rank's BYE: its last steps may be lost; or a
                         * send or the close found the trainer stopped for good (its stop
                         * record: ended or failed), at once */
    MT_EZMQ = 9,        /* a ZeroMQ call failed (the message has zmq_strerror's text) */
    MT_ENOMEM = 10,     /* out of memory */
    MT_EMPI = 11,       /* an MPI call failed, or ranks disagree (melissa_trainer_mpi.h) */
    MT_EREFUSED = 12,   /* mt_predict: the trainer refused (mt_predict_refusal says why) */
    MT_EREPLY = 13,     /* mt_predict: the trainer's reply broke the protocol */
    MT_ESIMREFUSED = 14, /* mt_client_close, mt_send, mt_predict (external mode, told
                          * while it runs): a receiver refused this simulation (its HELLO:
                          * other fields than the study's, ...) and dropped all it sent,
                          * or refused every sample of it as non-finite (NaN, Inf), or
                          * (its stop record; mt_send, mt_client_close) stopped on one of
                          * its non-finite samples; the message gives the reason and fix */
    MT_EUNREACHABLE = 15 /* mt_client_start: the rendezvous publishes a loopback endpoint
                          * (tcp://127.x, localhost, ::1) of another machine or network
                          * namespace than this process's (its file's "loopback_scope"):
                          * no connection could ever be made, so it is said at once, before
                          * anything is sent; the message names both hosts and the fix (the
                          * Python client's ReceiverUnreachable). Endpoints given directly
                          * (mt_set_endpoints, MELISSA_TRAINER_ENDPOINTS) are not checked */
} mt_status;

/* Element types: the protocol's dtype codes (docs/protocol.md, section 9). */
typedef enum mt_dtype {
    MT_FLOAT32 = 1,
    MT_FLOAT64 = 2,
    MT_FLOAT16 = 3,
    MT_INT8 = 4,
    MT_INT16 = 5,
    MT_INT32 = 6,
    MT_INT64 = 7,
    MT_UINT8 = 8,
    MT_UINT16 = 9,
    MT_UINT32 = 10,
    MT_UINT64 = 11,
    MT_BOOL = 12
} mt_dtype;

/* When the caller may write again into an array it sent (large payloads, sent without
 * a copy; payloads up to 64 KiB are copied and free at once whatever the mode). */
typedef enum mt_reuse {
    MT_REUSE_IMMEDIATE = 0, /* default: mt_send returns once ZeroMQ has released it */
    MT_REUSE_NEXT_SEND = 1  /* it stays untouched until the next mt_send/flush/close
                               returns (double buffering: the transfer of step t overlaps
                               the computation of step t+1) */
} mt_reuse;

typedef struct mt_client mt_client; /* opaque */

/* The text of a status ("MT_ESHAPE: wrong element count", ...); never NULL. */
const char *mt_strerror(int status);
/* The message of c's last error ("" if none); valid until c's next call. */
const char *mt_client_error(const mt_client *c);
/* The library's version, "MAJOR.MINOR.PATCH". */
const char *mt_version(void);

/* -- set-up: create, configure, declare, start ------------------------------------ */

/* A new client with the defaults; *out is NULL on failure. */
mt_status mt_client_create(mt_client **out);

/* Optional settings, before mt_client_start (each overrides the environment). */
mt_status mt_set_simulation_id(mt_client *c, uint64_t simulation_id);
/* comma-separated; with CURVE, the receivers' key by mt_set_curve_server_key or in
 * MELISSA_TRAINER_KEY */
mt_status mt_set_endpoints(mt_client *c, const char *endpoints);
mt_status mt_set_rendezvous(mt_client *c, const char *directory, double timeout_s);
mt_status mt_set_parameter(mt_client *c, const char *name, double value); /* in order */
/* Seconds an mt_send may block on back-pressure (< 0 or +inf: forever, the default). A
 * bound past ZeroMQ's int milliseconds (24.8 days) is capped there, as the close's.
 * Whatever it is, a send blocked on a receiver disconnected for the disconnected timeout
 * fails (mt_set_disconnected_timeout): a trainer gone is not back-pressure. A send that
 * it ends (MT_ETIMEDOUT) says why: a stop record of this run saying the trainer ended or
 * failed first (the close's sentence, then "(send_timeout=T s ended the send)"; its
 * status, MT_ESIMREFUSED if this simulation's non-finite sample stopped it), else what
 * the connections tell (a receiver disconnected: "the trainer was preempted (...)" if
 * its record says so), back-pressure only when every receiver is connected. */
mt_status mt_set_send_timeout(mt_client *c, double seconds);
/* The default of mt_set_close_timeout, in seconds: the Python client's too
 * (melissa_trainer/client/tuning.py DEFAULT_CLOSE_TIMEOUT; tests/c/
 * test_c_close_default.py checks that they are equal). Every wait it bounds is one
 * *without progress*: a trainer taking the close's messages, or its receipts showing it
 * ingest more steps, moves the deadline; so a long bound costs nothing with a trainer
 * alive and keeps a trainer paused that long (SIGSTOP, a suspended job, a long
 * checkpoint) from losing the steps still queued, while a trainer stuck still ends the
 * close after it. */
#define MT_DEFAULT_CLOSE_TIMEOUT 1800.0
/* mt_client_close lasts at most this many close timeouts in all from its start, progress
 * or not: one budget for the delivery of what is queued and the BYE and the trainer's
 * receipts, so a receiver that takes a message, or ingests a step, now and then does not
 * hold the exit for ever (melissa_trainer/client/delivery.py CLOSE_CAP_FACTOR, the same;
 * a restarted trainer followed starts the budget again). */
#define MT_CLOSE_CAP_FACTOR 10
/* Seconds mt_client_close waits without progress (default MT_DEFAULT_CLOSE_TIMEOUT; < 0
 * or +inf: forever): for the delivery of what is queued and the BYE (progress: a message
 * the socket accepted, a frame ZeroMQ let go of; MT_CLOSE_CAP_FACTOR times it in all),
 * then for the trainer's receipts (the steps it holds growing; within the same cap in
 * all). Each progress counts it again from then. */
mt_status mt_set_close_timeout(mt_client *c, double seconds);
/* The default of mt_set_failed_close_timeout, in seconds: the Python client's
 * (melissa_trainer/client/tuning.py DEFAULT_FAILED_CLOSE_TIMEOUT; tests/c/
 * test_c_failed_close_timeout.py checks that they are equal). */
#define MT_DEFAULT_FAILED_CLOSE_TIMEOUT 10.0
/* Seconds a close without BYE (a time step left incomplete: MT_EFIELD, the run did not
 * finish) waits in all, progress or not, for what is queued (default
 * MT_DEFAULT_FAILED_CLOSE_TIMEOUT; < 0 or +inf: only the close timeout bounds it): the
 * lower of it and the close timeout bounds that wait, as ClientTuning.failed_close_timeout
 * bounds the Python client's close(bye=False). The launcher runs the simulation again,
 * which sends every step again, so a slow trainer does not hold the failed solver's exit.
 * A receiver disconnected, never connected, or not a receiver is not waited for at all. */
mt_status mt_set_failed_close_timeout(mt_client *c, double seconds);
/* Batching: payloads of at most bytes/2 are coalesced into BATCH messages of about
 * `bytes` per field and receiver, held at most `delay_s` (defaults 65536 and 0.02,
 * as the Python client; bytes = 0 sends every payload as its own DATA). */
mt_status mt_set_batching(mt_client *c, size_t bytes, double delay_s);
mt_status mt_set_sndhwm(mt_client *c, int messages); /* default 1000 */
mt_status mt_set_reuse(mt_client *c, mt_reuse mode);
/* This process's rank among the simulation's `size` ranks (default 0 of 1). The MPI
 * entry point sets it from the communicator. */
mt_status mt_set_rank(mt_client *c, int rank, int size);

/* Declare a field: its name, element type and GLOBAL shape (C order; ndim 0 to 8,
 * ndim 0 a scalar). Fields are sent in declaration order in HELLO. */
mt_status mt_declare_field(mt_client *c, const char *name, mt_dtype dtype, int ndim,
                           const uint64_t *shape);
/* With several ranks: this rank's contiguous part [offset, offset + count) of the
 * field's flattened global array (count 0: this rank sends none of it). The MPI entry
 * point computes the offsets from the counts (mt_declare_part_count). */
mt_status mt_declare_part(mt_client *c, const char *name, uint64_t offset, uint64_t count);
/* This rank's element count of a field, its offset to be computed by
 * mt_client_start_mpi (an exclusive scan over the ranks, in rank order). */
mt_status mt_declare_part_count(mt_client *c, const char *name, uint64_t count);

/* Read what was not set from the environment, wait for the rendezvous if needed,
 * connect one PUSH socket per receiver and queue HELLO to each. Checks everything
 * first (names, shapes, parts, ids; loopback endpoints of a rendezvous published on
 * another machine or network namespace: MT_EUNREACHABLE) and fails before connecting. */
mt_status mt_client_start(mt_client *c);

/* -- streaming ---------------------------------------------------------------------- */

/* Send this rank's part of one field at one time step: `count` elements of `dtype`
 * (both must be the declared ones), C-ordered. Routed to receiver time_step % W. A
 * step is complete once every declared field (with a non-empty part) was sent for
 * it; sending another time step before, or closing, is an MT_EFIELD error naming the
 * missing field. Blocks on back-pressure (see mt_set_send_timeout), as long as the
 * receiver stays connected (a trainer slow or paused); a receiver disconnected for the
 * disconnected timeout (a trainer killed, its node lost) makes it fail, MT_ETIMEDOUT,
 * and with a replay window a restarted trainer is followed from within the send. While a
 * receiver is disconnected, a blocked send reads the receivers' stop records (external
 * mode): one of this run saying that the trainer ended or failed (not preempted) fails
 * the send at once, whatever the disconnected and follow timeouts, in the close's words
 * (the reason first; "... (the send gave up after S s blocked: no trainer comes back
 * there)"): MT_ESIMREFUSED if it stopped on this simulation's non-finite sample, else
 * MT_ETIMEDOUT; only mt_client_abort may follow. A send that gives up otherwise (the
 * send or disconnected timeout) reads the records again as it does, and one saying so
 * leads its message too ("(send_timeout=T s ended the send)", "(the send gave up after
 * S s, disconnected_timeout=D s)").
 * Fields of a step may come in any order; the same field twice in a step, or another
 * step before this one is complete, is MT_EFIELD (nothing sent, the client usable). A
 * step may be sent again later (BYE counts distinct steps). For a field whose part on
 * this rank is empty (count 0), the call sends nothing. Payloads up to 64 KiB are
 * copied (into a batch, or one DATA frame); larger ones leave without a copy and
 * mt_send waits as mt_set_reuse says. MT_ETIMEDOUT / MT_EZMQ: only mt_client_abort
 * may follow; so after MT_EENV: the receiver of the step refused the client's handshake
 * (a CURVE key it does not hold, a key for a receiver without CURVE, none for one with
 * it: ZeroMQ delivers nothing to it), the message naming its endpoint and the fix.
 * With a replay window (mt_set_replay_bytes; external mode), the first call of a step
 * copies this rank's parts into it as they are sent, and looks (at most once a second)
 * whether the rendezvous names a restarted trainer: it then follows it before sending
 * (asks which steps its checkpoint holds, reconnects, sends the others again: it may
 * take that long), or fails with MT_ETIMEDOUT saying why and to run the simulation
 * again (a step needed that left the window, a trainer that abandoned the simulation,
 * no answer within 30 s).
 * A solver started by hand whose endpoints came from a rendezvous (where the close asks
 * whether the trainer took it) is asked that while it runs too, without waiting: the
 * first call of a step takes one non-blocking step of the question when due, and once
 * a receiver's refusal came back (the reason holding for what this client declared),
 * that call and every later one (and every mt_predict) return MT_ESIMREFUSED with the
 * close's sentence (the receiver, its reason, the fix; written to stderr once), sending
 * nothing; the close returns it again (docs/protocol.md, section 17a). */
mt_status mt_send(mt_client *c, uint64_t time_step, const char *field, mt_dtype dtype,
                  const void *data, uint64_t count);
/* Send the batches held now (they otherwise leave within the batch delay), and wait
 * until ZeroMQ has released every large array sent. Blocks on back-pressure, bounded by
 * the send timeout. Looks at the stop records first, as mt_send opening a step does: a
 * trainer that stopped for good fails it with mt_send's status and words ("any
 * messages still queued at this flush" for the step). */
mt_status mt_flush(mt_client *c);

/* Flush, send BYE to every receiver, wait for delivery (close timeout), free c.
 * Returns MT_ETIMEDOUT if ZeroMQ had to drop messages, MT_EENV if a receiver refused the
 * handshake (as mt_send; nothing sent to it was delivered; found without waiting out the
 * close timeout); c is freed in every case.
 * A solver started by hand (MELISSA_TRAINER_ATTEMPT unset) whose endpoints came from a
 * rendezvous then asks each receiver's follow socket whether it ingested this rank's BYE
 * (docs/protocol.md, section 17b; as the Python client's close): a BYE that left is not
 * a BYE the trainer read (a trainer killed meanwhile never had the last steps). It
 * returns MT_OK only once every receiver confirmed it (or that the simulation finished
 * there); MT_ESIMREFUSED if one refused the HELLO (fields other than the study's, ...;
 * everything it sent was dropped), the message naming the receiver, its reason and the
 * fix, or if the trainer refused every sample as non-finite (some: a warning on stderr);
 * a restarted trainer (the rendezvous names a new run; or a receiver gone, no answer and
 * no connection to its follow socket for the disconnected timeout, and a new run within
 * the follow timeout) is followed with a replay window (mt_set_replay_bytes: the steps
 * its checkpoint lacks sent again, BYE again) and asked in turn; MT_ETIMEDOUT if a
 * receiver is gone and no new run came, one came and the solver has no window (or the
 * window lacks a step, the message naming mt_set_replay_bytes), or the receivers kept
 * saying "not yet" with no progress (the steps they hold not growing) for the close
 * timeout (counted from the question and from each progress): the message
 * says the BYE was not confirmed, that the steps may be lost, and to run the simulation
 * again with the same MELISSA_TRAINER_SIMULATION_ID once the trainer is back.
 * A trainer whose receivers do not list 13 in their rendezvous files' "follow_kinds" (an
 * older one) is asked instead whether it took the simulation (section 17a):
 * MT_ESIMREFUSED if one refused it; one that does not say within 10 s leaves MT_OK,
 * with a warning on stderr; a rendezvous rewritten or marked stopped since, or without
 * follow sockets, is not asked. A launched simulation asks nothing (the launcher runs
 * a failed one again; its refusal is the study's record).
 * Closing with a step incomplete returns MT_EFIELD and sends no BYE (what was sent is
 * delivered to the receivers connected; one disconnected, never connected or not a
 * receiver is not waited for: the message then says why after MT_EFIELD's, as the Python
 * client's close after a failure). The message of an error is written to stderr (c is
 * gone); use mt_client_close_message to get it instead. Blocks until delivered and
 * confirmed, or until the close timeout passes without progress (its deadline moves
 * whenever the receivers take a message or hold more of this simulation's steps: not a
 * bound in all), or sooner on a receiver disconnected (mt_set_disconnected_timeout). */
mt_status mt_client_close(mt_client *c);
/* Free c at once without BYE (the run failed: the trainer must not count it as
 * finished). Sockets closed with linger 0: what the client still batches
 * (mt_set_batching) or ZeroMQ still queues is dropped, never trained on: for a solver
 * that must die now; mt_client_fail delivers it first. NULL is a no-op. */
void mt_client_abort(mt_client *c);
/* The run failed, what it sent is kept: as the Python client's close(bye=False) (what
 * leaving its `with` block by an exception does). Writes `reason` (NULL or "": nothing)
 * to stderr ("melissa_trainer: mt_client_fail: simulation S rank R failed: <reason>; no
 * BYE sent (the run did not finish)": a launched simulation's log, quoted by the study's
 * failure report), sends the batches held, delivers what is queued to the receivers
 * connected, and frees c, sending no BYE: the trainer trains on the samples it received
 * and does not count the simulation finished (a launcher runs it again, and the
 * receivers keep one copy of each step sent again). The wait is mt_close_bound's
 * without BYE: mt_set_failed_close_timeout in all (default 10 s), none for a receiver
 * disconnected, never connected or not a receiver. A time step left incomplete is no
 * error here. Returns MT_OK once delivered; MT_ETIMEDOUT if some was not (the message
 * says what and to whom, in mt_client_close's words without BYE); MT_EENV for a
 * receiver that refused the handshake; after a send's MT_ETIMEDOUT / MT_EZMQ nothing is
 * delivered (MT_ESTATE, as mt_client_abort). The message of an error goes to stderr
 * (mt_client_fail_message: into `message` instead). The process then exits non-zero, so
 * that a launcher counts the simulation failed. NULL c: MT_EINVAL. */
mt_status mt_client_fail(mt_client *c, const char *reason);
mt_status mt_client_fail_message(mt_client *c, const char *reason, char *message, size_t size);

/* -- accessors (after mt_client_start) ---------------------------------------------- */

uint64_t mt_client_simulation_id(const mt_client *c);
int mt_client_receivers(const mt_client *c); /* W */
/* The parameter `name` given by the launcher (MELISSA_TRAINER_PARAMETERS) or set;
 * MT_EINVAL with a message listing the known names if there is none, or, when there are
 * no parameters at all (no MELISSA_TRAINER_PARAMETERS: started by hand), naming the fix. */
mt_status mt_client_parameter(const mt_client *c, const char *name, double *value);

/* -- additions (after the original API) --------------------------------------------- */

/* The receiver's bound on one field's size in bytes (default 2^30, as the Python
 * client's max_message_bytes): mt_client_start fails on a bigger field, which the
 * receiver would reject. Raise it here and in the receiver together. */
mt_status mt_set_max_message_bytes(mt_client *c, uint64_t bytes);

/* mt_client_close, with the message of its error (or "") written into `message`
 * (`size` bytes, truncated); mt_client_close itself writes that message to stderr,
 * since c (and mt_client_error(c)) is gone when it returns. */
mt_status mt_client_close_message(mt_client *c, char *message, size_t size);

/* Seconds a blocked mt_send / mt_flush and the close's receipt (external mode, see
 * mt_client_close) wait for a receiver that is not connected (neither answers, for the
 * receipt) before they call it gone (default 60, as the Python client's
 * disconnected_timeout; < 0 or +inf: never, the send and close timeouts bound them). A
 * receiver whose process keeps its connection (SIGSTOP) is waited for, as paused. A send
 * with a replay window waits the follow timeout more for a restarted trainer. It bounds
 * each TCP connect too (at least 2 s, ZMQ_CONNECT_TIMEOUT): a host that neither accepts
 * nor refuses counts as disconnected since mt_client_start, not after the kernel's ~2
 * minutes (the value when the sockets connect: mt_client_start, a follow). */
mt_status mt_set_disconnected_timeout(mt_client *c, double seconds);

/* The replay window, in bytes, of a solver started by hand (external mode: endpoints from
 * a rendezvous, MELISSA_TRAINER_ATTEMPT unset): copies of the last steps this rank sent,
 * so that it follows a trainer restarted from its checkpoint (SIGTERM or SIGKILL, then
 * --resume_from_checkpoint): it notices the new run in the rendezvous, asks each resumed
 * receiver which of its steps the checkpoint holds, says HELLO again and sends the others
 * again (docs/protocol.md 17). Default: $MELISSA_TRAINER_REPLAY_BYTES, else 64 MiB in
 * external mode and 0 otherwise (a launched simulation is run again by its launcher); 0:
 * no window, no following (a restarted trainer fails the close, saying to run the
 * simulation again). A step needed again that has left the window fails the send or the
 * close (MT_ETIMEDOUT) naming this setting. The bound counts the copies and the 8-byte
 * index of each step kept. */
mt_status mt_set_replay_bytes(mt_client *c, uint64_t bytes);

/* Seconds a solver with a replay window, finding its trainer gone at the close (no answer
 * and no connection for the disconnected timeout), waits for a restarted one to publish
 * in the rendezvous before it gives up (default 120, as the Python client's
 * follow_timeout; < 0 or +inf: no bound). */
mt_status mt_set_follow_timeout(mt_client *c, double seconds);

/* The receivers' CURVE public key, 40 Z85 characters (as zmq_curve_keypair writes it;
 * the Python client's Client(curve_server_key=...)), before mt_client_start: for the
 * endpoints of mt_set_endpoints or MELISSA_TRAINER_ENDPOINTS it takes precedence over
 * MELISSA_TRAINER_KEY (not read then). Checked here, as the Python client checks it: a
 * key of another length, with a character outside Z85, or whose 5-character groups
 * overflow a 32-bit word is MT_EINVAL, nothing kept, the message in the Python client's
 * words ("curve_server_key='...' must be 40 characters, not 39: the trainer's CURVE
 * public key in Z85, ..."). With a rendezvous directory (mt_set_rendezvous,
 * MELISSA_TRAINER_RENDEZVOUS), whose files publish the running trainer's key (a restarted
 * one's, when followed), it must be the key every file publishes: another (or a
 * receiver without CURVE) is MT_EINVAL at mt_client_start, before anything connects, the
 * message naming the published keys and saying to drop mt_set_curve_server_key. NULL:
 * none (the default). */
mt_status mt_set_curve_server_key(mt_client *c, const char *key);

/* For melissa_trainer_mpi.h (and other front ends), before mt_client_start: the
 * declared fields by index (declaration order), each field's global element count,
 * this rank's part count (returns 0: no part declared, 1: a count only
 * (mt_declare_part_count), 2: offset and count (mt_declare_part), -1: bad index), and
 * the setter of a part's offset once computed. mt_client_set_error stores `message` as
 * c's error message and returns `status` (for errors found outside the library). */
size_t mt_field_count(const mt_client *c);
const char *mt_field_name(const mt_client *c, size_t index);
uint64_t mt_field_size(const mt_client *c, size_t index);
int mt_field_part_count(const mt_client *c, size_t index, uint64_t *count);
mt_status mt_set_part_offset(mt_client *c, size_t index, uint64_t offset);
mt_status mt_client_set_error(mt_client *c, mt_status status, const char *message);
/* For melissa_trainer_mpi.h (and the Fortran mt_start_mpi), which compare it across the
 * ranks: a hash of the declared fields (names, order, dtypes, global shapes), in
 * [0, 2**62), equal on ranks that declared the same; and the error of a rank whose hash
 * differs from another's: stores, on c, the words naming this rank's declaration (as the
 * Python client's: "the ranks of the communicator declare different fields: this rank
 * (1 of 2) declares 'u' float64 (4, 2). ...") and returns MT_EMPI. */
int64_t mt_fields_mark(const mt_client *c);
mt_status mt_fields_differ(mt_client *c, int rank, int ranks);
/* For melissa_trainer_mpi.h (and the Fortran mt_start_mpi), which poll their first
 * collective (MPI_Iallreduce) so that a rank whose peers never call the MPI start does
 * not wait there for ever: the bound in seconds (the rendezvous timeout, at least 10 s;
 * +inf: none), a pause of 1 ms between two polls, and the error of a rank that waited
 * `waited_s` in vain (MT_EMPI; its words name the C functions, or with `fortran` != 0
 * the Fortran ones: "mt_client_start_mpi: this rank (0 of 2) waited 60 s for the other
 * 1 rank(s) of the communicator to call mt_client_start_mpi too, ..."). */
double mt_mpi_join_timeout(const mt_client *c);
void mt_mpi_join_pause(void);
mt_status mt_mpi_never_joined(mt_client *c, int rank, int ranks, double waited_s, int fortran);

/* -- predictions from the trainer's current model (docs/protocol.md, section 16) ------- */

/* While it trains, a trainer with a ServingHook answers prediction requests: named input
 * arrays in, the model's output arrays and its version (the global step) out. The same
 * call as the Python client's Client.predict:
 *
 *     uint64_t n = 64, version;
 *     mt_input in = {"u", u, &n, MT_FLOAT32, 1};
 *     mt_output out = {.name = "prediction", .data = guess, .capacity = 64,
 *                      .dtype = MT_FLOAT32};
 *     mt_status st = mt_predict(c, &in, 1, &out, 1, 0.5, &version);
 *     if (st == MT_ETIMEDOUT || st == MT_EREFUSED || st == MT_EREPLY)
 *         memcpy(guess, u, n * sizeof(float)); // the simulation's own fallback
 *     else if (st != MT_OK) {                  // a mistake to fix: guess not written
 *         fprintf(stderr, "%s\n", mt_client_error(c));
 *         mt_client_fail(c, "mt_predict: inputs or outputs that are not the trainer's");
 *         return 1;
 *     }
 *
 * Where: the serving socket of training rank simulation_id % W, read from serve_{r}.json
 * in the rendezvous directory (mt_set_rendezvous, else MELISSA_TRAINER_RENDEZVOUS; with
 * the inputs it takes, the run's id and its CURVE key), or from
 * mt_set_serve_endpoints / MELISSA_TRAINER_SERVE_ENDPOINTS (comma-separated, in rank
 * order), with the servers' CURVE public key in MELISSA_TRAINER_SERVE_KEY when they use
 * CURVE (as the Python client: ignored with a serve file, which has its own; a key that
 * is not 40 Z85 characters is MT_EENV, at the request). Looked up at the first request
 * and again after a failure (a restarted trainer publishes a new endpoint); until it is
 * published a request waits, up to its timeout, unless a trainer served this simulation
 * there before and has removed its serve file (it stopped): then the request fails at
 * once. A serve file that publishes a loopback endpoint (tcp://127.x, localhost, ::1, or a
 * host name resolved to loopback here) of another machine or network namespace than this
 * process's (its "loopback_scope") fails each request at once too, MT_ETIMEDOUT (what the
 * fallback takes), naming both hosts and the fix (the Python client's PredictUnreachable;
 * written to stderr once). The request names the client's run id (a trainer of another
 * run refuses it).
 * Not collective: with MPI, each rank that asks sends whole inputs. */

/* An input array: its name, values (C order), shape (C order; NULL for ndim 0), dtype. */
typedef struct mt_input {
    const char *name;
    const void *data;
    const uint64_t *shape;
    mt_dtype dtype;
    int ndim;
} mt_input;

/* An output array: the caller names it, gives its buffer (`capacity` elements of
 * `dtype`); mt_predict writes the values, their shape (C order) and element count. */
typedef struct mt_output {
    const char *name;
    void *data;
    uint64_t capacity;
    mt_dtype dtype;
    int ndim;           /* out */
    uint64_t shape[8];  /* out */
    uint64_t count;     /* out: elements written */
} mt_output;

/* Refusal reasons (REFUSED's codes): what mt_predict_refusal returns. */
typedef enum mt_refusal {
    MT_REFUSAL_NONE = 0,        /* the last mt_predict was not refused */
    MT_REFUSAL_BUSY = 1,        /* requests outpace the model: retry after retry_after_s */
    MT_REFUSAL_NOT_SERVING = 2, /* no model served: before training starts, after it ends */
    MT_REFUSAL_WRONG_RUN = 3,   /* the request names another run than the trainer's */
    MT_REFUSAL_BAD_REQUEST = 4, /* the inputs are not the ones the trainer serves, or hold
                                 * NaN or Inf (its nonfinite policy not 'accept') */
    MT_REFUSAL_FAILED = 5       /* the trainer's inference function raised on it */
} mt_refusal;

/* Ask the trainer's current model for a prediction of `inputs` (each declared input
 * once, of its dtype and shape; one sample: no batch dimension) and copy the outputs
 * named in `outputs` into their buffers; *version (may be NULL) is the model's global
 * step. Blocks at most `timeout_s` seconds (> 0) in all, the lookup included; after
 * mt_client_start. Returns, without changing the client's streaming state:
 *   MT_ETIMEDOUT   no answer in time (the trainer not serving yet, busy, restarting or
 *                  gone); the next call looks the endpoint up again. A trainer whose
 *                  process is gone is not waited for: a request whose connection drops
 *                  while it waits, one whose endpoint refuses the connection (nothing
 *                  listens there: a dead trainer's serve file) and one whose serve file
 *                  its trainer removed return at once (a socket monitor says so; only
 *                  an unreachable host, a node gone, takes the whole timeout, and says
 *                  "no answer from HOST:PORT"; its connect is bounded by the timeout,
 *                  at least 2 s). After
 *                  such a failure the calls of a backoff (0.05 s, doubling to 1 s while
 *                  the trainer stays away) return MT_ETIMEDOUT at once without dialling
 *                  (no socket per call in a solver's loop); mt_client_error says why.
 *   MT_EENV        the serving endpoint refused the client's handshake, as soon as that
 *                  is certain (not at the timeout): a CURVE key that is not its own
 *                  (MELISSA_TRAINER_SERVE_KEY), none for a CURVE server, one for a server
 *                  without CURVE; the message names the endpoint, the key's source and
 *                  the fix. A mistake to fix, not a fallback (the Python client raises
 *                  ValueError). A serve file's key refused without detail may be stale (a
 *                  restarted trainer's): that request waits its timeout (MT_ETIMEDOUT),
 *                  and the next one reads the serve file again. Also at once: an
 *                  endpoint given that answers but is not a serving socket (the stream
 *                  receiver's, the `endpoint` of rank_{r}.json, not serve_{r}.json's; a
 *                  serve file's such endpoint, a stale one, is MT_ETIMEDOUT at once), and
 *                  a host name that does not resolve; the message names the endpoint and
 *                  the fix. Also at once: an endpoint of
 *                  MELISSA_TRAINER_SERVE_ENDPOINTS (this simulation's) not of a form to
 *                  connect to (as mt_set_serve_endpoints checks it), and a serve file's
 *                  curve_public_key that is not a 40-character Z85 key (or not a string:
 *                  "not 123 (it must be a str, not int)"), the message naming the file.
 *   MT_EREFUSED    the trainer refused: mt_predict_refusal gives the reason and the
 *                  wait it suggests, mt_client_error the trainer's detail.
 *   MT_EREPLY      a reply that breaks the protocol (nothing written), or a malformed
 *                  answer to the question of the inputs (the endpoint named, nothing sent).
 *   MT_EFIELD / MT_EDTYPE / MT_ESHAPE / MT_EINVAL   inputs that are not the trainer's
 *                  (checked before anything is sent, whatever their size: against the
 *                  serve file's inputs, or, endpoints given, those the trainer describes
 *                  when asked, once per connection; a trainer from before that question
 *                  does not say: MT_EINVAL once it refused them, its detail in
 *                  mt_client_error) or bad arguments; for outputs: one not in the reply, of another
 *                  dtype, or bigger than its capacity (nothing written, *version set).
 *   MT_ESIMREFUSED the client was told the trainer refused this simulation (mt_send):
 *                  nothing asked; not one to fall back from.
 * The first three are the ones to fall back from: the simulation keeps running. A
 * failed exchange closes the socket (a late answer is dropped; ZMQ_IMMEDIATE: a request
 * is never queued for a trainer that is not connected). */
mt_status mt_predict(mt_client *c, const mt_input *inputs, size_t n_inputs,
                     mt_output *outputs, size_t n_outputs, double timeout_s,
                     uint64_t *version);
/* Why the last mt_predict was refused (MT_REFUSAL_NONE if it was not), and the seconds
 * the trainer suggests waiting before the next request (0: no suggestion; may be NULL). */
mt_refusal mt_predict_refusal(const mt_client *c, double *retry_after_s);
/* Serving endpoints (comma-separated, in training-rank order), instead of
 * MELISSA_TRAINER_SERVE_ENDPOINTS and the rendezvous directory; any time. Other
 * endpoints than the ones set before: the next mt_predict dials them (a backoff after a
 * trainer gone ended). The same ones again (blanks around each aside; a solver may set
 * them at every step) change nothing: the backoff goes on. Their CURVE key, if any:
 * MELISSA_TRAINER_SERVE_KEY. Each is checked here, as the Python Predictor checks its
 * endpoint=: tcp://[SOURCE;]HOST:PORT (HOST not *, PORT 1 to 65535), ipc://PATH or
 * inproc://NAME (other transports are ZeroMQ's to judge, at the request); else
 * MT_EINVAL, nothing kept, in its words ("mt_set_serve_endpoints: endpoint 'tcp://h'
 * has no port: give tcp://HOST:PORT (the trainer's serve_N.json)"). */
mt_status mt_set_serve_endpoints(mt_client *c, const char *endpoints);

#ifdef __cplusplus
}
#endif

#endif /* MELISSA_TRAINER_H */
