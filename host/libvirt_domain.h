/*
 * libvirt_domain.h - finds the QEMU process of a libvirt domain, so that
 * `--domain NAME` can stand for `--vm-pid PID`.
 *
 * How: a read-only connection (virConnectOpenReadOnly; looking up needs no
 * more, and it is what unprivileged users may open on qemu:///system),
 * virDomainLookupByName, a check that the domain runs and that the driver
 * is QEMU's.  libvirt's API has no call that returns the QEMU pid, so
 * then:
 *   1. libvirt's pid file: /run/libvirt/qemu/NAME.pid for qemu:///system,
 *      $XDG_RUNTIME_DIR/libvirt/qemu/run/NAME.pid for qemu:///session;
 *   2. failing that (the file is root's), the process whose command line
 *      carries the domain's `-uuid UUID` (libvirt always passes it).
 * Each failure says which step failed and why.
 */
#ifndef HOST_LIBVIRT_DOMAIN_H
#define HOST_LIBVIRT_DOMAIN_H

#include <sys/types.h>

#include "vp_error.h"

#define LIBVIRT_DEFAULT_URI "qemu:///system"

/* The QEMU pid of domain `name` on `uri` (NULL: qemu:///system). */
int libvirt_domain_pid(const char *uri, const char *name, pid_t *pid,
		       struct vp_error *err);

/* The steps above, exposed for tests. */
/* A pid file: a positive decimal, optionally newline-terminated. */
int libvirt_read_pid_file(const char *path, pid_t *pid, struct vp_error *err);
/* The process under proc_root (normally "/proc") whose argv has "-uuid"
 * followed by uuid.  Returns 0, or -1 when there is none. */
int libvirt_find_qemu_by_uuid(const char *proc_root, const char *uuid,
			      pid_t *pid, struct vp_error *err);

#endif
