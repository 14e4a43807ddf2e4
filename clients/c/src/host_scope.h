/* host_scope.h: who can reach a loopback endpoint (host_scope.c; the Python client's
 * melissa_trainer/stream/host_scope.py), for the receivers' rendezvous (rendezvous.h
 * mt_rendezvous_reach) and the serving socket's serve file (serve.c). Not installed. */
#ifndef MT_HOST_SCOPE_H
#define MT_HOST_SCOPE_H

#include "internal.h"
#include "serve.h"

/* Whose endpoint the words speak of (host_scope.py Publisher): what published it, how the
 * trainer binds an interface the simulations reach, where endpoints are given directly. */
typedef struct mt_publisher {
    const char *who, *bind, *given;
} mt_publisher;
extern const mt_publisher MT_RECEIVER, MT_SERVING;

/* host_scope.py out_of_reach: 1 with its words appended to `out` when this process cannot
 * reach `endpoint`, published by `p` with `host` and `scope` (the file's "host" and
 * "loopback_scope"; NULL: none); 0 when it can, or it cannot be told (no scope there or
 * here); -1 out of memory. */
int mt_scope_why(const char *endpoint, const char *host, const char *scope,
                 const mt_publisher *p, mt_buf *out);

/* MT_OK, or, for a serve file of `dir` whose entry `e` this process cannot reach
 * (mt_scope_why: a loopback endpoint of another machine or network namespace),
 * MT_ETIMEDOUT at once (the Python Predictor's PredictUnreachable, a PredictTimeout: a
 * simulation's fallback takes it) in its words, after "serve file DIR/serve_R.json: ",
 * written to stderr once per client; `e` freed then. */
mt_status mt_serve_reach(mt_client *c, const char *dir, mt_serve_entry *e);

#endif
