/*
 * libvirt_domain.c - resolves a libvirt domain name to its QEMU process id
 * (see libvirt_domain.h for the steps).
 */
#include "libvirt_domain.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

/* The largest command line we look at for "-uuid". */
#define CMDLINE_MAX (256 * 1024)

/* libvirt prints every error on stderr unless told otherwise: we report
 * them ourselves, with context. */
static void quiet_errors(void *ctx, virErrorPtr e)
{
	(void)ctx;
	(void)e;
}

static const char *last_error(void)
{
	const char *m = virGetLastErrorMessage();
	return m ? m : "unknown libvirt error";
}

static bool parse_pid(const char *s, pid_t *pid)
{
	long v = 0;
	size_t i = 0;
	for (; isdigit((unsigned char)s[i]); i++) {
		v = v * 10 + (s[i] - '0');
		if (v > INT_MAX)
			return false;
	}
	while (s[i] == '\n' || s[i] == ' ')
		i++;
	if (i == 0 || s[i] != '\0' || v <= 0)
		return false;
	*pid = (pid_t)v;
	return true;
}

int libvirt_read_pid_file(const char *path, pid_t *pid, struct vp_error *err)
{
	char buf[32];
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return vp_errorf(err, "%s: %s", path, strerror(errno));
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	int e = errno;
	close(fd);
	if (n < 0)
		return vp_errorf(err, "%s: %s", path, strerror(e));
	buf[n] = '\0';
	if (!parse_pid(buf, pid))
		return vp_errorf(err, "%s: not a process id", path);
	return 0;
}

/* Reads /proc/PID/cmdline (NUL-separated) into a malloc'ed buffer. */
static char *read_cmdline(const char *path, size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	char *buf = malloc(CMDLINE_MAX + 1);
	size_t n = 0;
	ssize_t r;
	while (buf && n < CMDLINE_MAX &&
	       (r = read(fd, buf + n, CMDLINE_MAX - n)) > 0)
		n += (size_t)r;
	close(fd);
	if (buf)
		buf[n] = '\0';
	*len = n;
	return buf;
}

/* Whether argv (NUL-separated, len bytes) has "-uuid" then uuid. */
static bool has_uuid_arg(const char *argv, size_t len, const char *uuid)
{
	const char *p = argv, *end = argv + len;
	bool after_flag = false;
	while (p < end) {
		size_t l = strnlen(p, (size_t)(end - p));
		if (after_flag && strcasecmp(p, uuid) == 0)
			return true;
		after_flag = strcmp(p, "-uuid") == 0;
		p += l + 1;
	}
	return false;
}

int libvirt_find_qemu_by_uuid(const char *proc_root, const char *uuid,
			      pid_t *pid, struct vp_error *err)
{
	DIR *d = opendir(proc_root);
	if (!d)
		return vp_errorf(err, "%s: %s", proc_root, strerror(errno));
	struct dirent *de;
	bool found = false;
	while (!found && (de = readdir(d))) {
		pid_t p;
		if (!parse_pid(de->d_name, &p))
			continue;
		char path[PATH_MAX];
		size_t len;
		snprintf(path, sizeof(path), "%s/%s/cmdline", proc_root,
			 de->d_name);
		char *argv = read_cmdline(path, &len);
		if (argv && has_uuid_arg(argv, len, uuid)) {
			*pid = p;
			found = true;
		}
		free(argv);
	}
	closedir(d);
	if (!found)
		return vp_errorf(err, "no process under %s has -uuid %s",
				 proc_root, uuid);
	return 0;
}

/* The pid file libvirt's QEMU driver keeps for a running domain. */
static void pid_file_path(const char *uri, const char *name, char *out,
			  size_t cap)
{
	const char *xdg = getenv("XDG_RUNTIME_DIR");
	if (strstr(uri, "/session") && xdg && xdg[0])
		snprintf(out, cap, "%s/libvirt/qemu/run/%s.pid", xdg, name);
	else
		snprintf(out, cap, "/run/libvirt/qemu/%s.pid", name);
}

/* Checked after the connection gave a running QEMU domain. */
static int qemu_pid(virDomainPtr dom, const char *uri, const char *name,
		    pid_t *pid, struct vp_error *err)
{
	char path[PATH_MAX], uuid[VIR_UUID_STRING_BUFLEN];
	struct vp_error e1 = {{0}}, e2 = {{0}};

	pid_file_path(uri, name, path, sizeof(path));
	if (libvirt_read_pid_file(path, pid, &e1) == 0) {
		if (kill(*pid, 0) == 0 || errno == EPERM)
			return 0;
		vp_errorf(&e1, "%s: process %d is gone", path, (int)*pid);
	}
	if (virDomainGetUUIDString(dom, uuid) < 0)
		return vp_errorf(err,
				 "domain \"%s\": no QEMU pid (pid file: %s; "
				 "uuid: %s)",
				 name, e1.msg, last_error());
	if (libvirt_find_qemu_by_uuid("/proc", uuid, pid, &e2) == 0)
		return 0;
	return vp_errorf(err,
			 "domain \"%s\": cannot find its QEMU process (pid "
			 "file: %s; by uuid: %s); give --vm-pid instead",
			 name, e1.msg, e2.msg);
}

int libvirt_domain_pid(const char *uri, const char *name, pid_t *pid,
		       struct vp_error *err)
{
	if (!uri)
		uri = LIBVIRT_DEFAULT_URI;
	virSetErrorFunc(NULL, quiet_errors);
	virConnectPtr conn = virConnectOpenReadOnly(uri);
	if (!conn)
		return vp_errorf(err, "libvirt %s: cannot connect: %s", uri,
				 last_error());
	int rc = -1;
	virDomainPtr dom = virDomainLookupByName(conn, name);
	if (!dom) {
		vp_errorf(err, "libvirt %s: no domain \"%s\": %s", uri, name,
			  last_error());
		goto out;
	}
	int active = virDomainIsActive(dom);
	if (active < 0) {
		vp_errorf(err, "libvirt %s: domain \"%s\": %s", uri, name,
			  last_error());
		goto out;
	}
	if (!active) {
		vp_errorf(err, "libvirt %s: domain \"%s\" is not running", uri,
			  name);
		goto out;
	}
	const char *type = virConnectGetType(conn);
	if (!type || strcasecmp(type, "QEMU") != 0) {
		vp_errorf(err,
			  "libvirt %s: domain \"%s\" runs under the %s "
			  "driver, not QEMU: it has no QEMU process pid "
			  "(give --vm-pid instead)",
			  uri, name, type ? type : "unknown");
		goto out;
	}
	if (qemu_pid(dom, uri, name, pid, err) < 0) {
		char m[VP_ERROR_MAX];
		snprintf(m, sizeof(m), "%s", err ? err->msg : "");
		vp_errorf(err, "libvirt %s: %s", uri, m);
		goto out;
	}
	rc = 0;
out:
	if (dom)
		virDomainFree(dom);
	virConnectClose(conn);
	return rc;
}
