/* serve.h: the serving channel's internals shared by serve.c, reply.c and predict.c (not
 * installed). */
#ifndef MT_SERVE_H
#define MT_SERVE_H

#include <zmq.h>

#include "internal.h"
#include "finite_notice.h" /* (mt_predict says NaN or Inf inputs once) */

/* A rank's serving entry: its endpoint, CURVE server key (NULL: none) and the inputs it
 * takes (NULL, 0: unknown, for endpoints given without a serve file); the training rank
 * (for messages: serve_{rank}.json). */
typedef struct mt_serve_entry {
    char *endpoint;
    long long rank;
    char *curve_key;
    mt_spec *inputs;
    size_t n_inputs;
    char *key_repr;       /* a serve file's curve_public_key that is not a string (nor
                           * null): as Python's repr shows it (else NULL) */
    const char *key_type; /* and its Python type's name ("int", "list", ...) */
    char *host, *scope;   /* a serve file's "host", "loopback_scope" (NULL: none: host_scope.h) */
} mt_serve_entry;

/* The entry of the rank serving c's simulation: from mt_set_serve_endpoints, else
 * $MELISSA_TRAINER_SERVE_ENDPOINTS (both with the CURVE key of
 * $MELISSA_TRAINER_SERVE_KEY, if set: MT_EENV when it is not a 40-character key), else
 * the rendezvous directory (its serve file's key), polled until
 * `deadline` (monotonic seconds; `timeout` for the message). MT_ETIMEDOUT when none was
 * published in time, or at once (mt_gone) when one was found there before (its trainer
 * removed it: it stopped, or only another run's serve files are there), MT_EENV when
 * nothing says where to look. */
mt_status mt_serve_resolve(mt_client *c, double deadline, double timeout, mt_serve_entry *out);
/* serve_read.c: one look at the rendezvous `dir`: 1 with *out the entry of rank sim % W,
 * 0 with why not in `why` (MT_NO_SERVER when no serve file is there; OTHER_RUN... when
 * only another run's), -1 out of memory. Files of another run than `run_id` (when both
 * name one) are ignored. */
int mt_read_serving(const char *dir, uint64_t sim, const char *run_id, mt_serve_entry *out,
                    char *why, size_t size);
/* how read_serving's why begins when only serve files of another run are there (the
 * request fails at once: serving_rendezvous.py OTHER_RUN, predict_lookup.py other_run) */
#define OTHER_RUN "the trainer serving there belongs to another run"
/* Whether the rendezvous directory of the last lookup changed since (one stat: a trainer
 * published or removed a serve file there); false when the last lookup was not in one. */
bool mt_serve_dir_changed(const mt_client *c);
/* serve_given.c: endpoints given (mt_set_serve_endpoints, the variable); their form:
 * mt_endpoint_fault (internal.h). */
/* MT_OK, or MT_EINVAL "mt_set_serve_endpoints: endpoint ..." for the first endpoint of the
 * comma-separated `list` not of a form to connect to. */
mt_status mt_serve_endpoints_check(mt_client *c, const char *list);
/* The entry of rank simulation_id % n of the n endpoints `listed` (c->serve_endpoints_arg,
 * checked already, or the variable's, whose picked endpoint is checked here: MT_EENV
 * "MELISSA_TRAINER_SERVE_ENDPOINTS: endpoint ..."), with the key of
 * $MELISSA_TRAINER_SERVE_KEY (MT_EENV when it is not a 40-character Z85 key). */
mt_status mt_serve_given(mt_client *c, const char *listed, mt_serve_entry *out);
void mt_serve_entry_free(mt_serve_entry *e);
/* predict_describe.c: ask the trainer connected to (an endpoint given) which inputs it
 * serves, kept in serve_inputs (none kept: a trainer from before DESCRIBE); forget them
 * (a connection dropped, the socket released; nothing for a serve file's). */
mt_status mt_predict_describe(mt_client *c, double deadline, const char *timeout);
void mt_predict_forget(mt_client *c);
void mt_specs_free(mt_spec *specs, size_t n);

/* reply.c: one reply of the serving channel, received whole (frames[0] its header;
 * frames past MAX_FRAMES are counted in `all`, not kept). */
#define MT_REPLY_FRAMES 257 /* a header and 255 payloads, and one more to say "too many" */
typedef struct mt_reply {
    zmq_msg_t frames[MT_REPLY_FRAMES];
    size_t n;   /* frames kept */
    size_t all; /* frames received */
} mt_reply;

/* Receive one whole message on `s`: 0 or the errno (nothing kept then). */
int mt_reply_receive(void *s, mt_reply *r);
void mt_reply_close(mt_reply *r);
/* Deliver `r` if it answers c's current request (*mine; else MT_OK, nothing done): MT_OK
 * (a prediction, outputs written), MT_EREFUSED, an output mismatch (MT_EFIELD,
 * MT_EDTYPE, MT_ESHAPE) or MT_EREPLY (it breaks the protocol). */
mt_status mt_reply_take(mt_client *c, mt_reply *r, mt_output *out, size_t n_out,
                        uint64_t *version, bool *mine);
/* Elements of a shape (0 if a dimension is 0 or the count overflows 64 bits), and the
 * shape as Python writes a tuple ("(4,)"). */
uint64_t mt_elements(int ndim, const uint64_t *shape);
void mt_shape_text(int ndim, const uint64_t *shape, char *out, size_t size);

/* Where the serving socket's CURVE key came from (c->predict_key): none, given
 * (MELISSA_TRAINER_SERVE_KEY, for endpoints given directly), or the serve file. */
#define MT_KEY_NONE 0
#define MT_KEY_GIVEN 1
#define MT_KEY_SERVE_FILE 2

/* predict_watch.c: a trainer gone, told by the prediction socket's monitor. */
/* Watch `s` (made, not connected yet): its monitor in c->predict_monitor. MT_EZMQ. */
mt_status mt_watch_start(mt_client *c, void *s);
/* Stop and close the monitor (before the socket closes: mt_predict_release). */
void mt_watch_stop(mt_client *c);
/* Read the monitor's waiting events: whether one says the connection dropped; `last`
 * (NULL: not asked): whether a drop came after the last CONNECTED. After
 * mt_watch_connected, that is the connection found gone: ZeroMQ posts the DISCONNECTED
 * before it closes the connection's pipe, which takes a request meanwhile, unanswered
 * (the earlier drops were of earlier connections: a trainer restarted there). */
bool mt_watch_lost(mt_client *c, bool *last);
/* Wait until c->predict_socket has a live connection to send on (ZMQ_IMMEDIATE), up to
 * `deadline` (`timeout`: its seconds, for the message): MT_OK; MT_ETIMEDOUT, the socket
 * released, at once when the endpoint refuses the connection (mt_gone), else at the
 * deadline; MT_EENV, the socket released (no backoff), as soon as the server refuses the
 * handshake (a CURVE key that is not its own, none for a CURVE server, one for a plain
 * server: a mistake to fix, not a fallback), an endpoint given that closes the
 * connection at the handshake for good (not a serving socket: a serve file's is mt_gone)
 * or whose host name does not resolve; MT_EZMQ. */
mt_status mt_watch_connected(mt_client *c, double deadline, const char *timeout);
/* The trainer is gone (why: printf's format): release the socket, start or double the
 * backoff, during which requests fail without dialling; MT_ETIMEDOUT, saying why. */
mt_status mt_gone(mt_client *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* MT_ETIMEDOUT, at once, for a request in the backoff of an earlier mt_gone; else MT_OK. */
mt_status mt_backoff_check(mt_client *c);
/* predict_dial.c: what a failed dial says. The longest poll of a wait while a connect is
 * in progress (s): the monitor, found empty that often, dates the attempt's end. */
#define MT_DIAL_DRAIN 0.1
/* MT_EENV, the socket released, when the host name of c->predict_endpoint does not
 * resolve (ZeroMQ reports it as a connection refused); else MT_OK. */
mt_status mt_dial_check_host(mt_client *c);
/* MT_ETIMEDOUT, the socket released (no backoff), for a host that did not answer the
 * connect for `seconds` (client/predict_errors.py no_answer, word for word). */
mt_status mt_dial_no_answer(mt_client *c, double seconds);
/* Whether a CONNECT_RETRIED ends an attempt abandoned at the connect bound (the host
 * never answered), not one refused: it lasted half the bound or more, at least
 * `floor` - c->predict_dialling (client/predict_events.py NO_ANSWER). Ends the attempt;
 * a refusal is an answer. */
bool mt_dial_abandoned(mt_client *c, double floor);
/* Seconds since c->predict_socket was dialled when its host never answered for half the
 * connect bound or more (client/predict_events.py ServeEvents.unanswered), else < 0. */
double mt_dial_unanswered(mt_client *c);

#endif
