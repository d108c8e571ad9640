/*
 * record_domain.h - where vperfetto_record reaches a guest: its control
 * and sync channels (virtio-serial ports named org.vperfetto.control and
 * org.vperfetto.sync, whose host ends are UNIX sockets), its vsock CID,
 * and the QEMU pid (for KVM's debugfs).
 *
 * For a libvirt domain they come from the live domain XML
 * (virDomainGetXMLDesc on a read-only connection): each
 *   <channel type='unix'><source mode='bind' path='P'/>
 *            <target type='virtio' name='org.vperfetto.control'/></channel>
 * gives a path, <vsock><cid address='N'/></vsock> the CID; the pid comes
 * from libvirt_domain.h.  The XML scanner reads only those elements and
 * attributes, as libvirt writes them (quoted attributes, the five
 * predefined entities).
 */
#ifndef HOST_RECORD_DOMAIN_H
#define HOST_RECORD_DOMAIN_H

#include <limits.h>
#include <sys/types.h>

#include "vp_error.h"

#define RECORD_CONTROL_PORT_NAME "org.vperfetto.control"
#define RECORD_SYNC_PORT_NAME "org.vperfetto.sync"
#define RECORD_CONTROL_VSOCK_PORT 20021u

struct record_guest_addr {
	char control[PATH_MAX]; /* control channel socket; "" if none */
	char sync[PATH_MAX];    /* sync channel socket; "" if none */
	unsigned vsock_cid;     /* 0: no vsock device */
	pid_t qemu_pid;         /* 0: unknown */
};

/* Fills the channel paths and CID from a domain XML.  0, or -1 with a
 * message naming the byte offset of what is malformed. */
int record_domain_parse_xml(const char *xml, size_t len,
			    struct record_guest_addr *out,
			    struct vp_error *err);

/* The same for domain `name` on `uri` (NULL: qemu:///system), and its
 * QEMU pid (0 with a warning on stderr when it cannot be found: tracing
 * goes on without KVM's counter offsets). */
int record_domain_resolve(const char *uri, const char *name,
			  struct record_guest_addr *out, struct vp_error *err);

#endif
