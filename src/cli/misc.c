/* misc.c - small subcommands (config, kb, version) and output helpers. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "crater/config.h"
#include "crater/kb.h"

#ifndef CRATER_VERSION
#define CRATER_VERSION "0.1.0-dev"
#endif

int cli_parse_format(const char *s)
{
    if (!strcmp(s, "json"))
        return CLI_FMT_JSON;
    if (!strcmp(s, "yaml"))
        return CLI_FMT_YAML;
    if (!strcmp(s, "text"))
        return CLI_FMT_TEXT;
    return -1;
}

int cli_print(const json_t *v, cli_format_t fmt)
{
    char *s =
        fmt == CLI_FMT_YAML
            ? crater_json_to_yaml(v)
            : json_dumps(v, JSON_INDENT(2) | JSON_SORT_KEYS | JSON_ENCODE_ANY);

    if (!s) {
        fprintf(stderr, "crater: error: out of memory\n");
        return -1;
    }
    fputs(s, stdout);
    if (fmt != CLI_FMT_YAML || s[strlen(s) ? strlen(s) - 1 : 0] != '\n')
        fputc('\n', stdout);
    free(s);
    return 0;
}

static int format_opt(int argc,
                      char **argv,
                      cli_format_t *fmt,
                      const char *usage)
{
    int c, f;

    optind = 1;
    while ((c = getopt(argc, argv, "o:h")) != -1) {
        if (c == 'o' && (f = cli_parse_format(optarg)) >= 0) {
            *fmt = (cli_format_t)f;
            continue;
        }
        if (c == 'o')
            fprintf(stderr,
                    "crater: -o: unknown format '%s' (json, yaml)\n",
                    optarg);
        fprintf(c == 'h' ? stdout : stderr, "usage: %s\n", usage);
        return c == 'h' ? 1 : -1;
    }
    return 0;
}

static int print_config_defaults(cli_format_t fmt)
{
    crater_config_t cfg;
    json_t *v;
    int rc;

    if (crater_config_defaults(&cfg) < 0 || !(v = crater_config_encode(&cfg)))
        return CLI_EXIT_REJECTED;
    rc = cli_print(v, fmt);
    json_decref(v);
    crater_config_clear(&cfg);
    return rc < 0 ? CLI_EXIT_REJECTED : CLI_EXIT_OK;
}

int cli_config(int argc, char **argv)
{
    const char *usage = "crater config --markdown | --defaults [-o json|yaml]";
    cli_format_t fmt = CLI_FMT_YAML;
    char *md;

    if (argc >= 2 && !strcmp(argv[1], "--markdown")) {
        if (!(md = crater_config_markdown()))
            return CLI_EXIT_REJECTED;
        fputs(md, stdout);
        free(md);
        return CLI_EXIT_OK;
    }
    if (argc >= 2 && !strcmp(argv[1], "--defaults")) {
        int rc = format_opt(argc - 1, argv + 1, &fmt, usage);
        return rc ? (rc > 0 ? 0 : CLI_EXIT_USAGE) : print_config_defaults(fmt);
    }
    fprintf(stderr, "usage: %s\n", usage);
    return CLI_EXIT_USAGE;
}

int cli_kb(int argc, char **argv)
{
    cli_format_t fmt = CLI_FMT_YAML;
    crater_kb_t *kb;
    json_t *v;
    int rc = format_opt(argc, argv, &fmt, "crater kb [-o json|yaml]");

    if (rc)
        return rc > 0 ? 0 : CLI_EXIT_USAGE;
    if (!(kb = crater_kb_create()) || !(v = crater_kb_encode(kb))) {
        crater_kb_destroy(kb);
        return CLI_EXIT_REJECTED;
    }
    rc = cli_print(v, fmt);
    json_decref(v);
    crater_kb_destroy(kb);
    return rc < 0 ? CLI_EXIT_REJECTED : CLI_EXIT_OK;
}

int cli_version(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    printf("crater %s\n", CRATER_VERSION);
    return CLI_EXIT_OK;
}
