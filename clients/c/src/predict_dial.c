/* predict_dial.c: what a failed dial of the prediction socket says (melissa_trainer/
 * client/predict_link.py and predict_events.py, the same rules and words): a host name
 * that does not resolve (a mistake to fix, MT_EENV), and a host that never answers the
 * TCP connect (its SYNs dropped: a wrong host, a firewall, a node down), told from one
 * that refuses it (an RST, "nothing listens there": predict_watch.c). libzmq abandons a
 * connect at the socket's ZMQ_CONNECT_TIMEOUT (the request's timeout, at least 2 s:
 * mt_connect_timeout_ms, predict.c) with the events of a refusal (CLOSED, then
 * CONNECT_RETRIED): the attempt's length, from its CONNECT_DELAYED (a connect in
 * progress) to its CONNECT_RETRIED, tells them apart. One that lasted half the bound or
 * more (at least 1 s) is abandoned; a refusal comes within a round trip. The length is
 * the least the events allow (the retry posted no earlier than the last read that found
 * the monitor empty, which a wait does every MT_DIAL_DRAIN s while a connect is in
 * progress; the attempt begun before its CONNECT_DELAYED was read), so a burst read at
 * once (a request after a trainer died between requests) is a refusal, as it is. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <zmq.h>

#include "internal.h"
#include "serve.h"

/* what a host that never answered a connection attempt is (client/predict_errors.py
 * NO_ANSWER_WHY, word for word) */
#define NO_ANSWER_WHY "a wrong host, a firewall dropping packets, or a host that is down"

bool mt_dial_abandoned(mt_client *c, double floor) {
    double began = c->predict_dialling, bound = c->predict_connect_bound;
    c->predict_dialling = -1.0;
    if (began >= 0 && bound > 0 && floor - began >= bound / 2) return true;
    c->predict_answered = true; /* (refused: the host answered, its RST) */
    return false;
}

double mt_dial_unanswered(mt_client *c) {
    double waited = mt_now() - c->predict_dialled, bound = c->predict_connect_bound;
    return !c->predict_answered && bound > 0 && waited >= bound / 2 ? waited : -1.0;
}

mt_status mt_dial_no_answer(mt_client *c, double seconds) {
    const char *e = c->predict_endpoint;
    const char *address = strncmp(e, "tcp://", 6) == 0 ? e + 6 : e;
    if (strrchr(address, ';') != NULL) address = strrchr(address, ';') + 1;
    mt_status st = mt_fail(c, MT_ETIMEDOUT, "no answer from %s (the trainer's serving endpoint) "
                                            "within %.1f s: " NO_ANSWER_WHY, address, seconds);
    mt_predict_release(c);
    return st;
}

/* MT_EENV, the socket released, when the host name of the endpoint connected to does not
 * resolve (ZeroMQ reports it as a connection refused; predict_errors.py unresolved); else
 * MT_OK. A name is looked up once at most while it resolves (a trainer gone costs no
 * lookup after the first). */
mt_status mt_dial_check_host(mt_client *c) {
    const char *e = c->predict_endpoint;
    if (strncmp(e, "tcp://", 6) != 0) return MT_OK;
    /* tcp://[source;]host:port, the host maybe a bracketed IPv6 address */
    const char *host = strrchr(e + 6, ';') != NULL ? strrchr(e + 6, ';') + 1 : e + 6;
    const char *end = strrchr(host, ':');
    if (end == NULL) end = host;
    while (host < end && (*host == '[' || *host == ']')) ++host;
    while (end > host && (end[-1] == '[' || end[-1] == ']')) --end;
    char name[256];
    if (end == host || (size_t)(end - host) >= sizeof name) return MT_OK;
    snprintf(name, sizeof name, "%.*s", (int)(end - host), host);
    if (strcmp(name, c->predict_resolved) == 0) return MT_OK;
    struct addrinfo hints, *found = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_socktype = SOCK_STREAM;
    int rc = getaddrinfo(name, NULL, &hints, &found);
    if (rc == 0) {
        freeaddrinfo(found);
        snprintf(c->predict_resolved, sizeof c->predict_resolved, "%s", name);
        return MT_OK;
    }
    mt_predict_release(c);
    const char *fix = c->predict_given
                          ? "check the endpoint given (mt_set_serve_endpoints or "
                            "MELISSA_TRAINER_SERVE_ENDPOINTS)"
                          : "the trainer advertises it (the stream's "
                            "ReceiverConfig.advertise_host): give one this node resolves";
    return mt_fail(c, MT_EENV, "mt_predict: the serving endpoint %s: the host name '%s' does not "
                               "resolve (%s; a typo?): %s", e, name,
                   rc == EAI_SYSTEM ? strerror(errno) : gai_strerror(rc), fix);
}
