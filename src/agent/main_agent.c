/* main_agent.c - the crater-agent program (being built: issue 6). */
#include <stdio.h>

int main(void)
{
    fputs("crater-agent: not built yet\n", stderr);
    return 1;
}
