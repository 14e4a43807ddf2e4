/* predict_release.h: the prediction socket's release and a request lost or unanswered
 * (predict.c), which the client's end and the other predict files call. Not installed;
 * internal.h, which every source includes, includes it at its end, after the types it
 * uses. */
#ifndef MT_PREDICT_RELEASE_H
#define MT_PREDICT_RELEASE_H

#include "internal.h"

/* predict.c: close the prediction socket (before the context ends), free what
 * mt_set_serve_endpoints and the serve file left. */
void mt_predict_release(mt_client *c);
void mt_predict_free(mt_client *c);
/* predict.c: a request's connection lost once `sent` or just before (mt_gone); no answer
 * by the deadline on a connection still up (MT_ETIMEDOUT; the socket released). */
mt_status mt_predict_lost(mt_client *c, bool sent);
mt_status mt_predict_unanswered(mt_client *c, const char *timeout);

#endif
