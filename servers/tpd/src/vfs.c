/*
 * vfs.c - confined file access and directory listings.
 *
 * Every path a client names is first normalised lexically (vpath_join in
 * vpath.c: "..", "." and duplicate slashes can never climb above the
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
 *
 * Calls vpath.c, listing.c (the line formats) and logging.
 */
#include "tpd.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
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
 * Does a component of normalised vpath begin with TMP_PREFIX?  Such names
 * are upload temporaries (see struct upload): clients cannot open, list,
 * create, rename or delete them.
 */
bool vfs_reserved_path(const char *vpath)
{
    return strstr(vpath, "/" TMP_PREFIX) != NULL ||
           strncmp(vpath, TMP_PREFIX, sizeof(TMP_PREFIX) - 1) == 0;
}

/*
 * Open normalised virtual path vpath below u's home.  flags are open(2)
 * flags (O_CLOEXEC is added); mode is used with O_CREAT.  Returns a
 * descriptor or -1 with errno set (EXDEV/ELOOP for escape attempts).
 */
int vfs_open(const struct user *u, const char *vpath, int flags, mode_t mode)
{
    if (vfs_reserved_path(vpath)) {
        errno = EACCES;
        return -1;
    }
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
    if (vfs_reserved_path(vpath)) {
        errno = EACCES;
        return -1;
    }
    memcpy(parent, vpath, pl);
    parent[pl] = '\0';
    *name = slash + 1;
    return vfs_open(u, parent, O_PATH | O_DIRECTORY, 0);
}

/*
 * A directory listing being streamed.  Holds the open directory stream and
 * at most one formatted line that did not fit the caller's last buffer, so
 * the memory of a listing in progress is bounded (about LIST_LINE_MAX plus
 * the DIR buffer) whatever the size of the directory.
 */
struct lister {
    DIR *d;                /* NULL for a single-file listing             */
    int style;             /* LS_*                                       */
    bool writable;
    bool done;
    int count;             /* entries produced (LIST_MAX_ENTRIES cap)    */
    size_t plen;           /* pending line length (0 = none)             */
    char pending[LIST_LINE_MAX];
};

/* Format one entry of l into l->pending. */
static void lister_format(struct lister *l, int dirfd, const char *name,
                          const struct stat *st)
{
    char target[VPATH_MAX];
    const char *link = NULL;
    if (l->style == LS_LIST && S_ISLNK(st->st_mode) && dirfd >= 0) {
        ssize_t n = readlinkat(dirfd, name, target, sizeof(target) - 1);
        if (n > 0) {
            target[n] = '\0';
            link = target;
        }
    }
    int n = list_format_line(l->style, name, st, link, l->writable,
                             time(NULL), l->pending, sizeof(l->pending));
    l->plen = n > 0 ? (size_t)n : 0;
}

/*
 * Start a LIST / NLST / MLSD listing of vpath.  A regular file lists as
 * itself for LIST and NLST.  Returns the lister (free with
 * vfs_list_close) or NULL with errno set (ENOTDIR for MLSD of a file).
 */
struct lister *vfs_list_open(const struct user *u, const char *vpath,
                             int style)
{
    struct lister *l = malloc(sizeof(*l));
    if (!l)
        return NULL;
    memset(l, 0, offsetof(struct lister, pending));
    l->style = style;
    l->writable = u->can_write;
    int fd = vfs_open(u, vpath, O_RDONLY | O_DIRECTORY, 0);
    if (fd < 0) {
        if (errno == ENOTDIR && style != LS_MLSD) {
            struct stat st;
            int f2 = vfs_open(u, vpath, O_PATH, 0);
            int r = f2 >= 0 ? fstat(f2, &st) : -1;
            int e = errno;
            if (f2 >= 0)
                close(f2);
            if (r < 0) {
                free(l);
                errno = e;
                return NULL;
            }
            const char *base = strrchr(vpath, '/');
            lister_format(l, -1, base ? base + 1 : vpath, &st);
            l->done = true;
            return l;
        }
        free(l);
        return NULL;
    }
    l->d = fdopendir(fd);
    if (!l->d) {
        int e = errno;
        close(fd);
        free(l);
        errno = e;
        return NULL;
    }
    return l;
}

/*
 * Copy the next whole listing lines into buf (cap >= LIST_LINE_MAX bytes).
 * Returns the bytes written, 0 at the end of the listing.
 */
ssize_t vfs_list_read(struct lister *l, char *buf, size_t cap)
{
    size_t o = 0;
    for (;;) {
        if (l->plen) {
            if (o + l->plen > cap)
                break;
            memcpy(buf + o, l->pending, l->plen);
            o += l->plen;
            l->plen = 0;
        }
        if (l->done || !l->d)
            break;
        struct dirent *de = readdir(l->d);
        if (!de || l->count >= LIST_MAX_ENTRIES) {
            l->done = true;
            break;
        }
        if (de->d_name[0] == '.' &&
            (de->d_name[1] == '\0' ||
             (de->d_name[1] == '.' && de->d_name[2] == '\0') ||
             !strncmp(de->d_name, TMP_PREFIX, sizeof(TMP_PREFIX) - 1)))
            continue;
        struct stat st;
        if (fstatat(dirfd(l->d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
            continue;
        lister_format(l, dirfd(l->d), de->d_name, &st);
        l->count++;
    }
    return (ssize_t)o;
}

/* Release a lister (NULL is fine). */
void vfs_list_close(struct lister *l)
{
    if (!l)
        return;
    if (l->d)
        closedir(l->d);
    free(l);
}

/* A fresh unpredictable temporary name: TMP_PREFIX + 16 hex digits. */
static void random_tmp_name(char *out, size_t cap)
{
    uint64_t r;
    if (getrandom(&r, sizeof(r), 0) != (ssize_t)sizeof(r)) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        r = ((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)ts.tv_sec ^
            ((uint64_t)getpid() << 40) ^ (uint64_t)(uintptr_t)out;
    }
    snprintf(out, cap, TMP_PREFIX "%016llx", (unsigned long long)r);
}

/*
 * Open a temporary file for an upload that replaces vpath.  The parent
 * directory is opened beneath u's home; the file is an unnamed O_TMPFILE
 * inode in it, so an unfinished upload is never visible and a crash leaves
 * nothing behind.  Filesystems without O_TMPFILE get a named file with an
 * unpredictable reserved name (TMP_PREFIX + 64 random bits, O_EXCL, never
 * following symlinks).  *existed tells whether vpath existed; an existing
 * file's permission bits are kept.  Returns the write descriptor and fills
 * *up, or -1 with errno set (EISDIR if vpath is a directory, EPERM for the
 * root, EACCES for a non-regular target or a reserved name).
 */
int vfs_upload_open(const struct user *u, const char *vpath,
                    struct upload *up, bool *existed)
{
    const char *name;
    struct stat st;
    up->dirfd = up->fd = -1;
    up->tmp[0] = '\0';
    up->name = NULL;
    *existed = false;
    int probe = vfs_open(u, vpath, O_PATH, 0);
    if (probe >= 0) {
        int r = fstat(probe, &st);
        close(probe);
        if (r < 0)
            return -1;
        if (S_ISDIR(st.st_mode)) {
            errno = EISDIR;
            return -1;
        }
        if (!S_ISREG(st.st_mode)) {
            errno = EACCES;
            return -1;
        }
        *existed = true;
    } else if (errno != ENOENT) {
        return -1;              /* e.g. EXDEV: a symlink leaving the home */
    }
    int dfd = vfs_open_parent(u, vpath, &name);
    if (dfd < 0)
        return -1;
    up->name = strdup(name);
    if (!up->name) {
        close(dfd);
        errno = ENOMEM;
        return -1;
    }
    mode_t mode = *existed ? (st.st_mode & 0777) : 0644;
    /* O_TMPFILE needs a real directory descriptor, not O_PATH */
    int wd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int fd = wd < 0 ? -1 : openat(wd, ".", O_TMPFILE | O_WRONLY | O_NONBLOCK |
                                  O_NOCTTY | O_CLOEXEC, mode);
    if (wd >= 0)
        close(wd);
    if (fd >= 0) {
        up->fd = dup(fd);
        if (up->fd < 0) {
            int e = errno;
            close(fd);
            close(dfd);
            free(up->name);
            up->name = NULL;
            errno = e;
            return -1;
        }
    } else if (errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL) {
        for (int i = 0; i < 16; i++) {
            random_tmp_name(up->tmp, sizeof(up->tmp));
            fd = openat(dfd, up->tmp, O_WRONLY | O_CREAT | O_EXCL |
                        O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, mode);
            if (fd >= 0 || errno != EEXIST)
                break;
        }
        if (fd < 0)
            up->tmp[0] = '\0';
    }
    if (fd < 0) {
        int e = errno;
        close(dfd);
        free(up->name);
        up->name = NULL;
        errno = e;
        return -1;
    }
    if (*existed)
        (void)fchmod(fd, st.st_mode & 0777);  /* keep the old mode (not umask'd) */
    up->dirfd = dfd;
    return fd;
}

/*
 * Give an O_TMPFILE inode the reserved name up->tmp in up->dirfd.  linkat
 * through /proc/self/fd needs no privilege; AT_EMPTY_PATH (which needs
 * CAP_DAC_READ_SEARCH) is the fallback where /proc is not mounted.
 */
static int link_tmpfile(struct upload *up)
{
    char proc[64];
    snprintf(proc, sizeof(proc), "/proc/self/fd/%d", up->fd);
    for (int i = 0; i < 16; i++) {
        random_tmp_name(up->tmp, sizeof(up->tmp));
        int r = linkat(AT_FDCWD, proc, up->dirfd, up->tmp, AT_SYMLINK_FOLLOW);
        if (r < 0 && errno == ENOENT)
            r = linkat(up->fd, "", up->dirfd, up->tmp, AT_EMPTY_PATH);
        if (r == 0)
            return 0;
        if (errno != EEXIST)
            break;
    }
    up->tmp[0] = '\0';
    return -1;
}

/* Release what an upload holds; the temporary name, if any, is unlinked. */
static void upload_release(struct upload *up)
{
    if (up->tmp[0])
        unlinkat(up->dirfd, up->tmp, 0);
    up->tmp[0] = '\0';
    if (up->fd >= 0)
        close(up->fd);
    up->fd = -1;
    close(up->dirfd);
    up->dirfd = -1;
    free(up->name);
    up->name = NULL;
}

/*
 * Put the finished upload in place of its target: an O_TMPFILE inode is
 * linked under a reserved name, then renamed over the target (rename(2)
 * replaces atomically: readers see the old file or the new one).  Returns
 * 0 or -1 (errno); either way the upload is released.
 */
int vfs_upload_commit(struct upload *up)
{
    if (up->dirfd < 0)
        return 0;
    int r = 0;
    if (up->fd >= 0)
        r = link_tmpfile(up);
    if (r == 0)
        r = renameat(up->dirfd, up->tmp, up->dirfd, up->name);
    int e = errno;
    if (r == 0)
        up->tmp[0] = '\0';     /* renamed: nothing to unlink */
    upload_release(up);
    errno = e;
    return r;
}

/* Discard a failed upload: the temporary inode or name goes, the target stays. */
void vfs_upload_abort(struct upload *up)
{
    if (up->dirfd < 0)
        return;
    upload_release(up);
}
