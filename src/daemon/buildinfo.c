/* buildinfo.c - the version string the daemon reports in /healthz, the
 * agent protocol and `crater version`. One definition so the server, the
 * agent and the CLI never disagree. */
#include "daemon/buildinfo.h"

const char *crater_version(void)
{
    return CRATER_VERSION_STRING;
}
