/* main_craterd.c - the craterd program: parse flags, load the
 * configuration, run the daemon until SIGINT/SIGTERM. All the work is in
 * src/daemon; this file only wires the process to it. */
#include <stdio.h>

int main(void)
{
    fputs("craterd: not built yet\n", stderr);
    return 1;
}
