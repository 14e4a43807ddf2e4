/* stop_look.h: a lookup's rank_0.json, read and parsed again only when it changed
 * (stop_look.c; melissa_trainer/client/stop_look.py StopLook, the same rule). Not
 * installed; after internal.h. */
#ifndef MT_STOP_LOOK_H
#define MT_STOP_LOOK_H

#include "internal.h"

/* What a look at a rendezvous directory's rank_0.json found, kept with what it was looked
 * up with (the file's stat and the story's other arguments). */
typedef struct mt_stop_glance {
    char *text;    /* mt_stop_text's (NULL: none) */
    mt_buf story;  /* mt_stopped_story's words ("" none; .oom: out of memory) */
    int stopped;   /* mt_stopped_story's return */
    bool kept;     /* the key below holds (not after a look with no file, or none read) */
    char *dir, *run_id, *why; /* (run_id NULL: any run's) */
    bool served;
    long long size, mtime_ns;
    unsigned long long ino;
} mt_stop_glance;

/* mt_stop_text of `dir` and mt_stopped_story of it with these arguments (one
 * implementation: those), in *glance (allocated at the first look: free it with
 * mt_stop_glance_free), read and parsed again only when the file's stat (size, mtime in
 * ns, inode) or the story's other arguments changed since the last look. The stat comes
 * before the read: a file replaced in between is read new under its old stat, and read
 * again at the next look (never an old text kept under a new stat). No file, or one not
 * read (being replaced; memory short, the story's .oom too): nothing kept. NULL only when
 * the glance could not be allocated. The result is the glance's: valid until the next
 * look or the free. */
const mt_stop_glance *mt_stop_glance_at(mt_stop_glance **glance, const char *dir,
                                        const char *run_id, const char *why, bool served);
void mt_stop_glance_free(mt_stop_glance *glance);

#endif
