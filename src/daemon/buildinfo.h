/* buildinfo.h - version of this build. */
#ifndef CRATER_DAEMON_BUILDINFO_H
#define CRATER_DAEMON_BUILDINFO_H

#define CRATER_VERSION_STRING "0.1.0"

/* Static string, never freed. */
const char *crater_version(void);

#endif
