/*
 * vfs.c - confined file access and directory listings.
 *
 * Every path a client names is first normalised lexically (vpath_join in
 * parse.c: "..", "." and duplicate slashes can never climb above the
 * virtual root), then opened relative to the user's home descriptor with
 * openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS): the kernel refuses any
 * resolution - including through symlinks, absolute or relative - that
 * would leave the home.  Operations without an openat2 form (unlink,
 * mkdir, rmdir, rename) open the parent directory that way and act on the
 * last component only, which never follows a symlink.
 *
 * If the kernel lacks openat2 (ENOSYS, e.g. old seccomp profiles), a
 * weaker fallback opens with openat() and verifies /proc/self/fd/N lies
 * below realpath(home) before using the descriptor.
 */
#include "tpd.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static bool g_no_openat2;

/* Fallback confinement check: is fd below the user's real home? */
static int check_beneath(const struct user *u, int fd)
{
    char link[64], target[VPATH_MAX + 256];
    snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, target, sizeof(target) - 1);
    if (n < 0)
        return -1;
    target[n] = '\0';
    size_t hl = strlen(u->home_real);
    if (strncmp(target, u->home_real, hl) != 0)
        return -1;
    if (target[hl] != '\0' && target[hl] != '/' && strcmp(u->home_real, "/"))
        return -1;
    return 0;
}

/*
 * Open normalised virtual path vpath below u's home.  flags are open(2)
 * flags (O_CLOEXEC is added); mode is used with O_CREAT.  Returns a
 * descriptor or -1 with errno set (EXDEV/ELOOP for escape attempts).
 */
int vfs_open(const struct user *u, const char *vpath, int flags, mode_t mode)
{
    const char *rel = vpath_rel(vpath);
    if (!g_no_openat2) {
        struct open_how how;
        memset(&how, 0, sizeof(how));
        how.flags = (uint64_t)(flags | O_CLOEXEC);
        how.mode = (flags & O_CREAT) ? mode : 0;
        how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
        long fd;
        do {
            fd = syscall(SYS_openat2, u->home_fd, rel, &how, sizeof(how));
        } while (fd < 0 && errno == EAGAIN);
        if (fd >= 0 || errno != ENOSYS)
            return (int)fd;
        g_no_openat2 = true;
        log_warn("openat2 unavailable: using realpath confinement fallback");
    }
    int fd = openat(u->home_fd, rel, flags | O_CLOEXEC, mode);
    if (fd >= 0 && check_beneath(u, fd) != 0) {
        close(fd);
        errno = EXDEV;
        return -1;
    }
    return fd;
}

/*
 * Open the parent directory of vpath (O_PATH) beneath u's home and point
 * *name at the last component.  Fails with EPERM for the root itself.
 */
int vfs_open_parent(const struct user *u, const char *vpath, const char **name)
{
    char parent[VPATH_MAX];
    const char *slash = strrchr(vpath, '/');
    if (!slash || slash[1] == '\0') {
        errno = EPERM;
        return -1;
    }
    size_t pl = (size_t)(slash - vpath);
    if (pl == 0)
        pl = 1;                           /* parent is "/" */
    if (pl >= sizeof(parent)) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(parent, vpath, pl);
    parent[pl] = '\0';
    *name = slash + 1;
    return vfs_open(u, parent, O_PATH | O_DIRECTORY, 0);
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
 * MLST/MLSD fact list for st, "type=..;size=..;modify=..;perm=..;" with
 * no trailing name.  type overrides the derived type (e.g. "cdir").
 */
int vfs_mlst_line(const struct stat *st, const char *type, bool writable,
                  char *buf, size_t sz)
{
    char mod[32];
    struct tm tm;
    gmtime_r(&st->st_mtime, &tm);
    strftime(mod, sizeof(mod), "%Y%m%d%H%M%S", &tm);
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

/* Append one listing entry in the requested style. */
static int list_entry(int dirfd, const char *name, const struct stat *st,
                      int style, bool writable, struct obuf *out)
{
    char line[VPATH_MAX * 2 + 512];
    int n;
    if (style == LS_NLST) {
        n = snprintf(line, sizeof(line), "%s\r\n", name);
    } else if (style == LS_MLSD) {
        n = vfs_mlst_line(st, NULL, writable, line, sizeof(line));
        n += snprintf(line + n, sizeof(line) - (size_t)n, " %s\r\n", name);
    } else {
        char ms[11], date[32], target[VPATH_MAX] = "";
        struct tm tm;
        mode_str(st->st_mode, ms);
        localtime_r(&st->st_mtime, &tm);
        time_t now = time(NULL);
        if (st->st_mtime > now - 180 * 86400 && st->st_mtime < now + 3600)
            strftime(date, sizeof(date), "%b %e %H:%M", &tm);
        else
            strftime(date, sizeof(date), "%b %e  %Y", &tm);
        if (S_ISLNK(st->st_mode) && dirfd >= 0) {
            ssize_t l = readlinkat(dirfd, name, target + 4, sizeof(target) - 5);
            if (l > 0) {
                memcpy(target, " -> ", 4);
                target[4 + l] = '\0';
            }
        }
        n = snprintf(line, sizeof(line), "%s %3lu ftp      ftp      %12lld %s %s%s\r\n",
                     ms, (unsigned long)st->st_nlink, (long long)st->st_size,
                     date, name, target);
    }
    if (n < 0)
        return -1;
    if ((size_t)n >= sizeof(line))
        n = sizeof(line) - 1;
    return obuf_append(out, line, (size_t)n, (size_t)1 << 30);
}

/*
 * Produce a LIST / NLST / MLSD listing of vpath into out.  A regular file
 * lists as itself for LIST and NLST.  Returns 0 or -1 with errno set.
 */
int vfs_list(const struct user *u, const char *vpath, int style,
             struct obuf *out)
{
    int fd = vfs_open(u, vpath, O_RDONLY | O_DIRECTORY, 0);
    if (fd < 0) {
        if (errno == ENOTDIR && style != LS_MLSD) {
            struct stat st;
            int f2 = vfs_open(u, vpath, O_PATH, 0);
            if (f2 < 0)
                return -1;
            int r = fstat(f2, &st);
            close(f2);
            if (r < 0)
                return -1;
            const char *base = strrchr(vpath, '/');
            return list_entry(-1, base ? base + 1 : vpath, &st, style,
                              u->can_write, out);
        }
        return -1;
    }
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        return -1;
    }
    struct dirent *de;
    int count = 0;
    while ((de = readdir(d)) != NULL && count < LIST_MAX_ENTRIES) {
        if (de->d_name[0] == '.' &&
            (de->d_name[1] == '\0' ||
             (de->d_name[1] == '.' && de->d_name[2] == '\0')))
            continue;
        struct stat st;
        if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
            continue;
        if (list_entry(dirfd(d), de->d_name, &st, style, u->can_write, out))
            break;
        count++;
    }
    closedir(d);
    return 0;
}
