/*
 * test_record_domain.c - unit tests of vperfetto_record's reading of a
 * libvirt domain XML: the vperfetto channels' socket paths, the vsock
 * CID, entities, and malformed attributes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "record_domain.h"

static const char domain_xml[] =
	"<domain type='qemu' id='4'>\n"
	"  <name>vp-test</name>\n"
	"  <devices>\n"
	"    <channel type='unix'>\n"
	"      <source mode='bind' path='/var/lib/libvirt/qemu/channel/"
	"target/domain-4-vp-test/org.qemu.guest_agent.0'/>\n"
	"      <target type='virtio' name='org.qemu.guest_agent.0' "
	"state='disconnected'/>\n"
	"    </channel>\n"
	"    <channel type='unix'>\n"
	"      <source mode='bind' path='/run/vp/a&amp;b/control.sock'/>\n"
	"      <target type='virtio' name='org.vperfetto.control'/>\n"
	"      <alias name='channel1'/>\n"
	"    </channel>\n"
	"    <channel type=\"unix\">\n"
	"      <source mode=\"bind\" path=\"/run/vp/sync.sock\"/>\n"
	"      <target type=\"virtio\" name=\"org.vperfetto.sync\"/>\n"
	"    </channel>\n"
	"    <vsock model='virtio'>\n"
	"      <cid auto='yes' address='7'/>\n"
	"    </vsock>\n"
	"  </devices>\n"
	"</domain>\n";

static void test_channels_and_cid(void **state)
{
	(void)state;
	struct record_guest_addr a;
	struct vp_error err = {{0}};
	assert_int_equal(record_domain_parse_xml(domain_xml,
						 strlen(domain_xml), &a, &err),
			 0);
	assert_string_equal(a.control, "/run/vp/a&b/control.sock");
	assert_string_equal(a.sync, "/run/vp/sync.sock");
	assert_int_equal(a.vsock_cid, 7);
	assert_int_equal(a.qemu_pid, 0);
}

static void test_nothing_of_ours(void **state)
{
	(void)state;
	static const char xml[] =
		"<domain><devices><channel type='pty'><target type='serial' "
		"name='org.vperfetto.control'/></channel><vsock model='virtio'>"
		"<cid auto='yes'/></vsock></devices></domain>";
	struct record_guest_addr a;
	struct vp_error err = {{0}};
	assert_int_equal(record_domain_parse_xml(xml, strlen(xml), &a, &err),
			 0);
	assert_string_equal(a.control, "");
	assert_string_equal(a.sync, "");
	assert_int_equal(a.vsock_cid, 0);
}

static void expect_error(const char *xml, const char *what)
{
	struct record_guest_addr a;
	struct vp_error err = {{0}};
	assert_int_equal(record_domain_parse_xml(xml, strlen(xml), &a, &err),
			 -1);
	assert_non_null(strstr(err.msg, what));
	assert_non_null(strstr(err.msg, "byte "));
}

static void test_malformed(void **state)
{
	(void)state;
	expect_error("<channel><source path='/x/y'/><target type='virtio' "
		     "name='org.vperfetto.control></channel>",
		     "not terminated");
	expect_error("<channel><source path=/x/y/><target type='virtio' "
		     "name='org.vperfetto.sync'/></channel>",
		     "not quoted");
	expect_error("<channel><source path='/x&nbsp;y'/><target "
		     "type='virtio' name='org.vperfetto.sync'/></channel>",
		     "unknown entity");
	expect_error("<vsock><cid address='2'/></vsock>", "not a guest CID");
	expect_error("<vsock><cid address='12x'/></vsock>", "not a guest CID");
}

/* Not NUL-terminated at len: nothing past it is read. */
static void test_bounded(void **state)
{
	(void)state;
	struct record_guest_addr a;
	struct vp_error err = {{0}};
	size_t cut = (size_t)(strstr(domain_xml, "<vsock") - domain_xml);
	assert_int_equal(record_domain_parse_xml(domain_xml, cut, &a, &err), 0);
	assert_int_equal(a.vsock_cid, 0);
	assert_string_equal(a.sync, "/run/vp/sync.sock");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_channels_and_cid),
		cmocka_unit_test(test_nothing_of_ours),
		cmocka_unit_test(test_malformed),
		cmocka_unit_test(test_bounded),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
