/*
 * record_domain.c - a libvirt domain's vperfetto channels, vsock CID and
 * QEMU pid, from its live XML (see record_domain.h).
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include "libvirt_domain.h"
#include "record_domain.h"
#include "vp_log.h"

/* A bounded view of the document. */
struct xml {
	const char *base;
	size_t len;
};

/* The offset of the next occurrence of s at or after from, or len. */
static size_t find(const struct xml *x, size_t from, const char *s)
{
	size_t n = strlen(s);
	for (size_t i = from; i + n <= x->len; i++)
		if (memcmp(x->base + i, s, n) == 0)
			return i;
	return x->len;
}

/* The start tag named tag (e.g. "<source") at or after from and before
 * end: sets [*t0, *t1) to the tag's bytes up to its '>'.  false if none. */
static bool find_tag(const struct xml *x, size_t from, size_t end,
		     const char *tag, size_t *t0, size_t *t1)
{
	size_t n = strlen(tag);
	for (size_t i = find(x, from, tag); i < end; i = find(x, i + 1, tag)) {
		char c = i + n < x->len ? x->base[i + n] : 0;
		if (c != ' ' && c != '\t' && c != '\n' && c != '>' && c != '/')
			continue; /* "<sourcefoo" */
		size_t close = find(x, i, ">");
		if (close >= end)
			return false;
		*t0 = i;
		*t1 = close;
		return true;
	}
	return false;
}

/* Decodes the value of attribute `name` in the tag [t0, t1) into out.
 * Returns 1 found, 0 absent, -1 malformed (err set). */
static int attr(const struct xml *x, size_t t0, size_t t1, const char *name,
		char *out, size_t out_len, struct vp_error *err)
{
	size_t n = strlen(name);
	for (size_t i = t0; i + n + 2 <= t1; i++) {
		const char *p = x->base + i;
		if (i == t0 || memcmp(p, name, n) != 0 || p[n] != '=' ||
		    (p[-1] != ' ' && p[-1] != '\t' && p[-1] != '\n'))
			continue;
		char q = p[n + 1];
		if (q != '\'' && q != '"')
			return vp_errorf(err, "domain XML: byte %zu: attribute "
					 "%s is not quoted", i, name);
		size_t o = 0;
		for (size_t j = i + n + 2; j < t1; j++) {
			char c = x->base[j];
			if (c == q) {
				out[o] = 0;
				return 1;
			}
			if (c == '&') {
				static const struct {
					const char *ent;
					char c;
				} ents[] = {{"&amp;", '&'}, {"&lt;", '<'},
					    {"&gt;", '>'}, {"&apos;", '\''},
					    {"&quot;", '"'}};
				size_t k;
				for (k = 0; k < 5; k++) {
					size_t el = strlen(ents[k].ent);
					if (j + el <= t1 &&
					    !memcmp(x->base + j, ents[k].ent, el))
						break;
				}
				if (k == 5)
					return vp_errorf(err, "domain XML: byte "
							 "%zu: unknown entity",
							 j);
				c = ents[k].c;
				j += strlen(ents[k].ent) - 1;
			}
			if (o + 1 >= out_len)
				return vp_errorf(err, "domain XML: byte %zu: "
						 "attribute %s too long", i,
						 name);
			out[o++] = c;
		}
		return vp_errorf(err, "domain XML: byte %zu: attribute %s is "
				 "not terminated", i, name);
	}
	return 0;
}

/* The element starting at tag offset t0: its end (after "/>" or the
 * matching "</name>"; elements of these names do not nest). */
static size_t element_end(const struct xml *x, size_t t0, size_t t1,
			  const char *close)
{
	if (t1 > t0 && x->base[t1 - 1] == '/')
		return t1 + 1;
	size_t e = find(x, t1, close);
	return e < x->len ? e + strlen(close) : x->len;
}

static int scan_channels(const struct xml *x, struct record_guest_addr *out,
			 struct vp_error *err)
{
	size_t t0, t1, pos = 0;
	while (find_tag(x, pos, x->len, "<channel", &t0, &t1)) {
		size_t end = element_end(x, t0, t1, "</channel>");
		size_t s0, s1, g0, g1;
		char path[PATH_MAX], name[128], type[32];
		pos = end;
		if (!find_tag(x, t1, end, "<target", &g0, &g1))
			continue;
		int r = attr(x, g0, g1, "name", name, sizeof(name), err);
		if (r < 0)
			return -1;
		if (r == 0)
			continue;
		r = attr(x, g0, g1, "type", type, sizeof(type), err);
		if (r < 0)
			return -1;
		if (r == 0 || strcmp(type, "virtio") != 0)
			continue;
		char *dst = NULL;
		if (strcmp(name, RECORD_CONTROL_PORT_NAME) == 0)
			dst = out->control;
		else if (strcmp(name, RECORD_SYNC_PORT_NAME) == 0)
			dst = out->sync;
		if (!dst)
			continue;
		if (!find_tag(x, t1, end, "<source", &s0, &s1))
			continue;
		r = attr(x, s0, s1, "path", path, sizeof(path), err);
		if (r < 0)
			return -1;
		if (r > 0)
			snprintf(dst, PATH_MAX, "%s", path);
	}
	return 0;
}

static int scan_vsock(const struct xml *x, struct record_guest_addr *out,
		      struct vp_error *err)
{
	size_t t0, t1, c0, c1;
	char cid[32];
	if (!find_tag(x, 0, x->len, "<vsock", &t0, &t1))
		return 0;
	size_t end = element_end(x, t0, t1, "</vsock>");
	if (!find_tag(x, t1, end, "<cid", &c0, &c1))
		return 0;
	int r = attr(x, c0, c1, "address", cid, sizeof(cid), err);
	if (r <= 0)
		return r;
	char *e;
	unsigned long v = strtoul(cid, &e, 10);
	if (*e || v < 3 || v > 0xffffffffu)
		return vp_errorf(err, "domain XML: byte %zu: vsock cid '%s' "
				 "is not a guest CID", c0, cid);
	out->vsock_cid = (unsigned)v;
	return 0;
}

int record_domain_parse_xml(const char *xml, size_t len,
			    struct record_guest_addr *out,
			    struct vp_error *err)
{
	struct xml x = {xml, len};
	memset(out, 0, sizeof(*out));
	if (scan_channels(&x, out, err) < 0 || scan_vsock(&x, out, err) < 0)
		return -1;
	return 0;
}

int record_domain_resolve(const char *uri, const char *name,
			  struct record_guest_addr *out, struct vp_error *err)
{
	const char *u = uri ? uri : LIBVIRT_DEFAULT_URI;
	virConnectPtr conn = virConnectOpenReadOnly(u);
	if (!conn) {
		const virError *e = virGetLastError();
		return vp_errorf(err, "libvirt: cannot connect to %s: %s", u,
				 e && e->message ? e->message : "unknown error");
	}
	virDomainPtr dom = virDomainLookupByName(conn, name);
	if (!dom) {
		const virError *e = virGetLastError();
		vp_errorf(err, "libvirt: no domain '%s' on %s: %s", name, u,
			  e && e->message ? e->message : "unknown error");
		virConnectClose(conn);
		return -1;
	}
	char *xml = virDomainGetXMLDesc(dom, 0);
	int rc = 0;
	if (!xml) {
		const virError *e = virGetLastError();
		rc = vp_errorf(err, "libvirt: domain '%s': no XML: %s", name,
			       e && e->message ? e->message : "unknown error");
	} else {
		rc = record_domain_parse_xml(xml, strlen(xml), out, err);
		free(xml);
	}
	virDomainFree(dom);
	virConnectClose(conn);
	if (rc < 0)
		return -1;
	if (!out->control[0] && !out->vsock_cid)
		return vp_errorf(err, "libvirt: domain '%s' has neither a "
				 "virtio-serial channel named %s nor a vsock "
				 "device (see vm-images/domain.xml.in)", name,
				 RECORD_CONTROL_PORT_NAME);
	pid_t pid;
	struct vp_error perr = {{0}};
	if (libvirt_domain_pid(uri, name, &pid, &perr) == 0)
		out->qemu_pid = pid;
	else
		vp_log_warn("%s; no KVM counter offsets will be recorded",
			    perr.msg);
	return 0;
}
