/* dashboard.h - the dashboard's files as craterd serves them.
 *
 * cmake/embed.cmake generates the table from web/ at build time (one entry
 * per file: its base name and bytes); dashboard.c serves it. Everything
 * here is static data: nothing to free.
 */
#ifndef CRATER_DAEMON_DASHBOARD_H
#define CRATER_DAEMON_DASHBOARD_H

#include <stddef.h>

typedef struct dash_asset {
    const char *name;          /* "index.html", "app.js" */
    const unsigned char *data; /* len bytes, then a NUL */
    size_t len;
} dash_asset_t;

extern const dash_asset_t crater__dash_assets[];
extern const size_t crater__dash_nassets;

#endif
