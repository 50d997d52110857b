/*
 * listing.c - the directory-listing line formats of tpd, shared by FTP
 * (LIST, NLST, MLSD, MLST) and HTTP (directory GET): one entry's
 * attributes to an "ls -l" style line, a bare name, or an RFC 3659 fact
 * list.
 *
 * Pure: no I/O (the caller supplies the stat and the clock), no
 * allocation, no globals; calls only libc (stdio, string, time).  Fuzzed
 * by fuzz/fuzz_http.c; declared in tpd.h, used by vfs.c's lister and
 * ftp_cmds.c (MLST).
 */
#include "tpd.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

/*
 * MLST/MLSD fact list for st, "type=..;size=..;modify=..;perm=..;" with
 * no trailing name.  type overrides the derived type (e.g. "cdir").
 * Returns the snprintf result (may exceed sz: output truncated).
 */
int vfs_mlst_line(const struct stat *st, const char *type, bool writable,
                  char *buf, size_t sz)
{
    char mod[32];
    struct tm tm;
    gmtime_r(&st->st_mtime, &tm);
    if (strftime(mod, sizeof(mod), "%Y%m%d%H%M%S", &tm) == 0)
        strcpy(mod, "19700101000000");
    if (!type)
        type = S_ISDIR(st->st_mode) ? "dir" : S_ISREG(st->st_mode) ? "file"
             : S_ISLNK(st->st_mode) ? "OS.unix=slink" : "OS.unix=special";
    const char *perm = S_ISDIR(st->st_mode) ? (writable ? "flcdmpe" : "el")
                                            : (writable ? "adfrw" : "r");
    return snprintf(buf, sz,
                    "type=%s;size=%lld;modify=%s;perm=%s;unix.mode=0%o;"
                    "unique=%llxU%llx;",
                    type, (long long)st->st_size, mod, perm,
                    (unsigned)(st->st_mode & 07777),
                    (unsigned long long)st->st_dev,
                    (unsigned long long)st->st_ino);
}

/* "drwxr-xr-x"-style mode string. */
static void mode_str(mode_t m, char *s)
{
    s[0] = S_ISDIR(m) ? 'd' : S_ISLNK(m) ? 'l' : S_ISREG(m) ? '-' :
           S_ISFIFO(m) ? 'p' : S_ISSOCK(m) ? 's' : S_ISCHR(m) ? 'c' :
           S_ISBLK(m) ? 'b' : '?';
    const char *rwx = "rwxrwxrwx";
    for (int i = 0; i < 9; i++)
        s[i + 1] = (m & (1u << (8 - i))) ? rwx[i] : '-';
    s[10] = '\0';
}

/*
 * Format one directory-listing line (CRLF-terminated) for entry `name`
 * with attributes st: style LS_NLST (name only), LS_MLSD (RFC 3659 facts)
 * or LS_LIST (ls -l style; `link` is the symlink target or NULL; `now`
 * decides between the "Mon dd HH:MM" and "Mon dd  YYYY" date forms).
 * Writes at most sz - 1 bytes plus a NUL; sz must be >= LIST_LINE_MAX.
 * Returns the line length (always < sz, always ending in CRLF) or -1.
 */
int list_format_line(int style, const char *name, const struct stat *st,
                     const char *link, bool writable, time_t now,
                     char *line, size_t sz)
{
    int n;
    if (sz < LIST_LINE_MAX)
        return -1;
    if (style == LS_NLST) {
        n = snprintf(line, sz, "%s\r\n", name);
    } else if (style == LS_MLSD) {
        n = vfs_mlst_line(st, NULL, writable, line, sz);
        if (n < 0 || (size_t)n >= sz)
            return -1;
        n += snprintf(line + n, sz - (size_t)n, " %s\r\n", name);
    } else {
        char ms[11], date[32];
        struct tm tm;
        mode_str(st->st_mode, ms);
        localtime_r(&st->st_mtime, &tm);
        size_t dl;
        if (st->st_mtime > now - 180 * 86400 && st->st_mtime < now + 3600)
            dl = strftime(date, sizeof(date), "%b %e %H:%M", &tm);
        else
            dl = strftime(date, sizeof(date), "%b %e  %Y", &tm);
        if (dl == 0)
            strcpy(date, "Jan  1  1970");
        n = snprintf(line, sz, "%s %3lu ftp      ftp      %12lld %s %s%s%s\r\n",
                     ms, (unsigned long)st->st_nlink, (long long)st->st_size,
                     date, name, link ? " -> " : "", link ? link : "");
    }
    if (n < 0)
        return -1;
    if ((size_t)n >= sz) {                 /* truncated: keep the CRLF */
        n = (int)sz - 1;
        line[n - 2] = '\r';
        line[n - 1] = '\n';
        line[n] = '\0';
    }
    return n;
}
