/*
 * ftrace_tracefs.c - tracefs mount, instance set-up and restore for
 * linux.ftrace (see ftrace_tracefs.h).
 */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <tracefs/tracefs.h>

#include "ftrace_tracefs.h"
#include "vp_log.h"

#define PRIVATE_PREFIX "vtraced_probes."
#define DEFAULT_MOUNT "/sys/kernel/tracing"

static atomic_uint g_instance_counter;

bool ft_tracefs_valid_name(const char *name, bool allow_star)
{
	if (!name || !*name || strlen(name) > 200 || !strcmp(name, ".") ||
	    !strcmp(name, ".."))
		return false;
	for (const char *p = name; *p; p++) {
		char c = *p;
		bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			  (c >= '0' && c <= '9') || c == '_' || c == '-' ||
			  c == '.' || (allow_star && c == '*');
		if (!ok)
			return false;
	}
	return true;
}

static bool is_tracefs_dir(const char *dir)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/trace_clock", dir);
	return access(path, F_OK) == 0;
}

char *ft_tracefs_find(const char *opt_dir, struct vp_error *err)
{
	if (opt_dir) {
		if (!is_tracefs_dir(opt_dir)) {
			vp_errorf(err, "%s is not a tracefs mount (no "
				  "trace_clock there)", opt_dir);
			return NULL;
		}
		return strdup(opt_dir);
	}
	/* libtracefs looks in /proc/mounts (and keeps the answer). */
	const char *path = tracefs_tracing_dir();
	if (path && is_tracefs_dir(path))
		return strdup(path);
	/* Not mounted: mount it where it usually lives. */
	if (mount("nodev", DEFAULT_MOUNT, "tracefs", 0, NULL) != 0 &&
	    errno != EBUSY) {
		vp_errorf(err, "tracefs is not mounted and mounting it at %s "
			  "failed: %s", DEFAULT_MOUNT, strerror(errno));
		return NULL;
	}
	if (!is_tracefs_dir(DEFAULT_MOUNT)) {
		vp_errorf(err, "tracefs is not usable at %s", DEFAULT_MOUNT);
		return NULL;
	}
	return strdup(DEFAULT_MOUNT);
}

/* "vtraced_probes.<pid>.<n>" of a process that no longer exists? */
static bool stale_private(const char *name)
{
	char *end;
	if (strncmp(name, PRIVATE_PREFIX, strlen(PRIVATE_PREFIX)) != 0)
		return false;
	long pid = strtol(name + strlen(PRIVATE_PREFIX), &end, 10);
	if (pid <= 0 || *end != '.' || pid == (long)getpid())
		return false;
	return kill((pid_t)pid, 0) != 0 && errno == ESRCH;
}

void ft_tracefs_cleanup_stale(const char *dir)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/instances", dir);
	DIR *d = opendir(path);
	if (!d)
		return;
	struct dirent *de;
	while ((de = readdir(d)) != NULL) {
		if (!stale_private(de->d_name))
			continue;
		char p[4096 + 256];
		snprintf(p, sizeof p, "%s/%s", path, de->d_name);
		if (rmdir(p) == 0)
			vp_log_warn("linux.ftrace: removed "
					"the stale tracefs instance %s\n",
				de->d_name);
	}
	closedir(d);
}

static int instance_path(char *buf, size_t n, const char *dir,
			 const char *name)
{
	int r = snprintf(buf, n, "%s/instances/%s", dir, name);
	return r > 0 && (size_t)r < n ? 0 : -1;
}

/* Creates the instance directory; 1 if it was created, 0 if it existed,
 * -1 on error (errno). */
static int make_instance(const char *dir, const char *name)
{
	char path[4096];
	if (instance_path(path, sizeof path, dir, name) != 0) {
		errno = ENAMETOOLONG;
		return -1;
	}
	if (mkdir(path, 0755) == 0)
		return 1;
	if (errno != EEXIST)
		return -1;
	struct stat st;
	if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) {
		errno = ENOTDIR;
		return -1;
	}
	return 0;
}

/* The selected clock of a trace_clock file ("[boot]"), malloc'ed. */
static char *selected_clock(const char *text)
{
	const char *a = text ? strchr(text, '[') : NULL;
	const char *b = a ? strchr(a, ']') : NULL;
	if (!a || !b)
		return NULL;
	return strndup(a + 1, (size_t)(b - a - 1));
}

static void save_state(struct ft_tracefs *fs)
{
	char *clk = tracefs_instance_file_read(fs->ti, "trace_clock", NULL);
	fs->saved_clock = selected_clock(clk);
	free(clk);
	fs->saved_set_event = tracefs_instance_file_read(fs->ti, "set_event",
							 NULL);
	if (tracefs_instance_file_read_number(fs->ti, "buffer_size_kb",
					      &fs->saved_buffer_kb) != 0)
		fs->saved_buffer_kb = -1;
	if (tracefs_instance_file_read_number(fs->ti, "tracing_on",
					      &fs->saved_tracing_on) != 0)
		fs->saved_tracing_on = -1;
	fs->saved = true;
}

static void restore_state(struct ft_tracefs *fs)
{
	char num[32];

	tracefs_trace_off(fs->ti);
	/* set_event opened with O_TRUNC disables every event; then each
	 * saved one is enabled again. */
	tracefs_instance_file_write(fs->ti, "set_event", "");
	const char *p = fs->saved_set_event;
	while (p && *p) {
		const char *nl = strchr(p, '\n');
		size_t len = nl ? (size_t)(nl - p) : strlen(p);
		if (len > 0 && len < 512) {
			char line[514];
			memcpy(line, p, len);
			line[len] = '\n';
			line[len + 1] = 0;
			tracefs_instance_file_append(fs->ti, "set_event", line);
		}
		p = nl ? nl + 1 : p + len;
	}
	if (fs->saved_clock)
		tracefs_instance_file_write(fs->ti, "trace_clock",
					    fs->saved_clock);
	if (fs->saved_buffer_kb > 0) {
		snprintf(num, sizeof num, "%lld", fs->saved_buffer_kb);
		tracefs_instance_file_write(fs->ti, "buffer_size_kb", num);
	}
	if (fs->saved_tracing_on >= 0)
		tracefs_instance_file_write(fs->ti, "tracing_on",
					    fs->saved_tracing_on ? "1" : "0");
}

/* Writes str to the instance's file; 0, or -1 with err set. */
static int write_file(struct ft_tracefs *fs, const char *file,
		      const char *str, struct vp_error *err)
{
	if (tracefs_instance_file_write(fs->ti, file, str) < 0)
		return vp_errorf(err, "writing '%s' to %s/instances/%s/%s "
				 "failed: %s", str, fs->dir, fs->name, file,
				 strerror(errno));
	return 0;
}

static int create_or_take(struct ft_tracefs *fs, const char *dir,
			  const char *instance_name, struct vp_error *err)
{
	if (instance_name) {
		int r = make_instance(dir, instance_name);
		if (r < 0)
			return vp_errorf(err, "cannot create the tracefs "
					 "instance %s/instances/%s: %s", dir,
					 instance_name, strerror(errno));
		fs->name = strdup(instance_name);
		fs->created = r == 1;
		return fs->name ? 0 : vp_errorf(err, "out of memory");
	}
	for (int tries = 0; tries < 100; tries++) {
		char name[64];
		snprintf(name, sizeof name, PRIVATE_PREFIX "%d.%u",
			 (int)getpid(), atomic_fetch_add(&g_instance_counter,
							 1));
		int r = make_instance(dir, name);
		if (r < 0)
			return vp_errorf(err, "cannot create the tracefs "
					 "instance %s/instances/%s: %s", dir,
					 name, strerror(errno));
		if (r == 0)
			continue; /* someone else's; take the next number */
		fs->name = strdup(name);
		fs->created = true;
		return fs->name ? 0 : vp_errorf(err, "out of memory");
	}
	return vp_errorf(err, "no free private tracefs instance name in "
			 "%s/instances", dir);
}

int ft_tracefs_open(struct ft_tracefs *fs, const char *dir,
		    const char *instance_name, unsigned buffer_kb,
		    struct vp_error *err)
{
	memset(fs, 0, sizeof *fs);
	fs->dir = strdup(dir);
	if (!fs->dir)
		return vp_errorf(err, "out of memory");
	if (create_or_take(fs, dir, instance_name, err) != 0) {
		ft_tracefs_close(fs);
		return -1;
	}
	fs->ti = tracefs_instance_alloc(dir, fs->name);
	if (!fs->ti) {
		vp_errorf(err, "libtracefs cannot open the instance "
			  "%s/instances/%s: %s", dir, fs->name,
			  strerror(errno));
		ft_tracefs_close(fs);
		return -1;
	}
	if (!fs->created)
		save_state(fs);
	char num[32];
	snprintf(num, sizeof num, "%u", buffer_kb);
	if (write_file(fs, "tracing_on", "0", err) != 0 ||
	    write_file(fs, "trace_clock", "boot", err) != 0 ||
	    (buffer_kb && write_file(fs, "buffer_size_kb", num, err) != 0)) {
		ft_tracefs_close(fs);
		return -1;
	}
	if (!fs->created) {
		/* Start from no events and an empty buffer. */
		tracefs_instance_file_write(fs->ti, "set_event", "");
		tracefs_instance_file_clear(fs->ti, "trace");
	}
	return 0;
}

int ft_tracefs_enable(struct ft_tracefs *fs, const char *sys,
		      const char *name)
{
	char file[600];
	if (name)
		snprintf(file, sizeof file, "events/%s/%s/enable", sys, name);
	else
		snprintf(file, sizeof file, "events/%s/enable", sys);
	return tracefs_instance_file_write(fs->ti, file, "1") < 0 ? -1 : 0;
}

int ft_tracefs_copy_markers(struct ft_tracefs *fs)
{
	if (!fs->created)
		return -1;
	return tracefs_instance_file_write(fs->ti, "options/copy_trace_marker",
					   "1") < 0 ? -1 : 0;
}

int ft_tracefs_tracing(struct ft_tracefs *fs, bool on)
{
	return on ? tracefs_trace_on(fs->ti) : tracefs_trace_off(fs->ti);
}

char *ft_tracefs_cpu_stats(struct ft_tracefs *fs, int cpu)
{
	char file[64];
	snprintf(file, sizeof file, "per_cpu/cpu%d/stats", cpu);
	return tracefs_instance_file_read(fs->ti, file, NULL);
}

void ft_tracefs_close(struct ft_tracefs *fs)
{
	if (fs->ti) {
		if (fs->created) {
			tracefs_trace_off(fs->ti);
			tracefs_instance_file_write(fs->ti, "set_event", "");
		} else if (fs->saved) {
			restore_state(fs);
		}
		tracefs_instance_free(fs->ti);
	}
	if (fs->created && fs->dir && fs->name) {
		char path[4096];
		if (instance_path(path, sizeof path, fs->dir, fs->name) == 0 &&
		    rmdir(path) != 0)
			vp_log_warn("linux.ftrace: cannot "
					"remove the tracefs instance %s: %s\n",
				path, strerror(errno));
	}
	free(fs->dir);
	free(fs->name);
	free(fs->saved_clock);
	free(fs->saved_set_event);
	memset(fs, 0, sizeof *fs);
}
