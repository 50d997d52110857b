/*
 * users.c - the users file and password verification.
 *
 * Format, one user per line ('#' comments and blank lines ignored):
 *     name:password:/home/dir:perms
 * password is "{plain}secret" or a crypt(3) hash starting with '$'; perms
 * is "r" (read only) or "rw".  The password may itself contain ':' (the
 * line is split at the first and at the last two colons).  Each home is
 * opened once as an O_PATH directory descriptor shared by all sessions of
 * that user; all file access is resolved beneath it (see vfs.c).
 *
 * Calls config.c's file helpers (config_fopen, config_getline) and
 * logging.
 */
#include "tpd.h"

#include <crypt.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static struct user *g_users;
static size_t g_nusers;

/* Free all users and close their home descriptors. */
void users_free(void)
{
    for (size_t i = 0; i < g_nusers; i++) {
        free(g_users[i].name);
        free(g_users[i].pass);
        free(g_users[i].home);
        free(g_users[i].home_real);
        if (g_users[i].home_fd >= 0)
            close(g_users[i].home_fd);
    }
    free(g_users);
    g_users = NULL;
    g_nusers = 0;
}

/* Parse one non-comment line into u.  Returns 0 or -1. */
static int parse_user_line(char *line, struct user *u)
{
    char *c1 = strchr(line, ':');
    char *cl = strrchr(line, ':');
    if (!c1 || cl == c1)
        return -1;
    *cl = '\0';
    char *c2 = strrchr(line, ':');     /* between password and home */
    if (!c2 || c2 == c1)
        return -1;                     /* only three fields */
    *c1 = '\0';
    *c2 = '\0';
    const char *name = line, *pass = c1 + 1, *home = c2 + 1, *perms = cl + 1;
    if (!*name || !*home || strlen(name) > 64)
        return -1;
    if (strcmp(perms, "r") && strcmp(perms, "rw"))
        return -1;
    if (strncmp(pass, "{plain}", 7) != 0 && pass[0] != '$')
        return -1;
    u->name = strdup(name);
    u->pass = strdup(pass);
    u->home = strdup(home);
    u->can_write = strcmp(perms, "rw") == 0;
    u->home_fd = open(home, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (u->home_fd < 0) {
        log_error("user %s: home %s: %s", name, home, strerror(errno));
        return -1;
    }
    u->home_real = realpath(home, NULL);
    if (!u->name || !u->pass || !u->home || !u->home_real)
        return -1;
    return 0;
}

/* Load the users file.  Returns 0, or -1 (logged) on any error. */
int users_load(const char *path)
{
    FILE *f = config_fopen("users file", path);
    char line[4096];
    int lineno = 0;

    if (!f)
        return -1;
    while (config_getline(f, line, sizeof(line), &lineno, 1000000)) {
        size_t n = strlen(line);
        while (n && (line[n - 1] == '\n' || line[n - 1] == '\r'))
            line[--n] = '\0';
        if (n == 0 || line[0] == '#')
            continue;
        struct user *nu = realloc(g_users, (g_nusers + 1) * sizeof(*nu));
        if (!nu) {
            fclose(f);
            return -1;
        }
        g_users = nu;
        memset(&g_users[g_nusers], 0, sizeof(struct user));
        g_users[g_nusers].home_fd = -1;
        g_nusers++;
        if (parse_user_line(line, &g_users[g_nusers - 1])) {
            log_error("users file %s:%d: invalid entry "
                      "(want name:{plain}pw|$hash:/home:r|rw)", path, lineno);
            fclose(f);
            return -1;
        }
    }
    fclose(f);
    if (g_nusers == 0) {
        log_error("users file %s: no users", path);
        return -1;
    }
    log_info("loaded %zu user(s) from %s", g_nusers, path);
    return 0;
}

/* Look a user up by name (NULL if unknown). */
struct user *users_find(const char *name)
{
    for (size_t i = 0; i < g_nusers; i++)
        if (strcmp(g_users[i].name, name) == 0)
            return &g_users[i];
    return NULL;
}

/* The first user of the file: HTTP serves its home. */
struct user *users_first(void)
{
    return g_nusers ? &g_users[0] : NULL;
}

/* Compare two strings in time independent of where they differ. */
static bool ct_equal(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    unsigned char d = (unsigned char)(la != lb);
    for (size_t i = 0; i < la && i < lb; i++)
        d |= (unsigned char)(a[i] ^ b[i]);
    return d == 0;
}

/* Check `password` against u's stored plain text or crypt(3) hash. */
bool users_check_password(const struct user *u, const char *password)
{
    if (strncmp(u->pass, "{plain}", 7) == 0)
        return ct_equal(u->pass + 7, password);
    struct crypt_data cd;
    memset(&cd, 0, sizeof(cd));
    const char *h = crypt_r(password, u->pass, &cd);
    return h && h[0] != '*' && ct_equal(h, u->pass);
}
