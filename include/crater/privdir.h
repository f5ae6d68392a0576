/* privdir.h - a data directory only its owner can enter.
 *
 * craterd's and the agent's data directories hold the store (every job
 * spec and token hash), tokens, task records and logs. Whatever mode a
 * directory already had (0755 from an older release, a umask, a hand-made
 * mkdir), it is made 0700 at start, so a task running under another uid
 * can neither list it nor open anything inside.
 */
#ifndef CRATER_PRIVDIR_H
#define CRATER_PRIVDIR_H

#include "crater/error.h"

/* Make path (one directory, its parent existing) if missing, then mode
 * 0700. Refused (-1, err with field): not a directory, a symlink, owned by
 * another user, or a shared sticky directory such as /tmp (chmod would
 * break others). Logs a warning when a looser mode was tightened. */
int crater_private_dir(const char *path,
                       const char *field,
                       crater_error_t *err);

#endif /* CRATER_PRIVDIR_H */
