/*
 * vpath.c - virtual path normalisation shared by FTP, HTTP and vfs.c:
 * joining a client-named path onto a working directory with "." and ".."
 * resolved lexically and clamped at the virtual root, and the relative
 * form handed to the *at() calls.
 *
 * Pure: no I/O, no allocation, no globals; calls only libc (string).
 * Fuzzed by fuzz/fuzz_ftp.c and fuzz/fuzz_http.c; declared in tpd.h.
 */
#include "tpd.h"

#include <string.h>

/*
 * Join `arg` onto the virtual working directory `cwd` (absolute, already
 * normalised) and normalise the result lexically: empty and "." components
 * vanish, ".." pops one component and is clamped at the virtual root, so
 * the result always starts with '/' and never contains "." or "..".
 * Returns 0, or -1 if the result does not fit in `outsz`.
 */
int vpath_join(const char *cwd, const char *arg, char *out, size_t outsz)
{
    size_t o = 0;
    const char *parts[2];
    int np = 0;

    if (outsz < 2)
        return -1;
    if (arg[0] != '/')
        parts[np++] = cwd;
    parts[np++] = arg;
    out[o++] = '/';
    out[o] = '\0';
    for (int k = 0; k < np; k++) {
        const char *p = parts[k];
        while (*p) {
            while (*p == '/')
                p++;
            if (!*p)
                break;
            const char *e = p;
            while (*e && *e != '/')
                e++;
            size_t cl = (size_t)(e - p);
            if (cl == 1 && p[0] == '.') {
                /* nothing */
            } else if (cl == 2 && p[0] == '.' && p[1] == '.') {
                if (o > 1) {
                    while (o > 1 && out[o - 1] != '/')
                        o--;
                    if (o > 1)
                        o--;          /* drop the separator too */
                }
            } else {
                if (o > 1) {
                    if (o + 1 >= outsz)
                        return -1;
                    out[o++] = '/';
                }
                if (o + cl >= outsz)
                    return -1;
                memcpy(out + o, p, cl);
                o += cl;
            }
            p = e;
        }
    }
    out[o] = '\0';
    return 0;
}

/* Relative form of a normalised virtual path for *at() calls. */
const char *vpath_rel(const char *vpath)
{
    return vpath[1] ? vpath + 1 : ".";
}
