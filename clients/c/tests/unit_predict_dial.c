/* unit_predict_dial.c: the C unit test (CTest) of what the prediction socket's wait says
 * of a host that never answers its TCP connect (predict_dial.c; the Python client's
 * tests/client/test_predict_no_answer.py): a connect abandoned at its ZMQ_CONNECT_TIMEOUT
 * (2 s here, of a 20 s wait) posts a refusal's events, and is said as no answer at once,
 * not "refused the connection"; a port refused at once keeps those words. The host is a
 * listener whose accept queue is full (tests/backlogged.py's: the kernel drops the SYNs).
 * Before: the wait's whole 20 s and "no connection to the trainer's serving endpoint",
 * or with the bound alone "refused the connection". Exits non-zero on failure. */
#define _POSIX_C_SOURCE 200809L
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zmq.h>

#include "internal.h"
#include "serve.h"
#include "unit_check.h"

/* A listener on 127.0.0.1 (its port in *port), listening with a full queue when `full`
 * (its fillers in fds[1], fds[2]), else bound only (connections refused). fds[0]: it. */
static void listener(int fds[3], int *port, int full) {
    struct sockaddr_in a;
    socklen_t len = sizeof a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    fds[0] = socket(AF_INET, SOCK_STREAM, 0);
    fds[1] = fds[2] = -1;
    CHECK(bind(fds[0], (struct sockaddr *)&a, sizeof a) == 0);
    CHECK(getsockname(fds[0], (struct sockaddr *)&a, &len) == 0);
    *port = ntohs(a.sin_port);
    if (!full) return;
    CHECK(listen(fds[0], 0) == 0);
    /* (one fills a backlog of 0; a second, whose SYN is dropped once it is full, fills
     * it if the first's ACK was not queued yet) */
    fds[1] = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(connect(fds[1], (struct sockaddr *)&a, sizeof a) == 0);
    fds[2] = socket(AF_INET, SOCK_STREAM, 0);
    fcntl(fds[2], F_SETFL, O_NONBLOCK);
    CHECK(connect(fds[2], (struct sockaddr *)&a, sizeof a) != 0);
}

/* What mt_watch_connected says of a DEALER (connect bound 2 s) to 127.0.0.1:port, waiting
 * up to 20 s: its status, its message in `said`. */
static mt_status wait_on(mt_client *c, int port, char *said, size_t size) {
    void *s = zmq_socket(c->zctx, ZMQ_DEALER);
    int zero = 0, one = 1, bound = 2000;
    zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(s, ZMQ_IMMEDIATE, &one, sizeof one);
    zmq_setsockopt(s, ZMQ_CONNECT_TIMEOUT, &bound, sizeof bound);
    snprintf(c->predict_endpoint, sizeof c->predict_endpoint, "tcp://127.0.0.1:%d", port);
    CHECK(mt_watch_start(c, s) == MT_OK);
    c->predict_socket = s;
    CHECK(zmq_connect(s, c->predict_endpoint) == 0);
    double began = mt_now();
    mt_status st = mt_watch_connected(c, began + 20, "20.0");
    CHECK(mt_now() - began < 15); /* (at the bound, not the wait's end) */
    snprintf(said, size, "%s", mt_client_error(c));
    mt_predict_release(c);
    return st;
}

int main(void) {
    mt_client *c;
    CHECK(mt_client_create(&c) == MT_OK);
    c->zctx = zmq_ctx_new();
    int fds[3], port;
    char said[1024], want[1024];
    listener(fds, &port, 1);
    CHECK(wait_on(c, port, said, sizeof said) == MT_ETIMEDOUT);
    snprintf(want, sizeof want, "no answer from 127.0.0.1:%d (the trainer's serving endpoint) "
             "within 2.0 s: a wrong host, a firewall dropping packets, or a host that is "
             "down", port);
    CHECK(strcmp(said, want) == 0);
    if (strcmp(said, want) != 0) fprintf(stderr, "said: %s\n", said);
    for (int i = 0; i < 3; ++i)
        if (fds[i] >= 0) close(fds[i]);
    listener(fds, &port, 0); /* (refused at once: the words of before) */
    CHECK(wait_on(c, port, said, sizeof said) == MT_ETIMEDOUT);
    snprintf(want, sizeof want, "the trainer's serving endpoint tcp://127.0.0.1:%d refused the "
             "connection: nothing listens there (the trainer is gone or restarting); the next "
             "request looks the endpoint up again", port);
    CHECK(strcmp(said, want) == 0);
    if (strcmp(said, want) != 0) fprintf(stderr, "said: %s\n", said);
    close(fds[0]);
    mt_client_abort(c); /* (its context too: c->zctx) */
    return unit_report("unit_predict_dial: ok");
}
