/*
 * gs_next.c - libgs_next.so, a library between the program and the stub
 * driver, for checking that the interposer keeps dlsym(RTLD_NEXT, ...)
 * relative to the *calling* object: a lookup of this library's own symbol
 * must search only the objects after it and so find nothing. (A dlsym
 * wrapper that forwards from its own frame would search after the
 * interposer and return this very function: the recursion that breaks
 * other wrapping libraries.)
 */
#include <dlfcn.h>

__attribute__((visibility("default"))) void *gs_next_probe(void);

void *gs_next_probe(void)
{
    return dlsym(RTLD_NEXT, "gs_next_probe");
}
