/*
 * config.c - tpd configuration: defaults, the "key = value" configuration
 * file and the command line (--config is read first, flags override it).
 *
 * Calls logging only; fills g_cfg and g_log_level.
 */
#include "tpd.h"

#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

struct config g_cfg;
int g_log_level = LOG_INFO;

/* Print usage to f. */
static void usage(FILE *f)
{
    fprintf(f,
"usage: tpd --users FILE [options]\n"
"  --ftp-listen ADDR:PORT    FTP control listener (default 127.0.0.1:2121)\n"
"  --http-listen ADDR:PORT   HTTP listener (omit to disable HTTP)\n"
"  --users FILE              users file: name:password:/home:r|rw\n"
"  --pasv-ports LO-HI        passive data port range (default: ephemeral)\n"
"  --masquerade ADDR         IPv4 address announced in PASV replies (NAT)\n"
"  --max-conns N             max FTP sessions + HTTP connections (10000)\n"
"  --idle-timeout SECONDS    close idle connections after this (300)\n"
"  --log-level LEVEL         error|warn|info|debug (info)\n"
"  --no-sendfile             use read/write instead of sendfile()\n"
"  --max-body BYTES          largest HTTP PUT/POST body, 413 above it (default\n"
"                            1073741824 = 1 GiB; 1 to 2^62; no 'no limit' value)\n"
"  --tls-cert FILE           PEM certificate (chain): enables AUTH TLS (RFC 4217)\n"
"  --tls-key FILE            PEM private key of --tls-cert (both or neither)\n"
"  --ftps-listen ADDR:PORT   implicit FTPS listener (TLS from the first byte)\n"
"  --https-listen ADDR:PORT  HTTPS listener (the HTTP handler over TLS)\n"
"  --tls-info                print TLS/kTLS support as one JSON line, exit 0\n"
"  --config FILE             'key = value' file with the same keys\n");
}

/*
 * Parse a decimal integer option value in [lo, hi] into *out.  Returns 0,
 * or -1 (and *out untouched) when v is empty, not a number or out of range.
 */
int config_parse_int(const char *v, long lo, long hi, int *out)
{
    char *end;
    errno = 0;
    long n = strtol(v, &end, 10);
    if (errno || end == v || *end || n < lo || n > hi)
        return -1;
    *out = (int)n;
    return 0;
}

/* Parse a boolean ("1/0/true/false/yes/no/on/off"). */
static int parse_bool(const char *v, bool *out)
{
    if (!strcmp(v, "1") || !strcasecmp(v, "true") || !strcasecmp(v, "yes") ||
        !strcasecmp(v, "on")) {
        *out = true;
        return 0;
    }
    if (!strcmp(v, "0") || !strcasecmp(v, "false") || !strcasecmp(v, "no") ||
        !strcasecmp(v, "off")) {
        *out = false;
        return 0;
    }
    return -1;
}

/*
 * Copy the string option val into dst, a char array of cap bytes.  Returns 0,
 * or -1 (dst untouched) when val and its NUL do not fit.
 */
static int set_string(char *dst, size_t cap, const char *val)
{
    size_t n = strlen(val);
    if (n >= cap)
        return -1;
    memcpy(dst, val, n + 1);
    return 0;
}

/* set_string() into a char array field, its size taken from the field. */
#define SET_STRING(field, val) set_string((field), sizeof(field), (val))

/* Apply one configuration key (file key or long option name). */
static int apply_option(const char *key, const char *val)
{
    bool b;
    if (!strcmp(key, "ftp-listen")) {
        return SET_STRING(g_cfg.ftp_listen, val);
    } else if (!strcmp(key, "http-listen")) {
        return SET_STRING(g_cfg.http_listen, val);
    } else if (!strcmp(key, "users")) {
        return SET_STRING(g_cfg.users_file, val);
    } else if (!strcmp(key, "pasv-ports")) {
        int lo, hi;
        char tmp[64];
        const char *dash = strchr(val, '-');
        if (!dash || (size_t)(dash - val) >= sizeof(tmp)) return -1;
        memcpy(tmp, val, (size_t)(dash - val));
        tmp[dash - val] = '\0';
        if (config_parse_int(tmp, 1, 65535, &lo) ||
            config_parse_int(dash + 1, 1, 65535, &hi)
            || hi < lo)
            return -1;
        g_cfg.pasv_lo = lo;
        g_cfg.pasv_hi = hi;
    } else if (!strcmp(key, "masquerade")) {
        if (inet_pton(AF_INET, val, &g_cfg.masq_addr) != 1) return -1;
        g_cfg.have_masq = true;
    } else if (!strcmp(key, "max-conns")) {
        return config_parse_int(val, 1, 1000000, &g_cfg.max_conns);
    } else if (!strcmp(key, "idle-timeout")) {
        return config_parse_int(val, 1, 86400 * 7, &g_cfg.idle_timeout);
    } else if (!strcmp(key, "log-level")) {
        static const char *lv[] = { "error", "warn", "info", "debug" };
        for (int i = 0; i < 4; i++)
            if (!strcasecmp(val, lv[i])) {
                g_log_level = i;
                return 0;
            }
        return -1;
    } else if (!strcmp(key, "no-sendfile")) {
        if (parse_bool(val, &b)) return -1;
        g_cfg.use_sendfile = !b;
    } else if (!strcmp(key, "max-body")) {
        char *end;
        errno = 0;
        long long v = strtoll(val, &end, 10);
        /* always a bound: 0 is refused (there is no unlimited value) */
        if (errno || end == val || *end || v < 1 || v > TPD_MAX_BODY_MAX)
            return -1;
        g_cfg.max_body = v;
    } else if (!strcmp(key, "tls-cert") || !strcmp(key, "tls-key")) {
        if (!*val) return -1;
        return key[4] == 'c' ? SET_STRING(g_cfg.tls_cert, val) : SET_STRING(g_cfg.tls_key, val);
    } else if (!strcmp(key, "ftps-listen")) {
        return SET_STRING(g_cfg.ftps_listen, val);
    } else if (!strcmp(key, "https-listen")) {
        return SET_STRING(g_cfg.https_listen, val);
    } else if (!strcmp(key, "tls-info")) {
        if (parse_bool(val, &b)) return -1;
        g_cfg.tls_info = b;
    } else if (!strcmp(key, "sendfile")) {
        if (parse_bool(val, &b)) return -1;
        g_cfg.use_sendfile = b;
    } else {
        return -2;
    }
    return 0;
}

/* Trim ASCII whitespace at both ends, in place. */
static char *trim(char *s)
{
    while (*s == ' ' || *s == '\t' || *s == '\r' || *s == '\n')
        s++;
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r' ||
                 s[n - 1] == '\n'))
        s[--n] = '\0';
    return s;
}

/*
 * Open a text file for reading; `what` names it in the error message
 * ("config", "users file").  Returns the stream, or NULL after logging
 * the error (errno set).
 */
FILE *config_fopen(const char *what, const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        log_error("%s %s: %s", what, path, strerror(errno));
    return f;
}

/*
 * Read the next line of f into line (at most max lines in all, counted in
 * *lineno).  Returns true with a line, false at the end or past max.
 */
bool config_getline(FILE *f, char *line, int size, int *lineno, int max)
{
    if (*lineno >= max || !fgets(line, size, f))
        return false;
    ++*lineno;
    return true;
}

/* Read a "key = value" configuration file ('#' starts a comment). */
static int load_config_file(const char *path)
{
    char line[2048];
    int lineno = 0;
    FILE *f = config_fopen("config", path);
    if (!f)
        return -1;
    while (config_getline(f, line, sizeof(line), &lineno, 100000)) {
        char *s = trim(line);
        if (*s == '\0' || *s == '#')
            continue;
        char *eq = strchr(s, '=');
        if (!eq) {
            log_error("config %s:%d: expected key = value", path, lineno);
            fclose(f);
            return -1;
        }
        *eq = '\0';
        char *k = trim(s), *v = trim(eq + 1);
        int r = apply_option(k, v);
        if (r) {
            log_error("config %s:%d: %s '%s'", path, lineno,
                      r == -2 ? "unknown key" : "bad value for", k);
            fclose(f);
            return -1;
        }
    }
    fclose(f);
    return 0;
}

/* Parse command line: --config first, then flags override it. */
static int parse_args(int argc, char **argv)
{
    static const struct option opts[] = {
        { "ftp-listen", required_argument, 0, 0 },
        { "http-listen", required_argument, 0, 0 },
        { "users", required_argument, 0, 0 },
        { "pasv-ports", required_argument, 0, 0 },
        { "masquerade", required_argument, 0, 0 },
        { "max-conns", required_argument, 0, 0 },
        { "idle-timeout", required_argument, 0, 0 },
        { "log-level", required_argument, 0, 0 },
        { "no-sendfile", no_argument, 0, 0 },
        { "max-body", required_argument, 0, 0 },
        { "tls-cert", required_argument, 0, 0 },
        { "tls-key", required_argument, 0, 0 },
        { "ftps-listen", required_argument, 0, 0 },
        { "https-listen", required_argument, 0, 0 },
        { "tls-info", no_argument, 0, 0 },
        { "config", required_argument, 0, 0 },
        { "help", no_argument, 0, 'h' },
        { 0, 0, 0, 0 }
    };
    int idx, c;

    /* pass 1: configuration file */
    for (int i = 1; i < argc; i++) {
        const char *path = NULL;
        if (!strcmp(argv[i], "--config") && i + 1 < argc)
            path = argv[i + 1];
        else if (!strncmp(argv[i], "--config=", 9))
            path = argv[i] + 9;
        if (path && load_config_file(path))
            return -1;
    }
    /* pass 2: flags */
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, &idx)) != -1) {
        if (c == 'h') {
            usage(stdout);
            exit(0);
        }
        if (c != 0) {
            usage(stderr);
            return -1;
        }
        const char *name = opts[idx].name;
        if (!strcmp(name, "config"))
            continue;
        if (apply_option(name, optarg ? optarg : "true")) {
            log_error("bad value for --%s", name);
            return -1;
        }
    }
    if (optind < argc) {
        log_error("unexpected argument '%s'", argv[optind]);
        return -1;
    }
    if (!g_cfg.users_file[0] && !g_cfg.tls_info) {
        log_error("--users FILE is required");
        return -1;
    }
    return 0;
}

/*
 * Set the defaults, then apply the configuration file(s) named by --config
 * and the command-line flags.  Returns 0, or -1 after logging the error
 * (the caller exits with status 2).  --help prints usage and exits 0.
 */
int config_load(int argc, char **argv)
{
    strcpy(g_cfg.ftp_listen, "127.0.0.1:2121");
    g_cfg.max_conns = 10000;
    g_cfg.idle_timeout = 300;
    g_cfg.use_sendfile = true;
    g_cfg.max_body = TPD_DEFAULT_MAX_BODY;
    return parse_args(argc, argv);
}
